"""Turn sweep folders into a Markdown report with PNG figures and CSV tables.

    python -m analysis.report SWEEP_DIR [SWEEP_DIR ...] --out DIR
        [--by k1,k2] [--baseline k=v,...] [--threshold 0.95|0.99]

Writes DIR/report.md, DIR/groups_<t>.csv (one per threshold), DIR/runs.csv (one row per run) and
DIR/figures/*.png. Reads Parquet only (sweepgrok.stats, sweepgrok.plots): no Ray, no torch.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sweepgrok import plots, stats
from sweepgrok.cli_analyze import Format, render

THRESHOLDS = (0.95, 0.99)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m analysis.report", description=__doc__)
    ap.add_argument("sweep_dirs", nargs="+", type=Path, metavar="SWEEP_DIR")
    ap.add_argument("--out", type=Path, required=True, help="report folder (created)")
    ap.add_argument("--by", default=None, help="comma-separated config keys (default: varying)")
    ap.add_argument("--baseline", default=None, help="baseline runs as key=value[,key=value]")
    ap.add_argument(
        "--threshold",
        type=float,
        choices=THRESHOLDS,
        default=None,
        help="test accuracy of grokking for the figures (both go in the tables); default: "
        "the runs' train.grok_threshold when they share one, else 0.99",
    )
    return ap.parse_args(argv)


def _overview(summary: pd.DataFrame, dirs: Sequence[Path]) -> list[str]:
    status = summary.get("status", pd.Series(dtype=str)).fillna("no run row")
    counts = ", ".join(f"{k} {v}" for k, v in status.value_counts().items())
    return [
        f"Sweep folders: {', '.join(f'`{d}`' for d in dirs)}.",
        "",
        f"{len(summary)} runs ({counts}); longest run {summary['steps_run'].max():,} steps.",
    ]


def _collapse_lines(table: pd.DataFrame) -> list[str]:
    """Median collapse onset and collapse-to-grok gap per group (only with geometry)."""
    if table["collapse_median"].isna().all():
        return []
    lines = [
        "",
        "## Collapse and grokking",
        "",
        "| group | median collapse onset | median collapse-to-grok gap |",
        "|---|---|---|",
    ]
    for r in table.to_dict("records"):
        onset, gap = r["collapse_median"], r["collapse_to_grok_median"]
        cells = ["-" if pd.isna(x) else f"{x:,.0f}" for x in (onset, gap)]
        lines.append(f"| {r['label']} | {cells[0]} | {cells[1]} |")
    return lines


def build_report(
    sweep_dirs: Sequence[Path],
    out: Path,
    by: Sequence[str] | None = None,
    baseline: str | None = None,
    threshold: float | None = None,
) -> Path:
    """Write the report folder; returns the path of report.md (AnalysisError on bad input)."""
    metrics, runs = stats.read_sweeps(sweep_dirs)
    summary, pending = stats.recorded_runs(stats.run_summary(metrics, runs))
    keys = stats.resolve_by(summary, by)
    threshold = threshold or stats.default_threshold(summary)
    out.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out / "runs.csv", index=False)
    lines = ["# Sweep report", "", *_overview(summary, sweep_dirs), ""]
    if pending:
        lines += [
            f"{pending} run(s) with metrics but no runs/ row yet (still running?) are left out.",
            "",
        ]
    lines += [f"Grouped by: {', '.join(f'`{k}`' for k in keys) or 'nothing (one group)'}."]
    tables = {}
    for theta in THRESHOLDS:
        table = stats.analysis_table(summary, keys, baseline, threshold=theta)
        table.to_csv(out / f"groups_{stats.tag(theta)}.csv", index=False)
        tables[theta] = table
        lines += ["", f"## Grokking at test accuracy >= {theta:g}", ""]
        lines += [render(table, keys, Format.markdown, theta).rstrip()]
    lines += _collapse_lines(tables[threshold])
    figures = plots.plot_all(metrics, summary, keys, out / "figures", threshold)
    lines += ["", f"## Figures (grok = test accuracy >= {threshold:g})", ""]
    lines += [f"![{p.stem}](figures/{p.name})" for p in figures]
    lines += ["", "Per-run values: `runs.csv`; group tables: `groups_95.csv`, `groups_99.csv`.", ""]
    report = out / "report.md"
    report.write_text("\n".join(lines))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: exit 2 with a message (no traceback) on bad input."""
    args = _parse(argv)
    missing = [d for d in args.sweep_dirs if not d.is_dir()]
    if missing:
        print(f"error: SWEEP_DIR {missing[0]} is not a folder", file=sys.stderr)
        return 2
    by = [k.strip() for k in args.by.split(",") if k.strip()] if args.by else None
    try:
        report = build_report(args.sweep_dirs, args.out, by, args.baseline, args.threshold)
    except stats.AnalysisError as err:
        flag = f"--{err.param}" if err.param else "SWEEP_DIR"
        print(f"error: {flag}: {err}", file=sys.stderr)
        return 2
    print(f"wrote {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
