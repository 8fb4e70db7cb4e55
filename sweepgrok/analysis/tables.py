"""The analysis table as text: aligned columns for a terminal, markdown, csv or json.

Shared by `sweepgrok analyze` and the report (``sweepgrok.analysis.reporting``); pandas is only a
type here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sweepgrok.analysis import summary_columns
from sweepgrok.analysis.labels import key_labels
from sweepgrok.analysis.summary_columns import NARROWEST, SMALL_GROUP
from sweepgrok.analysis.summary_columns import is_missing as _nan
from sweepgrok.analysis.summary_columns import with_ci as _with_ci

NO_BASELINE = "no baseline in this stratum"
"""What a group shows when its stratum holds no baseline group (see
sweepgrok.analysis.comparisons)."""

if TYPE_CHECKING:
    import pandas as pd


class Format(StrEnum):
    """Output format: a table for the terminal, csv / markdown / json for papers."""

    table = "table"
    csv = "csv"
    markdown = "markdown"
    json = "json"


def render(
    table: pd.DataFrame, keys: list[str], fmt: Format, threshold: float, width: int | None = None
) -> str:
    """The analysis table as text in `fmt` (csv and json keep every column, unrounded).

    `table` fits `width` columns (default: the terminal's, or $COLUMNS): a table too wide for
    it is shown with short headers and fewer columns (the legend says which), and where even
    that is too wide one group after another, a line per column, instead of wrapping into an
    unreadable block. Into a pipe or a file without $COLUMNS nothing is wrapped.
    """
    if fmt is Format.csv:
        return str(table.to_csv(index=False))
    if fmt is Format.json:
        return str(table.to_json(orient="records", indent=2)) + "\n"
    if fmt is Format.markdown:
        return markdown_table(*display_rows(table, keys)) + "\n\n" + legend(threshold, table) + "\n"
    shown, strict = (width, True) if width else output_width()
    return _terminal_text(table, keys, legend(threshold, table), shown, strict)


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A Markdown table of plain-text cells ('|' inside a cell escaped)."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(headers), "|" + "---|" * len(headers), *map(line, rows)])


def legend(threshold: float | None, table: pd.DataFrame) -> str:
    """One paragraph of definitions printed under a human-readable table (`threshold` None:
    once under several tables, each naming its threshold in its heading)."""
    # pandas is loaded (`table` is a frame); FIT_THRESHOLD: what run_summary's fit steps used.
    from sweepgrok.analysis.comparisons import n_comparisons
    from sweepgrok.train.events import FIT_THRESHOLD

    theta = "the table's threshold" if threshold is None else f"{threshold:g}"
    text = (
        f"grok = first eval with test_acc >= {theta}; fit = first eval with train_acc >= "
        f"{FIT_THRESHOLD:g}; delay = grok - fit. Median/mean among grokked runs [95% bootstrap "
        "CI], ± = std/sqrt(n). KM = Kaplan-Meier median counting censored runs (diverged and "
        "failed runs censored at their budget; '> N': under half grokked within N steps)."
    )
    if "few_runs" in table and table["few_runs"].any():
        text += (
            f" † fewer than {SMALL_GROUP} runs: a bootstrap interval is about the range of "
            "the data (coverage far below 95%)."
        )
    if "speedup" in table:
        text += (
            " Speed-up = baseline KM median / group KM median [95% bootstrap CI] ('> x': the "
            "baseline has no median, x a lower bound), against the baseline of the same stratum "
            "(the same values of the other keys, save those that change with the baseline's); "
            "p = two-sided log-rank test, exact "
            "permutation p (± its Monte Carlo standard error above 20,000 relabellings)."
        )
    if "p_holm" in table and n_comparisons(table) > 1:
        text += " p Holm = Holm-adjusted over the table's comparisons."
    if "paired_speedup" in table:
        text += (
            " Paired: runs matched by seed, log-rank stratified by seed; paired speed-up = "
            "median over seeds of baseline / group time [bootstrap CI over seeds]."
        )
    return text


def _ratio(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.2f}"


def _speedup_cell(r: Mapping[Any, Any], level: int = 0) -> str:
    if r["is_baseline"]:
        return "baseline"
    if _nan(r.get("baseline_group")):
        return "no baseline" if level else NO_BASELINE
    ratio = r["speedup"]
    if not _nan(ratio) and math.isinf(ratio):  # baseline median > its budget: a lower bound
        return f"> {_ratio(r['speedup_bound'])}"
    if ratio == 0.0:  # this group's median > its budget: an upper bound
        return f"< {_ratio(r['speedup_bound'])}"
    return _with_ci(ratio, r["speedup_lo"], r["speedup_hi"], _ratio)


def _p_cell(p: float, se: float) -> str:
    if _nan(p):
        return "-"
    return f"{p:.2g}" if _nan(se) or se == 0 else f"{p:.2g} ± {se:.1g}"


def _paired_cell(r: Mapping[Any, Any]) -> str:
    if _nan(r.get("paired_speedup")):
        return "-"
    cell = _with_ci(r["paired_speedup"], r["paired_speedup_lo"], r["paired_speedup_hi"], _ratio)
    return f"{cell} ({int(r['n_pairs'])} pairs)"


def _vs_cell(r: Mapping[Any, Any]) -> str:
    return "-" if _nan(r["baseline_group"]) or r["is_baseline"] else str(r["baseline_group"])


@dataclass(frozen=True)
class Column:
    """One column of the human-readable table: its header, its short header in the narrow
    terminal table (None: left out there, the legend says so) and its cell of a group's row."""

    header: str
    short: str | None
    cell: Callable[[Mapping[Any, Any], int], str]  # (a group's row, the layout level)


def _key_column(header: str, key: str | None) -> Column:
    from sweepgrok.analysis.stats import format_value

    return Column(header, header, lambda r, _c: str(r["label"]) if key is None
                  else format_value(r[key]))


def _statistic_column(declared: summary_columns.SummaryColumn) -> Column:
    """A group summary column as summary_columns declares it."""
    assert declared.cell is not None, f"{declared.name} is shown in a table but has no cell"
    short = declared.short if summary_columns.NARROW in declared.shown else None
    return Column(declared.table_header, short, declared.cell)


def columns(table: pd.DataFrame, keys: list[str]) -> list[Column]:
    """The table's columns, in order: the keys, the group's statistics, its comparison."""
    from sweepgrok.analysis.comparisons import n_comparisons

    out = [_key_column(h, k) for h, k in zip(key_labels(keys), keys, strict=True)]
    out = out or [_key_column("group", None)]
    out += [_statistic_column(c) for c in summary_columns.shown_in(summary_columns.TABLE)]
    if "speedup" in table:
        if table["baseline_group"].dropna().nunique() > 1:  # stratified: whom each is against
            out += [Column("vs", None, lambda r, _c: _vs_cell(r))]
        out += [
            Column("speed-up [CI]", "speed-up", _speedup_cell),
            Column("p (exact)", "p", lambda r, _c: _p_cell(r["p"], r.get("p_se", math.nan))),
        ]
        if n_comparisons(table) > 1:
            out += [Column("p Holm", "Holm", lambda r, _c: _p_cell(r["p_holm"], math.nan))]
    if "paired_speedup" in table:
        out += [Column("paired speed-up [CI]", "paired", lambda r, _c: _paired_cell(r))]
    return out


def display_rows(
    table: pd.DataFrame, keys: list[str], level: int = 0
) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted cells for the human-readable formats (table, markdown); level 1
    and NARROWEST: the narrow terminal tables' (short headers, the columns they leave out left
    out; NARROWEST also the medians' intervals)."""
    shown = [c for c in columns(table, keys) if c.short is not None or not level]
    headers = [str(c.short) if level else c.header for c in shown]
    rows = [[c.cell(r, level) for c in shown] for r in table.to_dict("records")]
    return headers, rows


def compact_note(table: pd.DataFrame, keys: list[str], level: int = 1) -> str:
    """What a narrow table's short headers stand for, and what it leaves out."""
    cols = columns(table, keys)
    intervals = " (their CIs left out at this width)" if level >= NARROWEST else " [95% CI]"
    text = (
        "Columns: grokked = runs grokked/runs [95% Wilson CI]; grok, delay = median grok step "
        f"and delay among grokked runs{intervals}; KM = Kaplan-Meier median"
    )
    if "speedup" in table:
        baseline = table["baseline"].iloc[0] if len(table) else ""
        text += f"; speed-up, p (exact): against the baseline {baseline} of the same stratum"
        text += "; Holm = p Holm" if any(c.short == "Holm" for c in cols) else ""
    if "paired_speedup" in table:
        text += "; paired = paired speed-up [CI]"
    left = ", ".join(c.header for c in cols if c.short is None)
    return text + (f". Left out at this width: {left} (a wider terminal or $COLUMNS shows "
                   "them; --format markdown always does).")


def _terminal_text(table: pd.DataFrame, keys: list[str], note: str, width: int,
                   strict: bool) -> str:
    """The table as aligned columns when it fits `width`; else the first narrow table that
    fits (short headers, a few columns left out, then the medians' intervals too; the legend
    says so); else one block per group (`strict`: a terminal's edge; into a pipe or a file
    only the first narrow table is tried, then the whole table: no edge)."""
    import textwrap

    headers, rows = display_rows(table, keys)
    body = aligned(headers, rows)
    if _widest(body) > width:
        narrow = _narrow(table, keys, width, NARROWEST if strict else 1)  # a file: no edge
        if narrow is not None:
            body, note = narrow[0], narrow[1] + " " + note
        elif strict:
            body = _stacked(headers, rows, max(len(keys), 1), width)
    text = textwrap.fill(note, width) if strict else note
    return body + "\n" + text + "\n"


def _narrow(
    table: pd.DataFrame, keys: list[str], width: int, last: int
) -> tuple[str, str] | None:
    """The first narrow table (levels 1 to `last`) that fits `width`, with its note; None
    when none does."""
    for level in range(1, last + 1):
        body = aligned(*display_rows(table, keys, level))
        if _widest(body) <= width:
            return body, compact_note(table, keys, level)
    return None


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def aligned(headers: list[str], rows: list[list[str]], gap: int = 2) -> str:
    """Plain-text columns, left-aligned, `gap` spaces apart, a rule under the headers: what a
    terminal, a log and a copy-and-paste show alike (no box drawing to widen it)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    sep = " " * gap

    def line(cells: list[str]) -> str:
        return sep.join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    rule = "─" * (sum(widths) + gap * (len(widths) - 1))
    return "\n".join([line(headers), rule, *map(line, rows)])


def _stacked(headers: list[str], rows: list[list[str]], n_keys: int, width: int) -> str:
    """Each group as a title line (its keys) and one indented line per other column."""
    import textwrap

    pad = max(len(h) for h in headers[n_keys:])
    blocks = []
    for r in rows:
        title = ", ".join(f"{h}={v}" for h, v in zip(headers[:n_keys], r[:n_keys], strict=True))
        lines = textwrap.wrap(title, width) or [""]
        for h, v in zip(headers[n_keys:], r[n_keys:], strict=True):
            lines += textwrap.wrap(
                f"{h:<{pad}}  {v}", width, initial_indent="  ", subsequent_indent=" " * (pad + 4)
            )
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


PIPE_WIDTH = 120
"""Into a pipe or a file (no $COLUMNS): the width the table is laid out for; wider tables stay
whole (a file has no right edge), never one block per group."""


def output_width() -> tuple[int, bool]:
    """(width, strict): a terminal's width (strict: nothing may pass it); into a pipe or a
    file $COLUMNS when set (strict), else PIPE_WIDTH, not strict."""
    import os
    import shutil
    import sys

    if sys.stdout.isatty():
        return max(40, shutil.get_terminal_size((120, 24)).columns), True
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns), True
    return PIPE_WIDTH, False
