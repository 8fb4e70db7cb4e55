"""Re-state the committed reproduction summaries with today's statistics, from their runs.csv.

    python -m analysis.restat [SWEEP ...]      # default: every sweep below

The raw Parquet of the CPU twins is not committed (it regenerates bit for bit from the sweep
files, in hours); each summary's `runs.csv` holds one row per run with its grok steps at 0.95 and
0.99, its status, steps run and full config: everything the group tables and comparisons need.
This rewrites `report.md`, `groups_<t>.csv` and the figures a run summary carries (grok times,
survival, heatmap) in `analysis/reproduction/<sweep>/`, with the arguments recorded below (the
same as the `sweepgrok report` commands in analysis/REPRODUCTION.md).

What a runs.csv cannot re-state: the collapse onset, whose definition changed (it is now looked
for from the fit step on) and needs the metrics/ curves. Its columns are blanked here rather
than shown under the old definition; `accuracy.png` and `deff.png` stay as the sweeps drew them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sweepgrok.analysis.reporting import write_report

HERE = Path(__file__).resolve().parent / "reproduction"

ARGS: dict[str, dict] = {
    "repro_paper1_cpu": {
        "baseline": "model.norm=layernorm,model.attention=softmax,optim.weight_decay=1",
        "threshold": 0.95,
    },
    "repro_s5_cpu": {"baseline": "model.norm=layernorm,optim.weight_decay=1", "threshold": 0.95},
    "repro_paper2_cpu": {
        "by": ["task.name", "geomdr.enabled"],
        "baseline": "geomdr.enabled=false",
        "threshold": 0.99,
    },
    "repro_transformer_geomdr_cpu": {"baseline": "geomdr.enabled=false", "threshold": 0.95},
    "repro_geomdr_grid_cpu": {"by": ["geomdr.target_dim", "geomdr.start_step"], "threshold": 0.99},
}
"""The report arguments of each committed sweep summary."""

COLLAPSE_COLUMNS = ("collapse_step", "collapse_to_grok_95", "collapse_to_grok_99")


def read_summary(path: Path) -> pd.DataFrame:
    """A committed runs.csv as a run summary, with the collapse columns blanked (see above)."""
    summary = pd.read_csv(path)
    for col in COLLAPSE_COLUMNS:
        if col in summary:
            summary[col] = pd.array([pd.NA] * len(summary), dtype="Int64")
    return summary


def restat(name: str) -> Path:
    """Rewrite one sweep's summary folder; returns its report.md."""
    folder = HERE / name
    summary = read_summary(folder / "runs.csv")
    args = ARGS[name]
    return write_report(
        summary,
        folder,
        args.get("by"),
        args.get("baseline"),
        args.get("threshold"),
        sources=[name],
    )


def main(argv: Sequence[str] | None = None) -> int:
    names = list(argv if argv is not None else sys.argv[1:]) or list(ARGS)
    unknown = [n for n in names if n not in ARGS]
    if unknown:
        print(f"error: unknown sweep {unknown[0]}; known: {', '.join(ARGS)}", file=sys.stderr)
        return 2
    for name in names:
        print(f"wrote {restat(name).relative_to(HERE.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
