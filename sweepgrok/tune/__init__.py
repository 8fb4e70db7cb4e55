"""The Ray Tune adapter: the only package of sweepgrok that imports ``ray``.

- ``trainable``: the function trainable (one grid trial = one call of the shared trainer);
- ``callback``: the driver-side callback that writes every trial's rows to Parquet;
- ``launch``: Tuner construction, embedded or cluster Ray, ``--resume``.

Import the submodules directly; this file imports nothing so that ``import sweepgrok.tune``
does not start loading Ray.
"""
