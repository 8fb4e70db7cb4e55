"""Optuna search: the objective computed from a trial's rows (objective) and the study kept in a
sweep folder (study). Optuna is imported only inside functions.

Called, ``sweepgrok.search(file, ...)`` runs sweepgrok.api.running.search (sweepgrok/__init__.py
makes this package callable: the API function shares its name)."""
