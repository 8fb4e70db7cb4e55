"""What the Markdown report (sweepgrok.analysis.reporting) and the HTML report
(sweepgrok.analysis.html_report) both show: the content, computed once, and the section titles."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sweepgrok.analysis import comparisons
from sweepgrok.analysis.summary_columns import steps_text as _steps
from sweepgrok.analysis.tables import Format, _p_cell, _ratio, legend

COLLAPSE_TITLE = "Collapse and grokking"

SIGNIFICANCE = 0.05
"""The result line calls a comparison significant when its p (Holm's, when the table has
several) is below this."""

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
    "k/n runs grokked; grey: under half grokked, no median; hatched, 'not run': no run had "
    "these two values.",
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


@dataclass(frozen=True)
class ReportContent:
    """What the Markdown and the HTML report both show, computed once."""

    summary: pd.DataFrame
    keys: list[str]
    notes: list[str]
    """Paragraphs of inline Markdown above the tables (sweeps, run counts, grouping)."""
    tables: dict[float, pd.DataFrame]
    """Analysis table per threshold every run could see (sweepgrok.analysis.comparisons)."""
    threshold: float
    """The threshold of the figures and of the collapse table."""
    collapse: tuple[list[str], list[list[str]]] | None
    figures: list[Path]
    sources: list[str]
    headline: str = ""
    """The one-line result (result_line): what the comparisons found, with n and p."""
    sections: list[Section] = field(default_factory=list)
    """Tables shown first, under the result (a confirm stage's table)."""


@dataclass(frozen=True)
class Section:
    """A titled table of plain-text cells with a note under it (both reports show it)."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""


def table_title(threshold: float) -> str:
    """The heading of the analysis table at `threshold`."""
    return f"Grokking at test accuracy >= {threshold:g}"


def figures_title(threshold: float) -> str:
    """The heading of the figures, which use one threshold."""
    return f"Figures (grok = test accuracy >= {threshold:g})"



def table_legend(content: ReportContent) -> str:
    """The tables' column definitions, once for all of them (each table's heading names its
    threshold)."""
    return legend(None, pd.concat(list(content.tables.values()), ignore_index=True))


def _n_text(n: int, n_base: int) -> str:
    return f"n = {n} per arm" if n == n_base else f"n = {n} and {n_base}"


def _effect(row: Mapping[Any, Any], group: str, base: str) -> str:
    """The speed-up of `row` over its baseline in words, with its CI, as the table gives it."""
    ratio, bound = float(row["speedup"]), float(row.get("speedup_bound", math.nan))
    if math.isnan(ratio):  # neither group has a median within its budget
        return f"{group} vs {base}: no speed-up (neither has a KM median)"
    if math.isinf(ratio):  # the baseline has no median within its budget: a lower bound
        return f"{group} groks more than {_ratio(bound)}x sooner than {base} (no KM median)"
    if ratio == 0.0:  # this group has no median within its budget: an upper bound
        return f"{group} (no KM median) groks more than {_ratio(1 / bound)}x later than {base}"
    lo, hi = float(row.get("speedup_lo", math.nan)), float(row.get("speedup_hi", math.nan))
    ci = "" if math.isnan(lo) or math.isnan(hi) else f" [95% CI {_ratio(lo)}, {_ratio(hi)}]"
    if ratio >= 1.0:
        return f"{group} groks {_ratio(ratio)}x sooner than {base}{ci}"
    return f"{group} groks {_ratio(1 / ratio)}x later than {base} (speed-up {_ratio(ratio)}{ci})"


def _comparison(row: Mapping[Any, Any], base: Mapping[Any, Any], holm: bool) -> str:
    """One comparison: its effect, n per arm, p as the table shows it (and p Holm when the
    table has several comparisons), and whether that p is below SIGNIFICANCE."""
    p = float(row["p"])
    facts = f"{_n_text(int(row['n']), int(base['n']))}, p = {_p_cell(p, row.get('p_se', math.nan))}"
    deciding = p
    if holm:
        deciding = float(row["p_holm"])
        facts += f", p Holm = {_p_cell(deciding, math.nan)}"
    verdict = "significant" if deciding < SIGNIFICANCE else "not significant"
    effect = _effect(row, str(row["label"]), str(base["label"]))
    return f"{effect} ({facts}: {verdict} at {SIGNIFICANCE:g})"


def ranking(table: pd.DataFrame, most: int = 6) -> str:
    """The groups from the fastest to grok to the slowest by Kaplan-Meier median (those with
    none last, '> N'), each with its n: what a table without a baseline can say."""
    order = table.assign(_km=table["km_median"].astype(float).fillna(math.inf))
    rows = order.sort_values("_km", kind="stable").to_dict("records")

    def median(r: Mapping[Any, Any]) -> str:
        if math.isinf(r["_km"]):
            return f"> {_steps(r['steps_run_max'])}"
        return _steps(r["km_median"])

    said = [f"{r['label']} (KM median {median(r)}, n = {int(r['n'])})" for r in rows[:most]]
    more = f", and {len(rows) - most} more" if len(rows) > most else ""
    if len(said) == 1:
        return f"one group: {said[0]}"
    return f"fastest: {said[0]}, then " + ", then ".join(said[1:]) + more


def result_line(table: pd.DataFrame, threshold: float) -> str:
    """The result in one line, from the analysis table: each comparison's speed-up [CI], n per
    arm and p (with Holm's p when there are several), as the table shows them; without a
    baseline, the groups ordered by KM median."""
    grok = f"Grok = test accuracy >= {threshold:g}"
    if "speedup" not in table:
        return f"{ranking(table)}; not compared (no --baseline). {grok}."
    rows = table.to_dict("records")
    by_label = {str(r["label"]): r for r in rows}
    pairs = [
        (r, by_label[str(r["baseline_group"])])
        for r in rows
        if not r["is_baseline"] and isinstance(r.get("baseline_group"), str)
    ]
    if not pairs:
        return f"no group has a baseline in its stratum; {ranking(table)}. {grok}."
    n_tests = comparisons.n_comparisons(table)
    said = "; ".join(_comparison(r, b, n_tests > 1) for r, b in pairs)
    how = f"; p Holm: Holm-adjusted over {n_tests} comparisons" if n_tests > 1 else ""
    return (
        f"{said}. {grok}; speed-up = ratio of Kaplan-Meier medians; p: two-sided log-rank "
        f"test by permutation{how}."
    )


def grouping_note(
    summary: pd.DataFrame, keys: Sequence[str], default: bool, baseline: str | None = None
) -> str:
    """Which keys group the runs (`default`: the keys that vary) and, with a baseline, which
    hold a comparison's stratum and which go with the arms (comparisons.stratum_keys)."""
    named = ", ".join(f"`{k}`" for k in keys)
    if not keys:
        return "Grouped by: nothing (one group)."
    text = f"Grouped by the keys that vary across runs: {named}." if default else (
        f"Grouped by: {named}."
    )
    if baseline is None:
        return text
    spec = comparisons.parse_baseline(baseline)
    strata = comparisons.stratum_keys(summary, spec, keys)
    arms = comparisons.arm_keys(summary, spec, keys)
    text += (
        f" Each group is compared with the baseline group of the same "
        f"{', '.join(f'`{k}`' for k in strata)}" if strata
        else " Each group is compared with the one baseline group"
    )
    if arms:
        go = ", ".join(f"`{k}`" for k in arms)
        verb = "changes" if len(arms) == 1 else "change"
        text += f"; {go} {verb} with the baseline's keys: a setting of the arms, not a stratum"
    return text + "."


def result_text(
    table: pd.DataFrame,
    summary: pd.DataFrame,
    keys: Sequence[str],
    fmt: Format,
    threshold: float,
    *,
    default: bool,
    baseline: str | None = None,
) -> str:
    """What `sweepgrok analyze` prints under its table in the formats people read (table,
    markdown): the result line and the grouping note; nothing in csv and json (data only)."""
    line, note = result_line(table, threshold), grouping_note(summary, keys, default, baseline)
    if fmt is Format.markdown:
        return f"\n**Result**: {line}\n\n{note}\n"
    if fmt is Format.table:
        return "\n" + fit_prose(f"Result: {line}") + fit_prose(note.replace("`", ""))
    return ""


def fit_prose(text: str) -> str:
    """`text` as lines within the table's width (a terminal's, or $COLUMNS: the table fits it,
    so the sentences under it do too), broken between words; into a pipe without $COLUMNS one
    line, never broken (a log has no right edge)."""
    import textwrap

    from sweepgrok.analysis.tables import output_width

    width, strict = output_width()
    if not strict:
        return text + "\n"
    return textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False) + "\n"
