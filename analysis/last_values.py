"""Add each run's last-evaluation value of chosen metrics to a committed runs.csv.

    python -m analysis.last_values SWEEP_DIR SUMMARY_DIR [COLUMN ...]

A run summary (``runs.csv``) holds events (fit, grok, collapse) but not the state a run ended
in; the reproduction's Fourier claim reads the concentration above chance of the effective
unembedding at each run's last evaluation (the grok step, for runs that stop when they grok).
This reads the sweep's ``metrics/`` Parquet (not committed: it regenerates from the sweep file)
and writes ``<column>_last`` beside each run's row, so the claim can be re-stated from the
committed summary alone.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sweepgrok.store.sink import read_metrics

DEFAULT_COLUMNS = ("fourier_above_chance", "fourier_unembed_above_chance")
"""The token embedding's and the effective unembedding's concentration above chance."""


def last_values(metrics: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """One row per run_id: each column's value at the run's last evaluation (largest step)."""
    last = metrics.sort_values(["run_id", "step"]).groupby("run_id").tail(1)
    return last.set_index("run_id")[list(columns)].add_suffix("_last")


def add_last_values(
    summary: pd.DataFrame, metrics: pd.DataFrame, columns: Sequence[str]
) -> pd.DataFrame:
    """The summary with ``<column>_last`` columns (replacing earlier ones; NaN for runs without
    metrics)."""
    values = last_values(metrics, columns)
    kept = summary.drop(columns=[c for c in values.columns if c in summary])
    return kept.join(values, on="run_id")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    sweep, folder = Path(args[0]), Path(args[1])
    columns = args[2:] or list(DEFAULT_COLUMNS)
    path = folder / "runs.csv"
    metrics = read_metrics(sweep, ["run_id", "step", *columns])
    summary = add_last_values(pd.read_csv(path), metrics, columns)
    summary.to_csv(path, index=False)
    print(f"wrote {len(columns)} columns into {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
