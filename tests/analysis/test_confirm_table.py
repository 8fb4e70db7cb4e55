"""sweepgrok.analysis.confirm_table against hand-computed values: KM medians, speed-ups, the
exact log-rank p, Holm over the stage's comparisons, the winner's curse."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sweepgrok.analysis import confirm_table as ct
from sweepgrok.search.confirm import Arm, Stage

GROKS = {
    "search_1": [200, 300, 400, 500],
    "search_2": [1000, 1100, 1200, 1300],
    "baseline": [1000, 1100, 1200, 1300],
}
STAGE = Stage("study", "grok_step", 0.95, 2000, [101, 102], [1, 2, 3, 4], [
    Arm("search_1", {"geomdr.lambda_max": 0.1}, trial=7, search_value=250.0),
    Arm("search_2", {"geomdr.lambda_max": 0.3}, trial=3, search_value=400.0, capped=True),
    Arm("baseline", {"geomdr.enabled": False}),
])


def summary(groks: dict[str, list[float | None]] = GROKS) -> pd.DataFrame:
    rows = []
    for arm, steps in groks.items():
        for i, step in enumerate(steps):
            done = step is not None
            rows.append({"run_id": f"{arm}-{i}", "arm": arm, "train.seed": i + 1,
                         "status": "grokked" if done else "censored",
                         "steps_run": step if done else 2000, "train.max_steps": 2000,
                         "grok_step_95": float(step) if done else math.nan,
                         "geomdr.lambda_max": arm})  # fmt: skip
    return pd.DataFrame(rows)


def test_medians_speedups_p_and_holm_by_hand() -> None:
    table = ct.confirm_table(summary(), STAGE).set_index("arm")
    # 4 events, none censored: S = 0.5 exactly after the 2nd, so the median is the midpoint of
    # the 2nd and 3rd (R survfit): (300 + 400) / 2 and (1100 + 1200) / 2.
    assert table.loc["search_1", "km_median"] == 350.0
    assert table.loc["baseline", "km_median"] == 1150.0
    assert table.loc["search_1", "speedup_baseline"] == pytest.approx(1150 / 350)
    # Complete separation of 4 vs 4: 2 of the C(8, 4) = 70 labellings are as extreme.
    assert table.loc["search_1", "p_baseline"] == pytest.approx(2 / 70)
    assert table.loc["search_2", "p_baseline"] == pytest.approx(1.0)
    # Holm over the stage's 2 comparisons: 2/70 * 2, then max(that, 1) = 1.
    assert table.loc["search_1", "p_holm_baseline"] == pytest.approx(4 / 70)
    assert table.loc["search_2", "p_holm_baseline"] == pytest.approx(1.0)
    assert math.isnan(table.loc["baseline", "p_baseline"])
    assert ct.family_size(table.reset_index()) == 2
    # The winner's curse: confirm KM median / search objective.
    assert table.loc["search_1", "curse"] == pytest.approx(350 / 250)
    assert table.loc["search_2", "curse"] == pytest.approx(1150 / 400)
    assert math.isnan(table.loc["baseline", "curse"])
    assert list(table["n"]) == [4, 4, 4] and list(table["grokked"]) == [4, 4, 4]


def test_the_cells_and_the_result_line() -> None:
    table = ct.confirm_table(summary(), STAGE)
    headers, rows = ct.display(table, STAGE.references, STAGE.budget)
    assert headers[:6] == ["arm", "search objective", "n", "grokked", "KM median [95% CI]",
                           "confirm / search"]  # fmt: skip
    assert rows[0][:4] == ["search_1", "250", "4", "4/4"] and rows[0][5] == "1.40"
    assert rows[1][1] == "400 (capped)" and rows[2][6] == "reference"
    assert rows[0][6].startswith("3.29 [") and rows[0][7] == "0.029"
    line = ct.result_line(table, STAGE)
    assert line.startswith("search_1 (search objective 250) on 4 fresh seeds: KM median 350 [")
    assert "vs baseline (n = 4, KM median 1,150 [" in line
    assert "speed-up 3.29 [" in line and "p = 0.029, p Holm = 0.057 (2 comparisons)" in line
    assert ct.plain(table, STAGE).splitlines()[0].startswith("arm       search objective")


def test_a_censored_reference_gives_a_bound_and_a_score_past_the_budget_says_censored() -> None:
    groks = {"search_1": [200, 300, 400, 500], "search_2": [300, 300, 300, 300],
             "baseline": [None, None, None, 1900]}  # fmt: skip
    stage = Stage("s", "grok_step", 0.95, 300, [9], [1, 2, 3, 4], [
        Arm("search_1", {}, trial=1, search_value=250.0),
        Arm("search_2", {}, trial=2, search_value=450.0), Arm("baseline", {})])
    table = ct.confirm_table(summary(groks), stage)
    assert math.isinf(table.loc[0, "speedup_baseline"])
    _, rows = ct.display(table, stage.references, stage.budget)
    assert rows[0][6] == f"> {2000 / 350:.2f} (a bound)"
    assert rows[1][1] == "450 (censored)"  # above the search's budget of 300
    assert rows[2][4] == "> 2,000"  # the baseline's median lies beyond its runs


def test_the_km_median_ci_is_seeded_and_brackets_the_median() -> None:
    times = np.array([200.0, 300, 400, 500, 600, 700])
    censored = np.zeros(6, bool)
    assert ct.km_median_ci(times, censored) == ct.km_median_ci(times, censored)
    median, lo, hi = ct.km_median_ci(times, censored)
    assert median == 450.0 and 200 <= lo <= median <= hi <= 700
