"""Delete superseded trial checkpoints only once Tune's saved experiment state has moved past
them.

Why not ``CheckpointConfig(num_to_keep=k)``: Tune deletes the old checkpoint as soon as the
k-th newer one is registered, but the experiment snapshot that still points at it is uploaded
later (asynchronously). A driver killed in between leaves a snapshot whose checkpoint is gone,
and ``--resume`` then fails that trial ("does not exist on storage anymore"; seen here with
SIGKILL). So Tune keeps every checkpoint (num_to_keep=None) and this pruner deletes checkpoint
c_i of a trial only when a newer c_j was registered before the newest experiment-state file
in storage was written, i.e. no snapshot on disk can point at c_i any more. The checkpoints of
a trial that completed go once a snapshot newer than its completion exists.

Works for storage on a local or shared (NFS) filesystem; with other storage nothing is pruned.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

_PERIOD_S = 1.0  # at most one scan per second (Tune calls on_step_end very often)


class CheckpointPruner:
    """Driver-side bookkeeping: when each checkpoint was registered, when each trial ended."""

    def __init__(self, tune_dir: str | Path) -> None:
        self.tune_dir = Path(tune_dir)
        self._registered: dict[Path, list[tuple[int, Path]]] = {}  # trial dir -> (ns, ckpt)
        self._completed: dict[Path, int] = {}
        self._last_scan = 0.0
        self.pruned = 0  # checkpoint folders deleted since the last report()

    def on_checkpoint(self, checkpoint_path: str | Path) -> None:
        path = Path(checkpoint_path)
        if path.exists():  # local/shared storage only
            self._registered.setdefault(path.parent, []).append((time.time_ns(), path))

    def on_complete(self, trial_dir: str | Path) -> None:
        self._completed[Path(trial_dir)] = time.time_ns()

    def snapshot_ns(self) -> int:
        """Write time of the newest experiment-state file in storage (0 if none)."""
        times = [p.stat().st_mtime_ns for p in self.tune_dir.glob("experiment_state-*.json")]
        return max(times, default=0)

    def prune(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_scan < _PERIOD_S:
            return
        self._last_scan = now
        snap = self.snapshot_ns()
        for trial_dir, done in list(self._completed.items()):
            if done < snap:
                self._remove(trial_dir, sorted(trial_dir.glob("checkpoint_*")), "it completed")
                self._completed.pop(trial_dir)
                self._registered.pop(trial_dir, None)
        for trial_dir, seen in self._registered.items():
            safe = [path for ns, path in seen if ns < snap]
            if safe:
                newest_safe = safe[-1].name
                old = [p for p in trial_dir.glob("checkpoint_*") if p.name < newest_safe]
                self._remove(trial_dir, old, f"superseded by {newest_safe}")
                self._registered[trial_dir] = [(ns, p) for ns, p in seen if p.name >= newest_safe]

    def _remove(self, trial_dir: Path, paths: Iterable[Path], why: str) -> None:
        removed = [path for path in paths if path.exists()]
        for path in removed:
            shutil.rmtree(path, ignore_errors=True)
        if removed:
            self.pruned += len(removed)
            log.debug("pruned %d checkpoint(s) of %s: %s", len(removed), trial_dir.name, why)

    def report(self) -> None:
        """Log (INFO) how many checkpoints were deleted since the last report, if any."""
        if self.pruned:
            log.info(
                "pruned %d trial checkpoint(s) that Tune's saved experiment state no longer "
                "needs (in %s)",
                self.pruned,
                self.tune_dir,
            )
            self.pruned = 0
