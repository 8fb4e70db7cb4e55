"""What the Markdown report (sweepgrok.analysis.reporting) and the HTML report
(sweepgrok.analysis.html_report) both show: the content, computed once, and the section titles."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sweepgrok.analysis import comparisons
from sweepgrok.analysis.tables import legend

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
