"""The run-derived numbers quoted in prose (README.md, analysis/REPRODUCTION.md,
analysis/accelerators/README.md), each computed from the committed summary it comes from (the
GeomDR step costs: from docs/speed.md's table, where they were measured).

    python -m analysis.quoted      # prints every quote that is missing or stale

The claims table is generated (`analysis.claims`); prose around it quotes figures by hand. Each
`Quote` names a document and a function that writes the text the document must contain,
from the committed ``groups_95.csv`` / ``runs.csv`` files, so a number that no longer matches
its summary fails `tests/repro_analysis/test_claims.py` instead of drifting. Whitespace is compared
collapsed (prose wraps). The per-sweep tables of REPRODUCTION.md are rows of that sweep's generated
``report.md`` (`copied_rows`).

One module per study holds its quotes (`QUOTES`), in the order its document gives them;
`common` holds what they share. A new study's quotes are a new module, added to `STUDIES`.
"""

from __future__ import annotations

import re
from types import ModuleType

from analysis.quoted import (
    accelerators,
    dstar_grid,
    grokfast,
    paper1,
    paper2,
    s5,
    search,
    slow_baseline,
    subsample,
)
from analysis.quoted.common import ACCELERATORS, ANALYSIS, REPRODUCTION, ROOT, Quote

__all__ = ["ACCELERATORS", "QUOTES", "REPRODUCTION", "ROOT", "Quote", "copied_rows", "stale"]

STUDIES: tuple[ModuleType, ...] = (
    paper1,
    paper2,
    slow_baseline,
    dstar_grid,
    grokfast,
    subsample,
    s5,
    search,
    accelerators,
)
"""The modules of the studies whose figures the prose quotes, in REPRODUCTION.md's order."""

QUOTES: tuple[Quote, ...] = tuple(quote for study in STUDIES for quote in study.QUOTES)
"""Every quoted run-derived figure, with its source."""


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def stale() -> list[str]:
    """The quotes a document lacks (the text it should hold, per document)."""
    docs: dict[str, str] = {}
    missing = []
    for quote in QUOTES:
        if quote.doc not in docs:
            docs[quote.doc] = _collapsed((ROOT / quote.doc).read_text())
        want = _collapsed(quote.text())
        if want not in docs[quote.doc]:
            missing.append(f"{quote.doc}: {want}")
    return missing


ROW = re.compile(r"^\| .* \| \d+/\d+ \d+% \[\d+%, \d+%\] \|.*\|$")
"""A group row of a `sweepgrok report` table (its 'grokked [95% CI]' cell)."""


def copied_rows(doc: str = REPRODUCTION) -> list[str]:
    """The report-table rows of `doc` that no committed report.md holds (stale copies)."""
    reports = "\n".join(p.read_text() for p in sorted(ANALYSIS.glob("**/report.md")))
    known = set(reports.splitlines())
    rows = [r for r in (ROOT / doc).read_text().splitlines() if ROW.match(r)]
    return [r for r in rows if r not in known]


def main() -> int:
    """Print every stale quote and copied row; 1 when there is one."""
    problems = stale() + [f"{REPRODUCTION}: not in any report.md: {r}" for r in copied_rows()]
    for problem in problems:
        print(problem)
    return 1 if problems else 0
