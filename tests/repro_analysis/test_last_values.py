"""analysis/last_values.py: each run's value at its last evaluation, joined onto runs.csv."""

from __future__ import annotations

import math

import pandas as pd

from analysis.last_values import add_last_values


def test_the_last_evaluation_by_step_not_by_row_order() -> None:
    metrics = pd.DataFrame(
        {
            "run_id": ["a", "a", "a", "b", "b"],
            "step": [200, 50, 100, 50, 100],
            "x": [0.9, 0.1, 0.5, 0.2, 0.3],
        }
    )
    summary = pd.DataFrame({"run_id": ["b", "a", "c"], "grok_step_95": [100, 200, None]})
    out = add_last_values(summary, metrics, ["x"])
    assert out["run_id"].tolist() == ["b", "a", "c"]
    assert out["x_last"].tolist()[:2] == [0.3, 0.9]
    assert math.isnan(out["x_last"].iloc[2])  # a run without metrics: no value, not a zero


def test_running_twice_replaces_the_column() -> None:
    metrics = pd.DataFrame({"run_id": ["a"], "step": [10], "x": [0.4]})
    summary = pd.DataFrame({"run_id": ["a"]})
    once = add_last_values(summary, metrics, ["x"])
    twice = add_last_values(once, metrics, ["x"])
    assert twice.columns.tolist() == ["run_id", "x_last"]
    assert twice["x_last"].tolist() == [0.4]
