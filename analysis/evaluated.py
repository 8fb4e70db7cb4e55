"""Commit the evaluated columns of a sweep beside its run summary, so that every grok and fit
step a summary shows can be recomputed from committed files.

    python -m analysis.evaluated SWEEP_DIR... SUMMARY_DIR

Writes SUMMARY_DIR/metrics.parquet (zstd): one row per (run, evaluated step) with the
accuracies and losses (grok and fit steps), D_eff (the collapse onset), the weight norm, the
Fourier concentrations and the wall clock.
The sweep's own Parquet holds every column; these are the ones the summaries read. Several
sweep folders feed one summary where its runs.csv pools them (the accelerator comparison).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sweepgrok.core.errors import USER_ERROR, error_line
from sweepgrok.store.sink import read_metrics

COLUMNS = ("run_id", "step", "train_loss", "train_acc", "test_loss", "test_acc", "deff",
           "weight_norm", "fourier_above_chance", "fourier_unembed_above_chance",
           "wall_time")  # fmt: skip
"""The evaluated columns a committed summary keeps: the grok, fit and collapse steps' sources,
the Fourier concentrations whose last values the claims read (analysis.last_values), and the
wall clock the prose quotes step times from (summaries written before 2026-12-06 stop at
weight_norm)."""
FILE = "metrics.parquet"


def write_evaluated(sweep_dirs: Sequence[Path], summary_dir: Path) -> Path:
    """Write SUMMARY_DIR/metrics.parquet from the sweeps' metrics/ Parquet: the runs of the
    summary's runs.csv (the evaluations of runs that did not end, e.g. an interrupted
    sweep's, are not part of the summary)."""
    metrics = pd.concat([read_metrics(d) for d in sweep_dirs], ignore_index=True)
    summarized = pd.read_csv(summary_dir / "runs.csv", usecols=["run_id"])["run_id"]
    metrics = metrics[metrics["run_id"].isin(set(summarized))]
    kept = metrics[[c for c in COLUMNS if c in metrics.columns]]
    kept = kept.sort_values(["run_id", "step"]).reset_index(drop=True)
    path = summary_dir / FILE
    kept.to_parquet(path, compression="zstd", index=False)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        usage = "usage: python -m analysis.evaluated SWEEP_DIR... SUMMARY_DIR"
        print(error_line(usage), file=sys.stderr)
        return USER_ERROR
    *sweeps, summary = (Path(a) for a in args)
    if not (summary / "runs.csv").is_file():
        missing = f"{summary}: no runs.csv (write it with sweepgrok report first)"
        print(error_line(missing), file=sys.stderr)
        return USER_ERROR
    print(f"wrote {write_evaluated(sweeps, summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
