"""What every study's quotes share: where the summaries and documents are, the `Quote` record,
reading a committed summary (`groups`, `line`) and printing its numbers as the prose does
(`steps`, `ratio`, `p2`, `share`, `value_range`, `span`), and the per-run figures several
studies quote (`km95`, `packed_step_seconds`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sweepgrok.analysis.stats import times_and_censoring
from sweepgrok.analysis.survival import km_median

ANALYSIS = Path(__file__).resolve().parents[1]
"""The analysis/ folder of the repository."""
ROOT = ANALYSIS.parent
SUMMARIES = ANALYSIS / "reproduction"
REPRODUCTION = "analysis/REPRODUCTION.md"
ACCELERATORS = "analysis/accelerators/README.md"


@dataclass(frozen=True)
class Quote:
    """A text one document must contain, computed from committed summaries."""

    doc: str
    """The document, relative to the repository root."""
    text: Callable[[], str]
    """The quoted text, from the summaries."""


def groups(sweep: str) -> pd.DataFrame:
    """A committed groups_95.csv (``../accelerators`` for the accelerator comparison)."""
    return pd.read_csv(SUMMARIES / sweep / "groups_95.csv")


def line(sweep: str, label: str) -> pd.Series:
    """The group line with this label (sweepgrok's group label)."""
    table = groups(sweep)
    return table[table["label"] == label].iloc[0]


def steps(x: float) -> str:
    return f"{x:,.0f}"


def ratio(g: pd.Series, unit: str = "x") -> str:
    """'3.57x [2.39, 4.14]': the speed-up and its CI, two decimals."""
    return f"{g['speedup']:.2f}{unit} [{g['speedup_lo']:.2f}, {g['speedup_hi']:.2f}]"


def p2(x: float) -> str:
    return f"{x:.2g}"


def share(values: pd.Series) -> str:
    """'3/8': how many runs have a value (a grok or fit step), of how many."""
    return f"{int(values.notna().sum())}/{values.size}"


def value_range(values: pd.Series, fmt: Callable[[float], str]) -> str:
    """'0.96-1.00': the smallest and largest value as `fmt` prints them ('0.96' when both
    print alike)."""
    low, high = fmt(values.min()), fmt(values.max())
    return low if low == high else f"{low}-{high}"


def span(values: pd.Series) -> str:
    """'750-1,700': the smallest and largest value (steps)."""
    return value_range(values, steps)


def km95(runs: pd.DataFrame) -> float:
    """The Kaplan-Meier median grok step of these runs at test accuracy 0.95."""
    return km_median(*times_and_censoring(runs, 0.95))


def packed_step_seconds(sweep: str, key: str, value: float) -> float:
    """Wall-clock seconds per step of one arm's packed trial, from step 100 (after the early
    evaluations) to the step where its first member stopped (all seeds still training)."""
    runs = pd.read_csv(SUMMARIES / sweep / "runs.csv")
    arm = set(runs.loc[runs[key] == value, "run_id"])
    columns = ["run_id", "step", "wall_time"]
    metrics = pd.read_parquet(SUMMARIES / sweep / "metrics.parquet", columns=columns)
    metrics = metrics[metrics["run_id"].isin(arm)]
    last = metrics.groupby("run_id")["step"].max().min()
    wall = metrics.groupby("step")["wall_time"].max()
    return float((wall[last] - wall[100]) / (last - 100))
