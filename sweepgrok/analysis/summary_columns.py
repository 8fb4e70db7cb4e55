"""The group summary's columns, declared once: the analysis table starts here.

Each column of ``stats.group_summary`` (after the grouping keys and ``label``) is one
SummaryColumn: its name in the DataFrame (and in csv and json), its unit, a one-line definition,
and, where a human-readable table shows it, its header and the cell that formats a group's row.
From this list come the order of group_summary's columns (``stats``), the statistics columns of
the analysis table (``tables``: terminal, narrow terminal, markdown, both reports), the report's
collapse table (``reporting``), the headers of `sweepgrok status`'s group table, the reports'
definitions of these numbers (``definitions``) and the generated column list in
docs/statistics.md (REGENERATE; tests/analysis/test_summary_columns.py fails when it is stale).

A new statistic is one entry here plus its computation in ``stats._group_stats``.

Pure Python (no pandas): the command line imports the tables before a command runs.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SMALL_GROUP = 5
"""Below this many runs a percentile bootstrap interval is about the data's range (flagged)."""

NARROWEST = 2
"""The layout level that also leaves out the intervals of the median grok step and delay
(0: every column; 1: short headers, without the mean, the range and whom each is against)."""

TABLE, NARROW, COLLAPSE, STATUS = "table", "narrow", "collapse", "status"
"""Where a column is shown. TABLE: the analysis table at full width (`analyze` in a wide
terminal and with --format markdown, report.md, report.html); NARROW: the narrow terminal
tables (under its short header); COLLAPSE: the reports' collapse table; STATUS: `sweepgrok
status`'s group table. csv and json always carry every column."""

SHOWN_IN = {
    TABLE: "the analysis table (`analyze`, `--format markdown`, both reports)",
    NARROW: "the narrow terminal tables",
    COLLAPSE: "the reports' collapse table",
    STATUS: "`sweepgrok status`",
}
"""Each place a column can be shown, as the generated docs name it."""

Row = Mapping[Any, Any]
Cell = Callable[[Row, int], str]
"""A column's text in a group's row at a layout level (0 full width, 1 and NARROWEST narrow)."""


# ---------------------------------------------------------------- formatting a cell


def is_missing(x: Any) -> bool:
    """None or NaN: the table shows '-'."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def steps_text(x: float) -> str:
    """A step count: '1,234', 'inf', '-' when missing."""
    if is_missing(x):
        return "-"
    return "inf" if math.isinf(x) else f"{x:,.0f}"


def with_ci(x: float, lo: float, hi: float, fn: Callable[[float], str] = steps_text) -> str:
    """'x [lo, hi]', or x alone when the interval is missing, '-' when x is."""
    if is_missing(x):
        return "-"
    if is_missing(lo) or is_missing(hi):
        return fn(x)
    return f"{fn(x)} [{fn(lo)}, {fn(hi)}]"


def _grokked_cell(r: Row, level: int) -> str:
    """k/n, the rate and its Wilson CI; narrow levels: k/n and the CI only (k/n says the rate)."""
    if level:
        cell = f"{r['n_grokked']}/{r['n']} [{r['success_lo']:.0%}–{r['success_hi']:.0%}]"
        cell = cell.replace("%–", "–", 1)
    else:
        cell = f"{r['n_grokked']}/{r['n']} {r['success_rate']:.0%}"
        cell += f" [{r['success_lo']:.0%}, {r['success_hi']:.0%}]"
    if r.get("n_failed"):  # diverged or failed runs count as not grokked: say how many
        cell += f", {r['n_failed']} failed"
    return cell


def _few(r: Row) -> str:
    return " †" if r.get("few_runs") else ""  # the interval is about the data's range


def _median_cell(what: str) -> Cell:
    """The median grok step or delay [CI]; at the narrowest level the median alone."""

    def cell(r: Row, level: int) -> str:
        if level >= NARROWEST:
            return steps_text(r[f"{what}_median"])
        median = r[f"{what}_median"]
        return with_ci(median, r[f"{what}_median_lo"], r[f"{what}_median_hi"]) + _few(r)

    return cell


def _mean_cell(r: Row, _level: int) -> str:
    mean = steps_text(r["grok_mean"])
    return mean if is_missing(r["grok_sem"]) else f"{mean} ± {steps_text(r['grok_sem'])}"


def _km_cell(r: Row, _level: int) -> str:
    if is_missing(r["km_median"]):
        return f"> {steps_text(r['steps_run_max'])}"
    return steps_text(r["km_median"])


def _span_cell(r: Row, _level: int) -> str:
    if is_missing(r["grok_min"]):
        return "-"
    return f"{steps_text(r['grok_min'])} – {steps_text(r['grok_max'])}"


def _steps_of(name: str) -> Cell:
    return lambda r, _level: steps_text(r[name])


# ---------------------------------------------------------------- the declaration


@dataclass(frozen=True)
class SummaryColumn:
    """One column of the group summary (``stats.group_summary``)."""

    name: str
    """The DataFrame column (and csv / json field)."""
    unit: str
    """'steps', 'runs', 'fraction [0, 1]', 'bool'."""
    definition: str
    """What it is, one line of inline Markdown."""
    header: str = ""
    """Its header where a table shows it ('' : csv and json only); `sweepgrok status` shows it
    as it stands, the analysis table followed by `qualifier`."""
    qualifier: str = ""
    """What the analysis table's cell adds beside the number: '[95% CI]', '± se'."""
    short: str = ""
    """Its header in the narrow terminal tables ('' : left out there, the note says so)."""
    cell: Cell | None = None
    """Its text in a group's row, where a table other than `status` shows it (it may read
    other columns: the interval's ends, the † flag); `status` formats its values by unit."""
    shown: frozenset[str] = frozenset()
    """Where it is shown (TABLE, NARROW, COLLAPSE, STATUS); NARROW: under `short`."""
    term: str = ""
    """The term under which the reports' Definitions list prints `definition` ('' : not there)."""

    @property
    def table_header(self) -> str:
        """The analysis table's header: the header and its qualifier."""
        return f"{self.header} {self.qualifier}".strip()


def _ci_ends(name: str, what: str) -> tuple[SummaryColumn, SummaryColumn]:
    return (
        SummaryColumn(f"{name}_lo", "steps", f"lower end of the 95% bootstrap CI of {what}"),
        SummaryColumn(f"{name}_hi", "steps", f"upper end of the 95% bootstrap CI of {what}"),
    )


def _statistic(name: str, what: str, **declared: Any) -> tuple[SummaryColumn, ...]:
    """A bootstrapped statistic among grokked runs and its interval's two ends."""
    definition = declared.pop("definition", f"{what}, with a seeded 95% percentile bootstrap CI")
    return (SummaryColumn(name, "steps", definition, **declared), *_ci_ends(name, what))


_TABLE = frozenset({TABLE})
_WIDE_AND_NARROW = frozenset({TABLE, NARROW})

SUMMARY_COLUMNS: tuple[SummaryColumn, ...] = (
    SummaryColumn("n", "runs", "runs in the group", header="runs", shown=frozenset({STATUS})),
    SummaryColumn("n_grokked", "runs", "runs that grokked at the threshold", header="grokked",
                  qualifier="[95% CI]", short="grokked", cell=_grokked_cell,
                  shown=_WIDE_AND_NARROW | {STATUS}),
    SummaryColumn("success_rate", "fraction [0, 1]",
                  "k/n runs grokked, with a 95% Wilson interval.", term="success rate"),
    SummaryColumn("success_lo", "fraction [0, 1]", "lower end of the success rate's Wilson "
                  "interval"),
    SummaryColumn("success_hi", "fraction [0, 1]", "upper end of the success rate's Wilson "
                  "interval"),
    *_statistic(
        "grok_median", "the median grok step among grokked runs", header="median grok",
        qualifier="[CI]", short="grok", cell=_median_cell("grok"),
        shown=_WIDE_AND_NARROW | {STATUS},
        term="median grok step and delay",
        definition=("among grokked runs, with a seeded 95% percentile bootstrap CI. A group of "
                    f"fewer than {SMALL_GROUP} runs is flagged (†): its interval is about the "
                    "range of the data."),
    ),
    *_statistic("grok_mean", "the mean grok step among grokked runs", header="mean grok",
                qualifier="± se", cell=_mean_cell, shown=_TABLE),
    *_statistic("delay_median", "the median grokking delay among grokked runs",
                header="median delay", qualifier="[CI]", short="delay",
                cell=_median_cell("delay"), shown=_WIDE_AND_NARROW),
    *_statistic("delay_mean", "the mean grokking delay among grokked runs"),
    SummaryColumn("grok_sem", "steps", "standard error of the mean grok step: sample std / √n "
                  "over the grokked runs"),
    SummaryColumn("few_runs", "bool", f"fewer than {SMALL_GROUP} runs: the bootstrap intervals "
                  "are about the range of the data (the tables flag it †)"),
    SummaryColumn(
        "km_median", "steps",
        "Kaplan-Meier median grok time over all runs, censored ones included (the convention of "
        "R's `quantile.survfit`). When the KM curve never reaches 0.5 it does not exist: "
        '"> N", N the group\'s longest run. With censoring that is not "fewer than half grok": '
        "2 of 5 runs grokking have a median when the other 3 were censored before them.",
        header="KM median", short="KM", cell=_km_cell, shown=_WIDE_AND_NARROW | {STATUS},
        term="KM median",
    ),
    SummaryColumn("grok_min", "steps", "the earliest grok step among grokked runs",
                  header="min–max", cell=_span_cell, shown=_TABLE),
    SummaryColumn("grok_max", "steps", "the latest grok step among grokked runs"),
    SummaryColumn("steps_run_max", "steps", "the group's longest run: its time to grok or to "
                  "censoring (the N of a KM median's \"> N\")"),
    SummaryColumn("collapse_median", "steps", "median collapse onset over the runs that "
                  "collapsed", header="median collapse onset", cell=_steps_of("collapse_median"),
                  shown=frozenset({COLLAPSE})),
    SummaryColumn("collapse_to_grok_median", "steps", "median collapse-to-grok gap (grok step − "
                  "collapse onset) over the grokked runs that collapsed",
                  header="median collapse-to-grok gap",
                  cell=_steps_of("collapse_to_grok_median"), shown=frozenset({COLLAPSE})),
    SummaryColumn("n_failed", "runs", "runs that diverged or failed (only when the runs have a "
                  "status): censored at their budget, not grokked in the success rate"),
)
"""Every column of the group summary after its keys and label, in the DataFrame's order."""

NAMES = tuple(c.name for c in SUMMARY_COLUMNS)
"""group_summary's statistics columns, in order."""


def shown_in(where: str) -> tuple[SummaryColumn, ...]:
    """The columns a table shows (TABLE, NARROW, COLLAPSE, STATUS), in order."""
    return tuple(c for c in SUMMARY_COLUMNS if where in c.shown)


def definitions() -> tuple[tuple[str, str], ...]:
    """(term, definition) of the columns the reports' Definitions list explains, in order."""
    return tuple((c.term, c.definition) for c in SUMMARY_COLUMNS if c.term)


# ---------------------------------------------------------------- docs/statistics.md

REGENERATE = "python -m sweepgrok.analysis.summary_columns docs/statistics.md"
"""The command that rewrites the generated section of docs/statistics.md."""
START = "<!-- summary columns:"
"""How the generated section starts (its first line goes on to say how it is made)."""
BEGIN = (f"{START} generated from sweepgrok/analysis/summary_columns.py by\n"
         f"`{REGENERATE}`; do not edit by hand. -->")
END = "<!-- end of summary columns -->"


def _shown_text(c: SummaryColumn) -> str:
    """Where and under which header `c` is shown, as the docs' table says it."""
    headers = {TABLE: f"`{c.table_header}`", NARROW: f"`{c.short}` (narrow)"}
    where = [headers.get(w, f"`{c.header}` in {SHOWN_IN[w]}") for w in SHOWN_IN if w in c.shown]
    return ", ".join(where) or "csv and json only"


def section() -> str:
    """The generated section of docs/statistics.md: one row per column, markers included."""
    lines = [BEGIN, "| column | unit | shown as | definition |", "|---|---|---|---|"]
    for c in SUMMARY_COLUMNS:
        text = f"**{c.term}**: {c.definition}" if c.term else c.definition
        cells = [f"`{c.name}`", c.unit, _shown_text(c), text]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join([*lines, END])


def rewrite(text: str) -> str:
    """`text` (docs/statistics.md) with its generated section replaced by section()."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no section between {START!r} and {END!r} to rewrite")
    return text[:start] + section() + text[end + len(END):]


def main(argv: list[str]) -> None:
    """Print the section, or with a file's path rewrite that file's section in place."""
    if not argv:
        sys.stdout.write(section() + "\n")
        return
    path = Path(argv[0])
    path.write_text(rewrite(path.read_text()))


if __name__ == "__main__":
    main(sys.argv[1:])
