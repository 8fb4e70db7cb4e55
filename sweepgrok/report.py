"""Turn sweep folders into a Markdown report with PNG figures and CSV tables.

Run as ``sweepgrok report SWEEP_DIR... --out DIR`` (or ``python -m analysis.report``, the same).
Writes DIR/report.md, DIR/groups_<t>.csv (one per threshold), DIR/runs.csv (one row per run) and
DIR/figures/*.png. Reads Parquet only (sweepgrok.stats, sweepgrok.plots): no Ray, no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sweepgrok import plots, stats
from sweepgrok.tables import Format, render

THRESHOLDS = (0.95, 0.99)
"""Both go in the tables; the figures use one (the threshold asked for, else the runs' own)."""


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
