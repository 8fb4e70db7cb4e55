"""Resume a sweep folder that was moved or copied since its launch.

Tune's restore points the trials it had created at the folder's new place, but not the trials
its grid generator has yet to create: the generator's saved state (``basic-variant-state-*``)
keeps the storage path of the launch, so a trial that never started before the interruption
would start in the old folder, and fail there ("Unable to set up cluster storage") or, where
the old folder still exists, write into it. Before a restore, the storage path in that saved
state is set to the folder's present place (only for local or shared filesystems).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ray import cloudpickle
from ray.train._internal.storage import StorageContext

from sweepgrok.core.interrupt import critical

log = logging.getLogger(__name__)

GENERATOR_STATES = "basic-variant-state-*.json"
"""Tune's file name for the grid generator's saved state (one per driver session)."""


def storage_contexts(state: Any) -> Iterator[StorageContext]:
    """Every StorageContext reachable from a saved generator state (each once).

    Walks containers and Ray's own objects only: the state holds the trial specs (dicts) and
    Ray's iterator objects, and Ray keeps a copy of the context in each spec."""
    seen: set[int] = set()
    todo = [state]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, StorageContext):
            yield item
        elif isinstance(item, dict):
            todo.extend(item.values())
        elif isinstance(item, list | tuple):
            todo.extend(item)
        elif type(item).__module__.startswith("ray.") and hasattr(item, "__dict__"):
            todo.extend(vars(item).values())


def rehome_generator_state(tune_path: Path) -> int:
    """Point the saved grid generator's trials at the experiment's present storage path
    (``tune_path``'s parent); returns how many stale paths were replaced."""
    here = Path(tune_path).resolve().parent.as_posix()
    replaced = 0
    for state_file in sorted(Path(tune_path).glob(GENERATOR_STATES)):
        try:
            with state_file.open("rb") as f:
                state = cloudpickle.load(f)
        except Exception as err:  # damaged or unreadable: Tune's restore reports it as before
            log.debug("not rehoming %s: %s", state_file, err)
            continue
        stale = [
            ctx
            for ctx in storage_contexts(state)
            if ctx.storage_filesystem.type_name == "local" and ctx.storage_fs_path != here
        ]
        if not stale:
            continue
        old = {ctx.storage_fs_path for ctx in stale}
        for ctx in stale:
            ctx.storage_fs_path = here
        _write_atomically(state_file, state)
        log.info(
            "the sweep folder moved from %s: its unstarted trials start here",
            ", ".join(sorted(old)),
        )
        replaced += len(stale)
    return replaced


def _write_atomically(path: Path, state: Any) -> None:
    # Not the generator's glob: a crash mid-write must never leave a second "newest" state.
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with critical():
            with tmp.open("wb") as f:
                cloudpickle.dump(state, f)
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
