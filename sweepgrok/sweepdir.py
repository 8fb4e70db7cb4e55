"""What a launch or a search may do with its sweep folder ``<storage>/<name>/`` (no Ray, Optuna).

- A folder that holds rows (runs/ or metrics/ Parquet) or Tune state holds a sweep: a new
  launch would mix its trials into it, so it takes ``--resume`` (finish it) or ``--fresh``
  (delete it first).
- A grid resumes from Tune's saved state only: new trials would get new run ids and count every
  finished run twice.
- A search resumes its own study (``study.json``) and only while what its trials depend on is
  unchanged (the fingerprint of base, space, metric, mode).
- The sweep file is copied beside the rows once (``sweep.yaml``), so the folder says what ran.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from sweepgrok.config import ConfigError
from sweepgrok.search_file import SearchSpec

SWEEP_FILE = "sweep.yaml"
"""The copy of the grid or search file inside the sweep folder."""


class FolderError(ConfigError):
    """A sweep folder that cannot be used as asked (the CLI exits 2 with the message)."""


def has_runs(sweep_dir: Path) -> bool:
    """A sweep folder that already holds rows or Tune state (so a new launch would mix in)."""
    parts = any(any((sweep_dir / k).glob("*.parquet")) for k in ("runs", "metrics"))
    return parts or (sweep_dir / "tune").exists()


def prepare_grid_folder(sweep_dir: Path, *, resume: bool, fresh: bool) -> None:
    """``fresh`` deletes the sweep folder; otherwise refuse to mix a new sweep into old rows."""
    if fresh and sweep_dir.exists():
        shutil.rmtree(sweep_dir)
    elif not resume and has_runs(sweep_dir):
        raise FolderError(
            f"{sweep_dir}: already holds a sweep: pass --resume to finish it, or --fresh to "
            "delete it and start over"
        )
    elif resume and has_runs(sweep_dir) and not (sweep_dir / "tune" / "tuner.pkl").exists():
        # New trials would get new run ids and count every finished run twice.
        raise FolderError(f"{sweep_dir}: holds rows but no Ray Tune state to resume from (tune/)")


def prepare_search_folder(
    spec: SearchSpec, sweep_dir: Path, *, resume: bool, fresh: bool
) -> dict[str, Any]:
    """The study to use: the folder's own on ``resume``, else a new uniquely named one.

    ``fresh`` deletes the folder first. Raises FolderError when the folder holds another sweep,
    a study without ``resume``, or a study whose search changed since it began.
    """
    from sweepgrok.study import fingerprint, new_study_record, read_study_record

    if fresh and sweep_dir.exists():
        shutil.rmtree(sweep_dir)
    record = read_study_record(sweep_dir)
    if record is None:
        if has_runs(sweep_dir):
            raise FolderError(
                f"{sweep_dir}: holds a sweep that is not an Optuna search: use --fresh "
                "to delete it, or another name / --storage"
            )
        return new_study_record(spec, sweep_dir)
    if not resume:
        raise FolderError(
            f"{sweep_dir}: already holds study {record['study_name']}: pass --resume to "
            "continue it, or --fresh to delete it and start over"
        )
    if record.get("fingerprint") != fingerprint(spec):
        raise FolderError(
            f"{spec.settings.source}: base, search.space, metric or mode changed since "
            f"study {record['study_name']} began: --fresh starts a new study"
        )
    return record


def keep_sweep_file(source: Path, sweep_dir: Path) -> Path:
    """Copy the grid or search file into the sweep folder (once: a resume keeps the first)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    copy = sweep_dir / SWEEP_FILE
    if not copy.exists():
        shutil.copyfile(source, copy)
    return copy
