"""Quoted figures of the Optuna search: the compute its exact time cap saved, and its fANOVA
importances.
"""

from __future__ import annotations

import json

from analysis.quoted.common import REPRODUCTION, SUMMARIES, Quote, steps


def _optuna() -> str:
    """The Optuna search's compute saved by the exact time cap, and its fANOVA importances."""
    summary = json.loads((SUMMARIES / "repro_optuna_cpu" / "search_summary.json").read_text())
    c, imp = summary["compute"], summary["importances"]
    return (f"The exact time cap stopped {c['capped_runs']} of {c['runs']} runs once they could "
            f"no longer win and ran {steps(c['steps_run'])} steps instead of "
            f"{steps(c['steps_without_cap'])} ({c['saved_fraction']:.1%} saved); the fANOVA "
            f"importances are d* {imp['geomdr.target_dim']:.2f}, T_ramp "
            f"{imp['geomdr.ramp_steps']:.2f}, t_s {imp['geomdr.start_step']:.2f}, lambda_max "
            f"{imp['geomdr.lambda_max']:.2f}")


QUOTES: tuple[Quote, ...] = (
    # The Optuna search.
    Quote(REPRODUCTION, _optuna),
)  # fmt: skip
"""The Optuna search's quoted figures."""
