""""Did you mean ...?": the allowed name closest to a mistyped one (difflib's ratio)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from sweepgrok.core.errors import excerpt

CUTOFF = 0.6
"""Least similarity (difflib's ratio, 0 to 1) of a name suggested: below it, none is."""


def closest(word: str, allowed: Iterable[str]) -> str | None:
    """The allowed name most like `word`, or None when none is close."""
    found = difflib.get_close_matches(word, list(allowed), n=1, cutoff=CUTOFF)
    return found[0] if found else None


def did_you_mean(word: str, allowed: Iterable[str], prefix: str = "") -> str:
    """`` (did you mean 'model.d_model'?)`` for the closest allowed name (shown after
    `prefix`, e.g. its section), else ``""``."""
    match = closest(word, allowed)
    return f" (did you mean '{excerpt(prefix + match)}'?)" if match else ""
