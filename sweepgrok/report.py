"""Turn sweep folders into a Markdown report with PNG figures and CSV tables.

Run as ``sweepgrok report SWEEP_DIR... --out DIR`` (or ``python -m analysis.report``, the same).
Writes DIR/report.md, DIR/groups_<t>.csv (one per threshold), DIR/runs.csv (one row per run) and
DIR/figures/*.png. Reads Parquet only (sweepgrok.stats, sweepgrok.plots): no Ray, no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sweepgrok import comparisons, plots, stats
from sweepgrok.events import GROK_THRESHOLDS
from sweepgrok.tables import Format, render

THRESHOLDS = GROK_THRESHOLDS
"""Each goes in the tables when every run could see it (runs that stopped at their grok step at
0.95 cannot be judged at 0.99); the figures use one (the one asked for, else the runs' own)."""


def _overview(summary: pd.DataFrame, sources: Sequence[str]) -> list[str]:
    status = summary.get("status", pd.Series(dtype=str)).fillna("no run row")
    counts = ", ".join(f"{k} {v}" for k, v in status.value_counts().items())
    return [
        f"Sweeps: {', '.join(f'`{d}`' for d in sources)}.",
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
    paired: bool = False,
    skip_damaged: bool = False,
) -> Path:
    """Write the report folder of sweep folders; returns report.md (AnalysisError on bad input,
    sweepgrok.parts.DamagedPart on a damaged part file unless `skip_damaged`)."""
    metrics, summary, pending = stats.load_recorded_runs(sweep_dirs, skip_damaged=skip_damaged)
    sources = [Path(d).resolve().name for d in sweep_dirs]  # names, never machine paths
    return write_report(
        summary, out, by, baseline, threshold, paired, metrics=metrics, sources=sources,
        pending=pending,
    )


def report_thresholds(summary: pd.DataFrame, threshold: float | None) -> tuple[list[float], float]:
    """(thresholds every run could see, the one the figures use)."""
    supported = comparisons.supported_thresholds(summary)
    if not supported:
        raise stats.AnalysisError("no threshold is seen by every run", "threshold")
    if threshold is not None:
        comparisons.check_threshold(summary, threshold)
        return supported, threshold
    own = stats.default_threshold(summary)
    return supported, own if own in supported else supported[0]


def write_report(
    summary: pd.DataFrame,
    out: Path,
    by: Sequence[str] | None = None,
    baseline: str | None = None,
    threshold: float | None = None,
    paired: bool = False,
    *,
    metrics: pd.DataFrame | None = None,
    sources: Sequence[str] = (),
    pending: int = 0,
) -> Path:
    """Write report.md, groups_<t>.csv, runs.csv and figures/ from a run summary.

    Without `metrics` (a summary read back from a committed runs.csv) the figures are those a
    summary carries (grok times, survival, heatmap).
    """
    keys = stats.resolve_by(summary, by)
    thresholds, threshold = report_thresholds(summary, threshold)
    out.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out / "runs.csv", index=False)
    lines = ["# Sweep report", "", *_overview(summary, sources), ""]
    if pending:
        lines += [
            f"{pending} run(s) with metrics but no runs/ row yet (still running?) are left out.",
            "",
        ]
    lines += [f"Grouped by: {', '.join(f'`{k}`' for k in keys) or 'nothing (one group)'}."]
    skipped = [t for t in THRESHOLDS if t not in thresholds]
    if skipped:
        lines += [
            "",
            f"Not reported at {', '.join(f'{t:g}' for t in skipped)}: some runs stopped when "
            "they grokked at a lower threshold and never saw it.",
        ]
    tables = {}
    for theta in thresholds:
        table = comparisons.analysis_table(summary, keys, baseline, paired=paired, threshold=theta)
        table.to_csv(out / f"groups_{stats.tag(theta)}.csv", index=False)
        tables[theta] = table
        lines += ["", f"## Grokking at test accuracy >= {theta:g}", ""]
        lines += [render(table, keys, Format.markdown, theta).rstrip()]
    lines += _collapse_lines(tables[threshold])
    figures_dir = out / "figures"
    figures = (
        plots.plot_all(metrics, summary, keys, figures_dir, threshold)
        if metrics is not None
        else plots.plot_summary_figures(summary, keys, figures_dir, threshold)
    )
    lines += ["", f"## Figures (grok = test accuracy >= {threshold:g})", ""]
    lines += [f"![{p.stem}](figures/{p.name})" for p in figures]
    csvs = ", ".join(f"`groups_{stats.tag(t)}.csv`" for t in thresholds)
    lines += ["", f"Per-run values: `runs.csv`; group tables: {csvs}.", ""]
    report = out / "report.md"
    report.write_text("\n".join(lines))
    return report
