"""One fact in one place: a status group is declared once (sweepgrok.train.events) and every
other module names it, never spells its members again. A grep over the package, as the
import-rule test reads imports."""

from __future__ import annotations

import re
from pathlib import Path

from sweepgrok.train import events

PACKAGE = Path(__file__).resolve().parents[2] / "sweepgrok"
HOME = PACKAGE / "train" / "events.py"
GROUPS = {"NEVER_GROKS": events.NEVER_GROKS, "GROKKED_STATUSES": events.GROKKED_STATUSES}


def _spelled(members: tuple[str, ...]) -> re.Pattern[str]:
    """The members quoted side by side, in either order, in a tuple, list or set."""
    a, b = (re.escape(f'"{m}"') for m in members)
    return re.compile(rf"[(\[{{]\s*({a}\s*,\s*{b}|{b}\s*,\s*{a})\s*[,)\]}}]")


def test_a_status_group_is_spelled_only_where_it_is_declared() -> None:
    stray = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME:
            continue
        text = path.read_text()
        for name, members in GROUPS.items():
            if _spelled(members).search(text):
                stray.append(f"{path.relative_to(PACKAGE.parent)}: use events.{name}")
    assert not stray, stray


def test_the_grep_finds_a_second_spelling() -> None:
    pattern = _spelled(events.NEVER_GROKS)
    assert pattern.search('if status in ("diverged", "failed"):')
    assert pattern.search("if status in {'x'} or s in ['failed', 'diverged']".replace("'", '"'))
    assert not pattern.search('if status in ("censored", *NEVER_GROKS):')
