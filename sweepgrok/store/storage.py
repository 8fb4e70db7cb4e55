"""Several sweeps at once: the sweep folders under a storage folder (``<storage>/<name>/``).

`sweepgrok ls STORAGE` lists them; `analyze` and `report` take a storage folder in place of its
sweep folders (each sweep's runs keep their ``sweep`` column, a grouping key: ``--by sweep``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from sweepgrok.config.trial import ConfigError
from sweepgrok.store.sweepdir import holds_sweep


class NoSweeps(ConfigError):
    """A folder that is no sweep folder and holds none (the CLI exits 2 with the message)."""


def has_rows(folder: Path) -> bool:
    """A sweep folder analyze can read: runs/ or metrics/ inside."""
    return any((folder / kind).is_dir() for kind in ("runs", "metrics"))


def sweeps_under(storage: Path) -> list[Path]:
    """The sweep folders directly inside `storage`, by name (symbolic links and files left out)."""
    try:
        children = sorted(storage.iterdir())
    except OSError:
        return []
    return [c for c in children if c.is_dir() and not c.is_symlink() and holds_sweep(c)]


def expand_sweep_dirs(folders: Iterable[Path]) -> list[Path]:
    """Each folder that is a sweep folder, or else the sweep folders with rows inside it (a
    storage folder); in order, each once. NoSweeps for a folder that is neither."""
    out: list[Path] = []
    for folder in folders:
        found = [folder] if has_rows(folder) else [s for s in sweeps_under(folder) if has_rows(s)]
        if not found:
            raise NoSweeps(
                f"{folder}: not a sweep folder (no runs/ or metrics/ inside) and holds none "
                "(give a sweep folder <storage>/<name>, or the storage folder above several)"
            )
        out += [f for f in found if f not in out]
    return out
