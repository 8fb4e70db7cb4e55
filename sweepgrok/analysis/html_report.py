"""The report as one self-contained HTML file (`sweepgrok report SWEEP --out DIR --html`).

Everything is inside the file: figures as base64 data URIs, a short stylesheet, no script, no
font, no link to anything outside it, so a colleague opens it without sweepgrok or a network.
Every text that comes from the runs (sweep names, config values, labels) is escaped. It shows
what report.md shows, then the definitions, the config of every run and the provenance (the
sweepgrok version and commit, the command, the date, the sweeps by name: never a machine path).
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from sweepgrok.analysis import definitions, stats
from sweepgrok.analysis.report_content import (
    COLLAPSE_TITLE,
    ReportContent,
    caption,
    figures_title,
    table_legend,
    table_title,
)
from sweepgrok.analysis.tables import display_rows
from sweepgrok.store.provenance import git_commit, package_version

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222;
  margin: 0 auto; padding: 1rem; max-width: 72rem; }
h1, h2, h3 { line-height: 1.2; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.92em; }
.scroll { overflow-x: auto; margin: 0.5rem 0 1rem; }
table { border-collapse: collapse; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left;
  vertical-align: top; }
.nw { white-space: nowrap; }
th { background: #f2f2f2; }
.legend, .note { color: #444; font-size: 0.9rem; }
figure { margin: 1rem 0; }
img { max-width: 100%; height: auto; }
figcaption { font-size: 0.9rem; color: #444; }
details { margin: 0.4rem 0; }
summary { cursor: pointer; }
dt { font-weight: bold; margin-top: 0.5rem; }
dd { margin-left: 1.2rem; }
@media print {
  body { max-width: none; font-size: 11px; }
  .scroll { overflow: visible; }
  figure, table { break-inside: avoid; }
}
"""
"""Plain CSS readable on a phone and on paper: a wide table's cells wrap between a value and
its interval (never inside one) to fit the page; one still too wide scrolls sideways."""

_MIME = {".png": "image/png", ".svg": "image/svg+xml"}
"""Figure files the page can hold as data URIs (a PDF figure cannot be shown inline)."""


def inline(text: str) -> str:
    """Inline Markdown (`code`, **bold**) as HTML, the text escaped first."""
    out = html.escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)


_TOGETHER = re.compile(r"\[[^\]]*\](?: †)?|± \S+|\S+ – \S+")
"""What a line never breaks inside: an interval ("[5,500, 5,700] †"), "± 100", a range."""


def _cell(text: str) -> str:
    """A plain-text cell as HTML: escaped, its intervals and ranges kept on one line (the cell
    may break between a value and its interval: "5,600" over "[5,500, 5,700]")."""
    out, end = [], 0
    for m in _TOGETHER.finditer(text):
        out += [html.escape(text[end:m.start()]), f'<span class="nw">{html.escape(m[0])}</span>']
        end = m.end()
    return "".join(out) + html.escape(text[end:])


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """An HTML table of plain-text cells (escaped), wrapped to scroll sideways when still too
    wide; no header row when `headers` is empty."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in r) + "</tr>\n" for r in rows
    )
    head_row = f"<tr>{head}</tr>\n" if headers else ""
    return f'<div class="scroll"><table>\n{head_row}{body}</table></div>'


def _analysis_tables(content: ReportContent) -> list[str]:
    parts = []
    for theta, frame in content.tables.items():
        headers, rows = display_rows(frame, content.keys)
        parts += [f"<h2>{html.escape(table_title(theta))}</h2>", table(headers, rows)]
    parts += [f'<p class="legend">{html.escape(table_legend(content))}</p>']  # once
    if content.collapse:
        parts += [f"<h2>{html.escape(COLLAPSE_TITLE)}</h2>", table(*content.collapse)]
    return parts


def _figure(path: Path, threshold: float) -> str:
    text = html.escape(caption(path, threshold))
    mime = _MIME.get(path.suffix.lower())
    if mime is None:
        return f'<p class="note">{html.escape(path.name)}: not shown here (see figures/).</p>'
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (
        f'<figure><img src="data:{mime};base64,{data}" alt="{text}">'
        f"<figcaption>{text}</figcaption></figure>"
    )


def _figures(content: ReportContent) -> list[str]:
    return [f"<h2>{html.escape(figures_title(content.threshold))}</h2>"] + [
        _figure(p, content.threshold) for p in content.figures
    ]


def _definitions() -> list[str]:
    items = "".join(
        f"<dt>{html.escape(term)}</dt><dd>{inline(text)}</dd>\n"
        for term, text in definitions.DEFINITIONS
    )
    return ['<h2 id="definitions">Definitions</h2>', f"<dl>\n{items}</dl>"]


def _grok_cell(row: pd.Series, threshold: float) -> str:
    step = row.get(f"grok_step_{stats.tag(threshold)}")
    if step is None or pd.isna(step):
        run = row.get("steps_run")
        return "censored" if run is None or pd.isna(run) else f"> {int(run):,}"
    return f"{int(step):,}"


def _run_rows(rows: pd.DataFrame, varying: Sequence[str], threshold: float) -> list[list[str]]:
    cells = []
    for _, row in rows.sort_values("run_id").iterrows():
        steps = row.get("steps_run")
        cells.append(
            [str(row["run_id"]), stats.format_value(row.get("status"))]
            + ["-" if steps is None or pd.isna(steps) else f"{int(steps):,}"]
            + [_grok_cell(row, threshold)]
            + [stats.format_value(row[k]) for k in varying]
        )
    return cells


def config_sections(
    content: ReportContent,
) -> tuple[list[list[str]], list[str], list[tuple[str, list[list[str]]]]]:
    """(key-value rows every run shares, headers of the per-run rows, per group its label and
    its runs' rows with the keys that vary): the config section of both reports."""
    summary, theta = content.summary, content.threshold
    keys = (["sweep"] if "sweep" in summary else []) + stats.config_keys(summary)
    shared = [k for k in keys if summary[k].astype(str).nunique(dropna=False) <= 1]
    varying = [k for k in keys if k not in shared]
    pairs = [[k, stats.format_value(summary[k].iloc[0])] for k in shared]
    headers = ["run", "status", "steps run", f"grok step (≥ {theta:g})", *varying]
    groups = [
        (stats.group_label(content.keys, values), _run_rows(rows, varying, theta))
        for values, rows in stats.iter_groups(summary, content.keys)
    ]
    return pairs, headers, groups


def _configs(content: ReportContent) -> list[str]:
    """Keys every run shares in one table, then per group each run with the keys that vary."""
    pairs, headers, groups = config_sections(content)
    parts = ['<h2 id="runs">Config of every run</h2>']
    if pairs:
        parts += [
            f"<details><summary>Shared by all {len(content.summary)} runs ({len(pairs)} keys)"
            f"</summary>{table(['key', 'value'], pairs)}</details>"
        ]
    for label, rows in groups:
        parts += [
            f"<details><summary>{html.escape(label)}: {len(rows)} run(s)</summary>"
            f"{table(headers, rows)}</details>"
        ]
    return parts


def provenance(content: ReportContent, command: str) -> list[list[str]]:
    """[what, value] rows saying how the report was made; folders by name only."""
    return [
        ["sweepgrok version", package_version("sweepgrok") or "unknown"],
        ["git commit", git_commit() or "unknown (not run from a git checkout)"],
        ["command", command or "-"],
        ["made", datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")],
        ["sweeps", ", ".join(content.sources) or "-"],
    ]


def render(content: ReportContent, command: str = "") -> str:
    """The whole report as one HTML page (UTF-8 text)."""
    title = "Sweep report" + (f": {', '.join(content.sources)}" if content.sources else "")
    body = ["<h1>Sweep report</h1>"]
    body += [f'<p class="result"><strong>Result</strong>: {html.escape(content.headline)}</p>']
    body += [f'<p class="note">{inline(note)}</p>' for note in content.notes]
    for section in content.sections:
        body += [f"<h2>{html.escape(section.title)}</h2>", table(section.headers, section.rows)]
        body += [f'<p class="note">{inline(section.note)}</p>'] if section.note else []
    body += [
        '<p class="note">Below the tables and figures: <a href="#definitions">definitions</a>, '
        '<a href="#runs">the config of every run</a>, <a href="#provenance">provenance</a>.</p>'
    ]
    body += _analysis_tables(content) + _figures(content) + _definitions() + _configs(content)
    body += ['<h2 id="provenance">Provenance</h2>', table([], provenance(content, command))]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
        "<body>\n<main>\n" + "\n".join(body) + "\n</main>\n</body>\n</html>\n"
    )
