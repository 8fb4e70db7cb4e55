"""The Ray Tune adapter: the only package of sweepgrok that imports ``ray``.

- ``trainable``: the function trainable (one grid trial = one call of the shared trainer);
- ``callback``: the driver-side callback that writes every trial's rows to Parquet;
- ``grid``: the Tuner of a grid (``sweepgrok launch``), embedded or cluster Ray, ``--resume``;
- ``search``: the Optuna search on Tune (``sweepgrok search``), with the exact time cap;
- ``prune``, ``progress``: safe checkpoint deletion, the live progress bar.

Import the submodules directly; this file imports nothing so that ``import sweepgrok.tune``
does not start loading Ray.
"""
