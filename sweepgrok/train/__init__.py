"""Training one trial: models, the trainer and its compiled step (graphstep), the batched-ensemble
tensor ops and GeomDR (ensemble, geometry), the measures read during training (evaluation,
progress_measures, fourier_losses), grokking accelerators, grok events, and one run from config
to rows (trainrun).

Called, ``sweepgrok.train(config, ...)`` runs sweepgrok.api.running.train (sweepgrok/__init__.py
makes this package callable: the API function shares its name)."""
