"""The analysis table as text: a rich terminal table, markdown, csv or json.

Shared by `sweepgrok analyze` and the report (``sweepgrok.analysis.reporting``); pandas is only a
type here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sweepgrok.analysis.labels import key_labels

NO_BASELINE = "no baseline in this stratum"
"""What a group shows when its stratum holds no baseline group (see
sweepgrok.analysis.comparisons)."""

if TYPE_CHECKING:
    import pandas as pd


class Format(StrEnum):
    """Output format: a rich table for the terminal, csv / markdown / json for papers."""

    table = "table"
    csv = "csv"
    markdown = "markdown"
    json = "json"


def render(
    table: pd.DataFrame, keys: list[str], fmt: Format, threshold: float, width: int | None = None
) -> str:
    """The analysis table as text in `fmt` (csv and json keep every column, unrounded).

    `table` fits `width` columns (default: the terminal's): a table too wide for it is shown
    one group after another, a line per column, instead of wrapping into an unreadable block.
    """
    if fmt is Format.csv:
        return str(table.to_csv(index=False))
    if fmt is Format.json:
        return str(table.to_json(orient="records", indent=2)) + "\n"
    headers, rows = display_rows(table, keys)
    if fmt is Format.markdown:
        return markdown_table(headers, rows) + "\n\n" + legend(threshold, table) + "\n"
    n_keys = max(len(keys), 1)
    return _terminal_text(headers, rows, n_keys, legend(threshold, table), width or _width())


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A Markdown table of plain-text cells ('|' inside a cell escaped)."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(headers), "|" + "---|" * len(headers), *map(line, rows)])


def legend(threshold: float | None, table: pd.DataFrame) -> str:
    """One paragraph of definitions printed under a human-readable table (`threshold` None:
    once under several tables, each naming its threshold in its heading)."""
    from sweepgrok.analysis.comparisons import n_comparisons  # pandas is loaded: `table` is a frame

    theta = "the table's threshold" if threshold is None else f"{threshold:g}"
    text = (
        f"grok = first eval with test_acc >= {theta}; fit = first eval with train_acc >= "
        "0.99; delay = grok - fit. Median/mean among grokked runs [95% bootstrap CI], "
        "± = std/sqrt(n). KM = Kaplan-Meier median counting censored runs (diverged and "
        "failed runs censored at their budget; '> N': under half grokked within N steps)."
    )
    if "few_runs" in table and table["few_runs"].any():
        text += (
            " † fewer than 5 runs: a bootstrap interval is about the range of the data "
            "(coverage far below 95%)."
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


def _nan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _steps(x: float) -> str:
    if _nan(x):
        return "-"
    return "inf" if math.isinf(x) else f"{x:,.0f}"


def _with_ci(x: float, lo: float, hi: float, fn: Any = _steps) -> str:
    if _nan(x):
        return "-"
    if _nan(lo) or _nan(hi):
        return fn(x)
    return f"{fn(x)} [{fn(lo)}, {fn(hi)}]"


def _ratio(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.2f}"


def _speedup_cell(r: Mapping[Any, Any]) -> str:
    if r["is_baseline"]:
        return "baseline"
    if _nan(r.get("baseline_group")):
        return NO_BASELINE
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


def _group_cells(r: Mapping[Any, Any]) -> list[str]:
    grokked = f"{r['n_grokked']}/{r['n']} {r['success_rate']:.0%}"
    grokked += f" [{r['success_lo']:.0%}, {r['success_hi']:.0%}]"
    if r.get("n_failed"):  # diverged or failed runs count as not grokked: say how many
        grokked += f", {r['n_failed']} failed"
    mean = _steps(r["grok_mean"])
    if not _nan(r["grok_sem"]):
        mean += f" ± {_steps(r['grok_sem'])}"
    km = _steps(r["km_median"]) if not _nan(r["km_median"]) else f"> {_steps(r['steps_run_max'])}"
    span = "-" if _nan(r["grok_min"]) else f"{_steps(r['grok_min'])} – {_steps(r['grok_max'])}"
    few = " †" if r.get("few_runs") else ""  # the interval is about the data's range
    return [
        grokked,
        _with_ci(r["grok_median"], r["grok_median_lo"], r["grok_median_hi"]) + few,
        mean,
        _with_ci(r["delay_median"], r["delay_median_lo"], r["delay_median_hi"]) + few,
        km,
        span,
    ]


def display_rows(table: pd.DataFrame, keys: list[str]) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted cells for the human-readable formats (table, markdown)."""
    from sweepgrok.analysis.comparisons import n_comparisons
    from sweepgrok.analysis.stats import format_value

    headers = key_labels(keys) or ["group"]
    headers += ["grokked [95% CI]", "median grok [CI]", "mean grok ± se", "median delay [CI]"]
    headers += ["KM median", "min–max"]
    with_baseline = "speedup" in table
    stratified = with_baseline and table["baseline_group"].dropna().nunique() > 1
    holm = with_baseline and n_comparisons(table) > 1
    paired = "paired_speedup" in table
    if stratified:
        headers += ["vs"]
    if with_baseline:
        headers += ["speed-up [CI]", "p (exact)"] + (["p Holm"] if holm else [])
    if paired:
        headers += ["paired speed-up [CI]"]
    rows = []
    for r in table.to_dict("records"):
        cells = [format_value(r[k]) for k in keys] if keys else [str(r["label"])]
        cells += _group_cells(r)
        if stratified:
            cells += ["-" if _nan(r["baseline_group"]) or r["is_baseline"] else r["baseline_group"]]
        if with_baseline:
            cells += [_speedup_cell(r), _p_cell(r["p"], r.get("p_se", math.nan))]
            cells += [_p_cell(r["p_holm"], math.nan)] if holm else []
        if paired:
            cells += [_paired_cell(r)]
        rows.append(cells)
    return headers, rows


def _terminal_text(
    headers: list[str], rows: list[list[str]], n_keys: int, note: str, width: int
) -> str:
    """A rich table when it fits `width`, else one block per group; the legend wrapped."""
    import textwrap

    columns = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    fits = sum(columns) + 3 * len(columns) + 1 <= width  # rich's borders and padding
    body = _rich_table(headers, rows, width) if fits else _stacked(headers, rows, n_keys, width)
    return body + "\n" + textwrap.fill(note, width) + "\n"


def _rich_table(headers: list[str], rows: list[list[str]], width: int) -> str:
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(show_lines=False, header_style="bold")
    for h in headers:
        table.add_column(Text(h), no_wrap=True)
    for r in rows:
        table.add_row(*(Text(c) for c in r))  # Text: user values are never read as markup
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text(styles=False).rstrip("\n")


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


def _width() -> int:
    """The terminal's width on a terminal. Into a pipe or a file: $COLUMNS when set, else wide
    enough that the table stays one table (a file has no right edge)."""
    import os
    import shutil
    import sys

    if sys.stdout.isatty():
        return max(40, shutil.get_terminal_size((120, 24)).columns)
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) >= 40 else 1000
