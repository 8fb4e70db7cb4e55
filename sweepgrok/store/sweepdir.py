"""What a launch or a search may do with its sweep folder ``<storage>/<name>/`` (no Ray, Optuna).

- A folder that holds rows (runs/ or metrics/ Parquet) or Tune state holds a sweep: a new
  launch would mix its trials into it, so it takes ``--resume`` (finish it) or ``--fresh``
  (delete it first).
- A grid resumes from Tune's saved state only: new trials would get new run ids and count every
  finished run twice.
- A search resumes its own study (``study.json``) and only while what its trials depend on is
  unchanged (the fingerprint of base, space, metric, mode).
- The sweep file is copied beside the rows once (``sweep.yaml``), so the folder says what ran.
  The copy is self-contained: a ``base:`` path is inlined, and ``name`` and ``storage``
  (absolute) are written out, so `status` reads it and ``launch <sweep>/sweep.yaml --resume``
  finds the same folder from any working directory.
- A folder sweepgrok creates holds a marker file (``.sweepgrok``). ``--fresh`` deletes only a
  sweep folder: one with the marker, or one from a version before the marker whose every entry
  is a name sweepgrok writes (OLD_SWEEP_ENTRIES). Anything else is refused, nothing deleted.
- The sweep folder must be a real folder: a ``<storage>/<name>`` (or ``--out``) that is a file
  or a symbolic link, or lies below a file, is refused before anything starts; so is a
  non-empty folder that holds no sweep (sweepgrok never mixes its files into someone else's).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from sweepgrok.config.trial import ConfigError
from sweepgrok.core.interrupt import critical

SWEEP_FILE = "sweep.yaml"
"""The copy of the grid or search file inside the sweep folder."""
MARKER = ".sweepgrok"
"""Marker file written into every sweep folder sweepgrok creates: ``--fresh`` deletes a folder
only when it holds this file (or is an old sweep folder, see OLD_SWEEP_ENTRIES)."""
MARKER_TEXT = "sweepgrok sweep folder: --fresh may delete this folder\n"
PART_FOLDERS = ("runs", "metrics", "geometry")
"""Folders of Parquet parts (sink.write_part: ``part-*.parquet``, ``.tmp-part-*.parquet.tmp``;
versions before wrote ``.tmp-part-*.parquet``)."""
OLD_SWEEP_ENTRIES = frozenset(
    {
        *PART_FOLDERS,
        "tune",  # Ray Tune's experiment state and trial checkpoints
        SWEEP_FILE,
        "study.json",
        ".study.json.tmp",
        "optuna.db",
        "optuna.db-journal",
        "optuna.db-wal",
        "optuna.db-shm",
        "optuna.journal",
        "optuna.journal.lock",
        "search_summary.json",
        "best_trial.yaml",
        "objective.png",
    }
)
"""Every name sweepgrok writes at the top of a sweep folder: a folder from before the marker
whose entries are all among these (and whose part folders hold only Parquet parts) is a sweep
folder ``--fresh`` may delete."""


class FolderError(ConfigError):
    """A sweep folder that cannot be used as asked (the CLI exits 2 with the message)."""


def has_runs(sweep_dir: Path) -> bool:
    """A sweep folder that already holds rows or Tune state (so a new launch would mix in)."""
    parts = any(any((sweep_dir / k).glob("*.parquet")) for k in ("runs", "metrics"))
    return parts or (sweep_dir / "tune").exists()


def holds_sweep(sweep_dir: Path) -> bool:
    """A folder sweepgrok wrote: the marker, rows, Tune state, a study or a sweep file."""
    signs = (MARKER, SWEEP_FILE, "study.json")
    return has_runs(sweep_dir) or any((sweep_dir / name).exists() for name in signs)


def _is_old_sweep_folder(sweep_dir: Path) -> bool:
    """A sweep folder from before the marker: only names sweepgrok writes, parts in part
    folders, and at least one sign of a sweep."""
    for entry in sweep_dir.iterdir():
        if entry.name not in OLD_SWEEP_ENTRIES:
            return False
        if entry.name in (*PART_FOLDERS, "tune") and (entry.is_symlink() or not entry.is_dir()):
            return False
        if entry.name in PART_FOLDERS and not all(_is_part(p) for p in entry.iterdir()):
            return False
    return holds_sweep(sweep_dir)


def _is_part(path: Path) -> bool:
    return path.is_file() and not path.is_symlink() and path.suffix == ".parquet"


def may_delete(sweep_dir: Path) -> bool:
    """Whether ``--fresh`` may delete this folder: it holds the marker or is an old sweep."""
    if (sweep_dir / MARKER).is_file() and not (sweep_dir / MARKER).is_symlink():
        return True
    return _is_old_sweep_folder(sweep_dir)


def _is_empty(folder: Path) -> bool:
    return not any(folder.iterdir())


def check_sweep_path(sweep_dir: Path) -> None:
    """Refuse a sweep folder path that cannot hold a sweep, before anything starts.

    A symbolic link, a file, a path below a file, or a non-empty folder that holds no sweep.
    """
    if sweep_dir.is_symlink():
        raise FolderError(f"{sweep_dir}: is a symbolic link: a sweep folder must be a folder")
    if sweep_dir.exists() and not sweep_dir.is_dir():
        raise FolderError(f"{sweep_dir}: is a file, not a folder")
    for parent in sweep_dir.parents:
        if parent.exists():
            if not parent.is_dir():
                raise FolderError(f"{sweep_dir}: cannot be created: {parent} is a file")
            break
    if sweep_dir.is_dir() and not _is_empty(sweep_dir) and not holds_sweep(sweep_dir):
        raise FolderError(
            f"{sweep_dir}: holds files but no sweep (no runs/, metrics/ or {MARKER}): "
            "sweepgrok does not write into it; choose another name or storage folder"
        )


def delete_sweep_folder(sweep_dir: Path) -> None:
    """``--fresh``: delete the sweep folder, only if it is one (``may_delete``).

    An empty folder is left as it is (nothing to delete). Raises FolderError, deleting nothing,
    for any other folder. ``shutil.rmtree`` unlinks symbolic links inside; it never follows them.
    """
    check_sweep_path(sweep_dir)
    if not sweep_dir.exists() or _is_empty(sweep_dir):
        return
    if not may_delete(sweep_dir):
        raise FolderError(
            f"{sweep_dir}: --fresh deletes only a sweep folder, and this one holds files "
            f"sweepgrok did not write (and no {MARKER} marker): nothing deleted; move them "
            "away or choose another name"
        )
    shutil.rmtree(sweep_dir)


def make_sweep_folder(sweep_dir: Path) -> None:
    """Create the sweep folder (or adopt an empty or old one) and write its marker.

    Raises FolderError when the folder cannot be created or written (permissions, disk)."""
    try:
        sweep_dir.mkdir(parents=True, exist_ok=True)
        marker = sweep_dir / MARKER
        if not marker.exists():
            marker.write_text(MARKER_TEXT)
    except OSError as err:
        raise FolderError(f"{sweep_dir}: cannot write the sweep folder: {err.strerror}") from None


def prepare_train_folder(out: Path, *, fresh: bool) -> None:
    """``sweepgrok train --out``: ``fresh`` deletes the sweep folder; the path must be one a
    sweep folder can be. Which runs it may already hold is sweepgrok.train.trainrun's to check."""
    if fresh:
        delete_sweep_folder(out)
    check_sweep_path(out)


def prepare_grid_folder(sweep_dir: Path, *, resume: bool, fresh: bool) -> None:
    """``fresh`` deletes the sweep folder; otherwise refuse to mix a new sweep into old rows."""
    if fresh:
        delete_sweep_folder(sweep_dir)
    check_sweep_path(sweep_dir)
    if not resume and has_runs(sweep_dir):
        raise FolderError(
            f"{sweep_dir}: already holds a sweep: pass --resume to finish it, or --fresh to "
            "delete it and start over"
        )
    elif resume and has_runs(sweep_dir) and not (sweep_dir / "tune" / "tuner.pkl").exists():
        # New trials would get new run ids and count every finished run twice.
        raise FolderError(f"{sweep_dir}: holds rows but no Ray Tune state to resume from (tune/)")


def keep_sweep_file(settings: Any, sweep_dir: Path) -> Path:
    """Copy the validated grid or search file (`settings`: its SweepFile) into the sweep
    folder, self-contained (see the module doc); once: a resume keeps the first copy."""
    import os

    make_sweep_folder(sweep_dir)
    copy = sweep_dir / SWEEP_FILE
    if copy.exists():
        return copy
    tmp = sweep_dir / f".{SWEEP_FILE}.tmp"
    try:
        with critical():
            tmp.write_text(self_contained(settings, sweep_dir))
            os.replace(tmp, copy)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise FolderError(f"{copy}: cannot write: {err.strerror}") from None
    return copy


def self_contained(settings: Any, sweep_dir: Path) -> str:
    """The sweep file's text, as written, when it reads the same from anywhere; else its keys
    with the base inlined and name and storage (absolute) written out, under a comment."""
    import yaml

    source = Path(settings.source)
    text = source.read_text()
    doc = yaml.safe_load(text)
    storage = str(sweep_dir.resolve().parent)
    changed = []
    if isinstance(doc.get("base"), str):
        changed.append(f"base: {doc['base']} inlined")
        doc["base"] = dict(settings.base)
    if doc.get("name") != settings.name:
        changed.append("name written out")
        doc["name"] = settings.name
    if doc.get("storage") != storage:
        changed.append("storage made absolute")
        doc["storage"] = storage
    if not changed:
        return text
    head = f"# sweepgrok's copy of {source.resolve()} ({', '.join(changed)})\n"
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
