"""The best-weight rule of version 3's lambda control, on hand-made runs."""

from __future__ import annotations

import pandas as pd

from analysis.best_weight import best_weight, km_medians


def arm(kind: str, weight: float, groks: list[float | None], budget: int = 6000) -> list[dict]:
    return [
        {"geomdr.penalty": kind, "geomdr.lambda_max": weight, "grok_step_95": g,
         "steps_run": budget if g is None else g}
        for g in groks
    ]  # fmt: skip


def test_the_lowest_km_median_wins_and_a_tie_goes_to_the_smaller_weight() -> None:
    runs = pd.DataFrame(
        arm("tail", 0.03, [900, 1000, 1100]) + arm("tail", 0.1, [500, 600, 700])
        + arm("tail", 0.3, [500, 600, 700]) + arm("trace", 0.1, [100, 200, 300])
    )  # fmt: skip
    assert km_medians(runs, "tail") == {0.03: 1000.0, 0.1: 600.0, 0.3: 600.0}
    assert best_weight(runs, "tail") == 0.1
    assert best_weight(runs, "trace") == 0.1


def test_censored_runs_count_and_no_median_means_no_best_weight() -> None:
    # 1 of 3 grokked: under half, no median; 2 of 3: the median is the later grok step.
    runs = pd.DataFrame(
        arm("tail_fraction", 1.0, [800, None, None]) + arm("tail_fraction", 3.0, [900, 400, None])
    )  # fmt: skip
    medians = km_medians(runs, "tail_fraction")
    assert medians[3.0] == 900.0 and pd.isna(medians[1.0])
    assert best_weight(runs, "tail_fraction") == 3.0
    assert best_weight(runs[runs["geomdr.lambda_max"] == 1.0], "tail_fraction") is None


def test_the_claims_use_the_rules_pick_from_the_committed_summary() -> None:
    from analysis.best_weight import load
    from analysis.claims import BEST

    runs = load()
    assert {kind: best_weight(runs, kind) for kind in BEST} == BEST
