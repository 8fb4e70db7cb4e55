"""Output paths: checked before any work is done, written so that a failed write loses nothing.

A command that computes for a while and then writes (``analyze --out/--plots``, ``report
--out``) checks its paths first, so a mistake exits at once rather than after a half-printed
table; and it writes a file under a temporary name then renames it, so a full disk leaves the
previous file as it was.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from enum import StrEnum
from pathlib import Path

from sweepgrok.core.interrupt import critical


class FigureFormat(StrEnum):
    """File format of figures: png (screens, reports), svg or pdf (vectors, for papers)."""

    png = "png"
    svg = "svg"
    pdf = "pdf"


def _nearest_existing(path: Path) -> Path:
    while not (path.exists() or path.is_symlink()) and path != path.parent:
        path = path.parent
    return path


def output_problem(path: Path, *, folder: bool) -> str | None:
    """Why `path` cannot be written as a file (or, `folder`, created and filled), else None."""
    if folder and path.exists() and not path.is_dir():
        return f"{path}: is a file, not a folder"
    if not folder and path.is_dir():
        return f"{path}: is a folder: give a file name"
    # A file is written beside itself (temporary name, then rename): its folder must take it.
    existing = _nearest_existing(path if folder else path.parent)
    if not existing.is_dir():
        return f"{path}: {existing} is not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{path}: {existing} is not writable"
    if not folder and path.exists() and not os.access(path, os.W_OK):
        return f"{path}: is not writable"
    return None


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in its folder, then an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with critical():
            tmp.write_text(text)
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def os_reason(err: OSError) -> str:
    """An OSError's plain reason (``No space left on device``), without errno or paths."""
    return os.strerror(err.errno) if err.errno else " ".join(str(err).split())
