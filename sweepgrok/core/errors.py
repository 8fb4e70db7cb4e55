"""The one style of a user-error message, shared by the commands and the analysis/ scripts.

    error: <file or option>: <key>: <message>        (on stderr; exit code 2)

A ConfigError's message already starts with the file and the key (``grid.yaml: model.norm: ...``);
an analysis error names the option it is about (``--by``, ``--baseline``, else ``SWEEP_DIR``).
"""

from __future__ import annotations

import reprlib
from typing import Any

USER_ERROR = 2
"""Exit code of every user mistake (a bad file, key, value, option or sweep folder, a damaged
part file)."""
RUN_FAILED = 1
"""Exit code of a run that could not finish (a failed trial, a full disk): `--resume` goes on."""


def error_line(message: str, where: str | None = None) -> str:
    """The message as printed: ``error: <where>: <message>`` (``where`` when not in it)."""
    return f"error: {where}: {message}" if where else f"error: {message}"


def analysis_option(err: Any) -> str:
    """The option a ``stats.AnalysisError`` is about (its ``param``), else the sweep folders."""
    param = getattr(err, "param", None)
    return f"--{param}" if param else "SWEEP_DIR"


def damaged_part_message(err: Any) -> str:
    """A sweepgrok.store.parts.DamagedPart's message, with what to do; its `where` is
    err.sweep_dir."""
    return (
        f"{err.part}: {err.reason}: move it aside (the other part files are intact), or pass "
        "--skip-damaged to leave it out"
    )


QUOTE_LIMIT = 60
"""Most characters of a user's value or key that a message quotes (then '...')."""

_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel = 3
_SHORT_REPR.maxstring = QUOTE_LIMIT
_SHORT_REPR.maxother = QUOTE_LIMIT
for _kind in ("maxlist", "maxtuple", "maxdict", "maxset", "maxfrozenset"):
    setattr(_SHORT_REPR, _kind, 6)


def excerpt(text: str, limit: int = QUOTE_LIMIT) -> str:
    """A user's text as a message quotes it: one line (control characters escaped), capped."""
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: limit + 1])
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def quoted(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """A user's value as a message quotes it ("got ..."): a short repr, never the whole of a
    huge or deeply nested value (reprlib stops after a few items and levels)."""
    try:
        text = _SHORT_REPR.repr(value)
    except ValueError:  # an int of more than 4300 digits has no repr
        text = "<a number too large to show>"
    return excerpt(text, limit)
