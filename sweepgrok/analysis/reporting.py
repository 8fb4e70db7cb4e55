"""Turn sweep folders into a Markdown report with PNG figures and CSV tables, and on request one
self-contained HTML file.

Run as ``sweepgrok report SWEEP_DIR... --out DIR [--html]``. Writes DIR/report.md,
DIR/groups_<t>.csv (one per threshold), DIR/runs.csv (one row per run), DIR/figures/*.png and with
--html DIR/report.html (sweepgrok.analysis.html_report). Reads Parquet only
(sweepgrok.analysis.stats, sweepgrok.analysis.plots): no Ray, no torch.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sweepgrok.analysis import comparisons, definitions, plots, stats, summary_columns
from sweepgrok.analysis.labels import label_notes
from sweepgrok.analysis.report_content import (
    COLLAPSE_TITLE,
    ReportContent,
    Section,
    caption,
    figures_title,
    grouping_note,
    result_line,
    table_legend,
    table_title,
)
from sweepgrok.analysis.tables import display_rows, markdown_table
from sweepgrok.config.thresholds import GROK_THRESHOLDS

THRESHOLDS = GROK_THRESHOLDS
"""Each goes in the tables when every run could see it (runs that stopped at their grok step at
0.95 cannot be judged at 0.99); the figures use one (the one asked for, else the runs' own)."""

HTML_FILE = "report.html"
"""The HTML report's name in the report folder."""

def _overview(summary: pd.DataFrame, sources: Sequence[str]) -> list[str]:
    status = summary.get("status", pd.Series(dtype=str)).fillna("no run row")
    counts = ", ".join(f"{k} {v}" for k, v in status.value_counts().items())
    return [
        f"Sweeps: {', '.join(f'`{d}`' for d in sources)}.",
        f"{len(summary)} runs ({counts}); longest run {summary['steps_run'].max():,} steps.",
    ]


def _collapse_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]] | None:
    """The collapse table: per group, the columns summary_columns shows in it (median collapse
    onset and collapse-to-grok gap); None without geometry."""
    shown = summary_columns.shown_in(summary_columns.COLLAPSE)
    if table[[c.name for c in shown]].isna().all().all():
        return None
    headers = ["group"] + [c.header for c in shown]
    rows = [[str(r["label"])] + [c.cell(r, 0) for c in shown if c.cell]
            for r in table.to_dict("records")]
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
    *,
    censor_interrupted: bool = False,
) -> Path:
    """Write the report folder of sweep folders; returns report.md (AnalysisError on bad input,
    sweepgrok.store.parts.DamagedPart on a damaged part file unless `skip_damaged`;
    `censor_interrupted`: see stats.recorded_runs)."""
    metrics, summary, pending = stats.load_recorded_runs(
        sweep_dirs, skip_damaged=skip_damaged, censor_interrupted=censor_interrupted,
        keep_repeats=stats.separates_sweeps(by),
    )
    stats.check_runs_to_analyse(summary, pending, sweep_dirs)  # before the report folder is made
    sources = [Path(d).resolve().name for d in sweep_dirs]  # names, never machine paths
    command = report_command(sources, out, by, baseline, threshold, paired, skip_damaged, html,
                             censor_interrupted)
    return write_report(
        summary, out, by, baseline, threshold, paired, metrics=metrics, sources=sources,
        pending=pending, html=html, command=command, confirm=confirm_section(sweep_dirs),
    )


def confirm_section(sweep_dirs: Sequence[Path]) -> tuple[str, Section] | None:
    """(result line, table) of the confirm stage among `sweep_dirs`: a confirm folder itself,
    or a search folder holding one (its first, when several are given); None without one."""
    from sweepgrok.analysis import confirm_table as ct
    from sweepgrok.search.confirm import confirm_dir, read_stage
    from sweepgrok.store.sweepdir import has_runs

    for d in sweep_dirs:
        for folder in (Path(d), confirm_dir(Path(d))):
            stage = read_stage(folder)
            if stage is None or not has_runs(folder):
                continue
            table = ct.confirm_table(stats.summarize_sweeps(folder), stage)
            headers, rows = ct.display(table, stage.references, stage.budget)
            note = (f"Search seeds {', '.join(map(str, stage.search_seeds))}; fresh seeds "
                    f"{', '.join(map(str, stage.seeds))}. {CONFIRM_NOTE}")  # fmt: skip
            title = f"Confirm stage: grok at {stage.threshold:g} on fresh seeds ({folder.name}/)"
            return "Confirmed on fresh seeds: " + ct.result_line(table, stage), Section(
                title, headers, rows, note)
    return None


CONFIRM_NOTE = (
    "Each arm's Kaplan-Meier median with a 95% bootstrap CI; speed-up = the reference's "
    "median / the arm's, with its bootstrap CI and the permutation log-rank p; p Holm adjusts "
    "over every arm-vs-reference comparison of the stage (one family). The search objective is "
    "what the arm was ranked by (median over the search seeds; capped: stopped by the time cap, "
    "a bound; censored: some run never grokked); confirm / search > 1 means the schedule was "
    "slower on fresh seeds than the search said (the winner's curse)."
)
"""What the confirm stage's table says (both reports)."""


def report_command(
    sources: Sequence[str],
    out: Path,
    by: Sequence[str] | None,
    baseline: str | None,
    threshold: float | None,
    paired: bool,
    skip_damaged: bool,
    html: bool,
    censor_interrupted: bool,
) -> str:
    """The `sweepgrok report` command that makes this report, with folders by name (a report
    never shows a path of the machine it was made on)."""
    words = ["sweepgrok", "report", *sources, "--out", Path(out).resolve().name]
    words += ["--by", ",".join(by)] if by else []
    words += ["--baseline", baseline] if baseline else []
    words += ["--threshold", f"{threshold:g}"] if threshold is not None else []
    words += ["--paired"] * paired + ["--skip-damaged"] * skip_damaged + ["--html"] * html
    words += ["--censor-interrupted"] * censor_interrupted
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
    confirm: tuple[str, Section] | None = None,
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
        notes=_notes(summary, keys, sources, pending, thresholds,
                     grouping_note(summary, keys, by is None, baseline)),
        tables=tables,
        threshold=threshold,
        collapse=_collapse_rows(tables[threshold]),
        figures=figures,
        sources=list(sources),
        headline=confirm[0] if confirm else result_line(tables[threshold], threshold),
        sections=[confirm[1]] if confirm else [],
    )
    report = out / "report.md"
    report.write_text(_markdown(content, command))
    if html:
        from sweepgrok.analysis import html_report

        (out / HTML_FILE).write_text(html_report.render(content, command), encoding="utf-8")
    return report


def _notes(
    summary: pd.DataFrame,
    keys: Sequence[str],
    sources: Sequence[str],
    pending: int,
    thresholds: Sequence[float],
    grouping: str,
) -> list[str]:
    """The paragraphs above the tables; `grouping`: which keys group and stratify
    (report_content.grouping_note)."""
    notes = _overview(summary, sources)
    if pending:
        notes.append(
            f"{pending} run(s) that have not ended (no runs/ row yet, or interrupted) are "
            "left out."
        )
    interrupted = stats.interrupted_count(summary)
    if interrupted:
        notes.append(stats.interrupted_note(interrupted) + ".")
    notes.append(grouping)
    notes += label_notes(summary, keys)
    skipped = [t for t in THRESHOLDS if t not in thresholds]
    if skipped:
        notes.append(
            f"Not reported at {', '.join(f'{t:g}' for t in skipped)}: some runs stopped when "
            "they grokked at a lower threshold and never saw it."
        )
    return notes


def _markdown(content: ReportContent, command: str = "") -> str:
    from sweepgrok.analysis import html_report  # the config and provenance rows both reports show

    lines = ["# Sweep report", "", f"**Result**: {content.headline}", ""]
    lines += [line for note in content.notes for line in (note, "")][:-1]
    for section in content.sections:
        lines += ["", f"## {section.title}", "", markdown_table(section.headers, section.rows)]
        lines += ["", section.note] if section.note else []
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
