"""Turn sweep folders into a Markdown report with PNG figures and CSV tables, and on request one
self-contained HTML file.

Run as ``sweepgrok report SWEEP_DIR... --out DIR [--html]`` (or ``python -m analysis.report``, the
same). Writes DIR/report.md, DIR/groups_<t>.csv (one per threshold), DIR/runs.csv (one row per
run), DIR/figures/*.png and with --html DIR/report.html (sweepgrok.html_report). Reads Parquet
only (sweepgrok.stats, sweepgrok.plots): no Ray, no torch.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sweepgrok import comparisons, definitions, plots, stats
from sweepgrok.events import GROK_THRESHOLDS
from sweepgrok.tables import display_rows, legend, markdown_table

THRESHOLDS = GROK_THRESHOLDS
"""Each goes in the tables when every run could see it (runs that stopped at their grok step at
0.95 cannot be judged at 0.99); the figures use one (the one asked for, else the runs' own)."""

HTML_FILE = "report.html"
"""The HTML report's name in the report folder."""

COLLAPSE_TITLE = "Collapse and grokking"

SIGNIFICANCE = 0.05
"""A comparison's p below this is reported as a difference in the result line."""

CAPTIONS = {
    "accuracy": "Test (solid) and train (dashed) accuracy against training step, one colour "
    "per group: the median over the group's seeds with its min-max band; a hollow circle marks "
    "the median fit step, a star the median grok step.",
    "grok_times": "Grok step of every run, one row per group (box: quartiles over the runs "
    "that grokked; a bar when only one did); red '>' marks a run censored at its last step "
    "(it had not grokked).",
    "survival": "Kaplan-Meier estimate of the fraction of runs not yet grokked at each step, "
    "per group; '|' marks a censored run.",
    "heatmap": "Kaplan-Meier median grok step over two keys (pooled over any others), with "
    "k/n runs grokked; grey: under half grokked, no median.",
    "deff": "Effective dimension (D_eff, participation ratio) of the representation against "
    "step, per group (median, min-max band); dashed: the group's median grok step, dotted: its "
    "median collapse onset.",
    "progress": "Progress measures against step, per group (median, min-max band): weight "
    "norms, logit norm, softmax-collapse share, D_eff on the test split, restricted and "
    "excluded losses.",
}
"""What each figure shows, by file stem: the caption under it in both reports."""


def caption(figure: Path, threshold: float) -> str:
    """The caption of a report figure: what it shows, and the grok threshold."""
    text = CAPTIONS.get(figure.stem, figure.stem)
    return f"{text} Grok = first evaluation with test accuracy >= {threshold:g}."


def _overview(summary: pd.DataFrame, sources: Sequence[str]) -> list[str]:
    status = summary.get("status", pd.Series(dtype=str)).fillna("no run row")
    counts = ", ".join(f"{k} {v}" for k, v in status.value_counts().items())
    return [
        f"Sweeps: {', '.join(f'`{d}`' for d in sources)}.",
        f"{len(summary)} runs ({counts}); longest run {summary['steps_run'].max():,} steps.",
    ]


def _collapse_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]] | None:
    """Median collapse onset and collapse-to-grok gap per group (None without geometry)."""
    if table["collapse_median"].isna().all():
        return None
    headers = ["group", "median collapse onset", "median collapse-to-grok gap"]
    rows = []
    for r in table.to_dict("records"):
        onset, gap = r["collapse_median"], r["collapse_to_grok_median"]
        rows.append([str(r["label"])] + ["-" if pd.isna(x) else f"{x:,.0f}" for x in (onset, gap)])
    return headers, rows


def build_report(
    sweep_dirs: Sequence[Path],
    out: Path,
    by: Sequence[str] | None = None,
    baseline: str | None = None,
    threshold: float | None = None,
    paired: bool = False,
    skip_damaged: bool = False,
    html: bool = False,
) -> Path:
    """Write the report folder of sweep folders; returns report.md (AnalysisError on bad input,
    sweepgrok.parts.DamagedPart on a damaged part file unless `skip_damaged`)."""
    metrics, summary, pending = stats.load_recorded_runs(sweep_dirs, skip_damaged=skip_damaged)
    sources = [Path(d).resolve().name for d in sweep_dirs]  # names, never machine paths
    command = report_command(sources, out, by, baseline, threshold, paired, skip_damaged, html)
    return write_report(
        summary, out, by, baseline, threshold, paired, metrics=metrics, sources=sources,
        pending=pending, html=html, command=command,
    )


def report_command(
    sources: Sequence[str],
    out: Path,
    by: Sequence[str] | None,
    baseline: str | None,
    threshold: float | None,
    paired: bool,
    skip_damaged: bool,
    html: bool,
) -> str:
    """The `sweepgrok report` command that makes this report, with folders by name (a report
    never shows a path of the machine it was made on)."""
    words = ["sweepgrok", "report", *sources, "--out", Path(out).resolve().name]
    words += ["--by", ",".join(by)] if by else []
    words += ["--baseline", baseline] if baseline else []
    words += ["--threshold", f"{threshold:g}"] if threshold is not None else []
    words += ["--paired"] * paired + ["--skip-damaged"] * skip_damaged + ["--html"] * html
    return shlex.join(words)


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




@dataclass(frozen=True)
class ReportContent:
    """What the Markdown and the HTML report both show, computed once."""

    summary: pd.DataFrame
    keys: list[str]
    notes: list[str]
    """Paragraphs of inline Markdown above the tables (sweeps, run counts, grouping)."""
    tables: dict[float, pd.DataFrame]
    """Analysis table per threshold every run could see (sweepgrok.comparisons)."""
    threshold: float
    """The threshold of the figures and of the collapse table."""
    collapse: tuple[list[str], list[list[str]]] | None
    figures: list[Path]
    sources: list[str]
    headline: str = ""
    """The one-line result (result_line): what the comparisons found, with n and p."""


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
    html: bool = False,
    command: str = "",
) -> Path:
    """Write report.md, groups_<t>.csv, runs.csv and figures/ from a run summary; returns
    report.md. With `html`, also report.html (HTML_FILE: one self-contained file, `command` in
    its provenance).

    Without `metrics` (a summary read back from a committed runs.csv) the figures are those a
    summary carries (grok times, survival, heatmap).
    """
    keys = stats.resolve_by(summary, by)
    thresholds, threshold = report_thresholds(summary, threshold)
    out.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out / "runs.csv", index=False)
    tables = {}
    for theta in thresholds:
        table = comparisons.analysis_table(summary, keys, baseline, paired=paired, threshold=theta)
        table.to_csv(out / f"groups_{stats.tag(theta)}.csv", index=False)
        tables[theta] = table
    figures_dir = out / "figures"
    figures = (
        plots.plot_all(metrics, summary, keys, figures_dir, threshold)
        if metrics is not None
        else plots.plot_summary_figures(summary, keys, figures_dir, threshold)
    )
    content = ReportContent(
        summary=summary,
        keys=keys,
        notes=_notes(summary, keys, sources, pending, thresholds),
        tables=tables,
        threshold=threshold,
        collapse=_collapse_rows(tables[threshold]),
        figures=figures,
        sources=list(sources),
        headline=result_line(tables[threshold], threshold),
    )
    report = out / "report.md"
    report.write_text(_markdown(content, command))
    if html:
        from sweepgrok import html_report

        (out / HTML_FILE).write_text(html_report.render(content, command), encoding="utf-8")
    return report


def _notes(
    summary: pd.DataFrame,
    keys: Sequence[str],
    sources: Sequence[str],
    pending: int,
    thresholds: Sequence[float],
) -> list[str]:
    notes = _overview(summary, sources)
    if pending:
        notes.append(
            f"{pending} run(s) that have not ended (no runs/ row yet, or interrupted) are "
            "left out."
        )
    notes.append(f"Grouped by: {', '.join(f'`{k}`' for k in keys) or 'nothing (one group)'}.")
    skipped = [t for t in THRESHOLDS if t not in thresholds]
    if skipped:
        notes.append(
            f"Not reported at {', '.join(f'{t:g}' for t in skipped)}: some runs stopped when "
            "they grokked at a lower threshold and never saw it."
        )
    return notes


def _markdown(content: ReportContent, command: str = "") -> str:
    from sweepgrok import html_report  # the config and provenance rows both reports show

    lines = ["# Sweep report", "", f"**Result**: {content.headline}", ""]
    lines += [line for note in content.notes for line in (note, "")][:-1]
    for theta, table in content.tables.items():
        lines += ["", f"## {table_title(theta)}", ""]
        lines += [markdown_table(*display_rows(table, content.keys)).rstrip()]
    lines += ["", table_legend(content)]
    if content.collapse:
        lines += ["", f"## {COLLAPSE_TITLE}", "", markdown_table(*content.collapse).rstrip()]
    lines += ["", f"## {figures_title(content.threshold)}", ""]
    for p in content.figures:
        text = caption(p, content.threshold)
        lines += [f"![{p.stem}](figures/{p.name})", "", f"*{text}*", ""]
    lines += ["## Definitions", "", definitions.markdown()]
    csvs = ", ".join(f"`groups_{stats.tag(t)}.csv`" for t in content.tables)
    lines += ["", f"Per-run values: `runs.csv`; group tables: {csvs}.", ""]
    lines += ["## Config of every run", ""]
    shared, headers, groups = html_report.config_sections(content)
    if shared:
        lines += [f"Shared by all {len(content.summary)} runs:", ""]
        lines += [markdown_table(["key", "value"], shared), ""]
    for label, rows in groups:
        lines += [f"**{label}**: {len(rows)} run(s)", "", markdown_table(headers, rows), ""]
    lines += ["## Provenance", ""]
    lines += [markdown_table(["what", "value"], html_report.provenance(content, command)), ""]
    return "\n".join(lines)


def table_legend(content: ReportContent) -> str:
    """The tables' column definitions, once for all of them (each table's heading names its
    threshold)."""
    return legend(None, pd.concat(list(content.tables.values()), ignore_index=True))


def _n_text(n: int, n_base: int) -> str:
    return f"n = {n} per arm" if n == n_base else f"n = {n} and {n_base}"


def _comparison(row: Mapping[Any, Any], base: Mapping[Any, Any], holm: bool) -> str:
    """One comparison in words: the speed-up when p < SIGNIFICANCE, else no difference."""
    group, name = str(row["label"]), str(base["label"])
    p = float(row["p_holm"] if holm else row["p"])
    ratio = float(row["speedup"])
    bound = float(row.get("speedup_bound", math.nan))
    facts = f"{_n_text(int(row['n']), int(base['n']))}, p = {p:.2g}"
    if math.isnan(p) or p >= SIGNIFICANCE:
        return f"{group} vs {name}: no significant difference ({facts})"
    if math.isinf(ratio):  # the baseline has no median within its budget
        return f"{group} groks more than {bound:.1f}x sooner than {name} ({facts})"
    if ratio == 0.0:  # this group has no median within its budget
        return f"{group} groks more than {1 / bound:.1f}x later than {name} ({facts})"
    if ratio >= 1.0:
        return f"{group} groks {ratio:.1f}x sooner than {name} ({facts})"
    return f"{group} groks {1 / ratio:.1f}x later than {name} ({facts})"


def result_line(table: pd.DataFrame, threshold: float) -> str:
    """The result in one line, from the comparisons of `table` (its speed-ups, n and p; Holm's
    p when there are several): a difference only where p < SIGNIFICANCE."""
    if "speedup" not in table:
        return (
            f"{len(table)} group(s), not compared (no --baseline); grok = test accuracy "
            f">= {threshold:g}."
        )
    rows = table.to_dict("records")
    by_label = {str(r["label"]): r for r in rows}
    pairs = [
        (r, by_label[str(r["baseline_group"])])
        for r in rows
        if not r["is_baseline"] and isinstance(r.get("baseline_group"), str)
    ]
    if not pairs:
        return f"no group has a baseline to compare with; grok = test accuracy >= {threshold:g}."
    n_tests = comparisons.n_comparisons(table)
    said = "; ".join(_comparison(r, b, n_tests > 1) for r, b in pairs)
    how = f", Holm-adjusted over {n_tests} comparisons" if n_tests > 1 else ""
    return f"{said}. Grok = test accuracy >= {threshold:g}; p: log-rank test{how}."


def table_title(threshold: float) -> str:
    """The heading of the analysis table at `threshold`."""
    return f"Grokking at test accuracy >= {threshold:g}"


def figures_title(threshold: float) -> str:
    """The heading of the figures, which use one threshold."""
    return f"Figures (grok = test accuracy >= {threshold:g})"
