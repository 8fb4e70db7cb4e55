"""What the Markdown report (sweepgrok.analysis.reporting) and the HTML report
(sweepgrok.analysis.html_report) both show: the content, computed once, and the section titles."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

COLLAPSE_TITLE = "Collapse and grokking"


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


def table_title(threshold: float) -> str:
    """The heading of the analysis table at `threshold`."""
    return f"Grokking at test accuracy >= {threshold:g}"


def figures_title(threshold: float) -> str:
    """The heading of the figures, which use one threshold."""
    return f"Figures (grok = test accuracy >= {threshold:g})"
