"""The accelerator comparison's committed summary, from the search_spaces/grids/accelerators.yaml
sweep.

    python -m analysis.accelerator_summary SWEEP_DIR... [--out OUT_DIR]

Each run is labelled with the lever it changes from the plain model (its *arm*: baseline, sphere,
uniform, geomdr, grokfast, stablemax_perp, wd0; a run that changes several gets their names
joined by '+'), and every arm is compared with the baseline of its own architecture at test accuracy
>= 0.95: Kaplan-Meier medians, speed-ups with bootstrap CIs, exact permutation log-rank p and
Holm over the table (the same statistics as ``sweepgrok report``, whose report folder this
writes: report.md, groups_95.csv, runs.csv and figures/). OUT_DIR defaults to
analysis/accelerators.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import provenance_summaries as provenance
from sweepgrok.analysis import stats
from sweepgrok.analysis.reporting import write_report
from sweepgrok.store.sink import read_runs

ARM_KEY = "accelerator.arm"
"""The derived grouping column: a dotted name, so that the report groups by it like a config key."""

BY = ("model.arch", ARM_KEY)
"""Each arm against the baseline of its architecture (the stratum)."""

BASELINE = f"{ARM_KEY}=baseline"
THRESHOLD = 0.95
"""The reproduction rules' threshold (analysis/REPRODUCTION.md)."""

DEFAULT_OUT = Path(__file__).parent / "accelerators"

LEVERS: dict[str, Callable[[Mapping[Any, Any]], bool]] = {
    "sphere": lambda c: c.get("model.norm") == "sphere",
    "uniform": lambda c: c.get("model.attention") == "uniform",
    "geomdr": lambda c: bool(c.get("geomdr.enabled")),
    "grokfast": lambda c: c.get("grokfast.kind", "none") not in ("none", None),
    "stablemax_perp": lambda c: c.get("optim.loss") == "stablemax"
    and bool(c.get("optim.perpendicular_grad")),
    "wd0": lambda c: c.get("optim.weight_decay") == 0,
}
"""Arm name -> whether a run's config (dotted keys) pulls that lever. StableMax and the
perpendicular gradient form one arm, as Prieto et al. use them together; wd0 is weight decay
off (every arm of accelerators.yaml keeps 1; accelerators_perp_wd0.yaml turns it off)."""


def arm(config: Mapping[Any, Any]) -> str:
    """The arm of one run: the levers it pulls joined by '+', or 'baseline' for none."""
    pulled = [name for name, pulls in LEVERS.items() if pulls(config)]
    return "+".join(pulled) or "baseline"


def with_arms(summary: pd.DataFrame) -> pd.DataFrame:
    """The run summary with the ARM_KEY column."""
    labelled = summary.copy()
    labelled[ARM_KEY] = [arm(row) for row in summary.to_dict("records")]
    return labelled


def write_summary(sweep_dirs: Sequence[Path], out: Path) -> Path:
    """Write the report folder for the accelerator sweep(s); returns its report.md."""
    metrics, summary, pending = stats.load_recorded_runs(sweep_dirs)
    sources = [Path(d).resolve().name for d in sweep_dirs]
    report = write_report(
        with_arms(summary), out, BY, BASELINE, THRESHOLD, metrics=metrics, sources=sources,
        pending=pending,
    )
    # runs.csv keeps each run's code commit and sweepgrok version (analysis.provenance_summaries).
    runs = read_runs(list(sweep_dirs))  # all columns: a sweep may predate provenance
    path = out / "runs.csv"
    provenance.add_provenance(pd.read_csv(path), runs).to_csv(path, index=False)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.accelerator_summary")
    parser.add_argument("sweeps", nargs="+", type=Path, help="sweep folders, analysed together")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the report folder")
    args = parser.parse_args(argv)
    try:
        report = write_summary(args.sweeps, args.out)
    except stats.AnalysisError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
