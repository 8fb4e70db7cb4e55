"""Optuna search: the objective computed from a trial's rows (objective) and the study kept in a
sweep folder (study). Optuna is imported only inside functions."""
