"""`sweepgrok train` in its sweep folder: checkpoints, an interruption's record, ``--resume``.

- **Checkpoints**: ``checkpoint/trainer.pt`` every ``train.checkpoint_every`` evaluations (never
  at step 0, never when no run goes on), and at the evaluation where a signal stops the run.
  The rows so far, and the run rows of the runs that ended at that evaluation, are written
  before it: a checkpoint never runs ahead of the rows on disk. Deleted once every run ended.
- **Interrupted** (sweepgrok.core.interrupt): the rows measured are flushed, each run that has not
  ended gets a run row with status ``interrupted`` (sink.STATUSES), and one line says what was
  kept and the command that continues it.
- **--resume**: from the checkpoint, or from step 0 when there is none yet (training is
  deterministic: the same rows come again); the evaluations already on disk are not written
  again (sink.FirstWriteSink); each run's final row supersedes its interrupted one.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweepgrok.core.interrupt import Interruption, critical
from sweepgrok.store.sink import ENDED_STATUSES, INTERRUPTED, FirstWriteSink, read_table
from sweepgrok.store.sweepdir import FolderError
from sweepgrok.train.events import reached

CHECKPOINT_DIR = "checkpoint"
"""The folder of a `train` sweep folder that holds the trainer's checkpoint."""


@dataclass
class TrainFolder:
    """What a `train` sweep folder holds already (read once, before training)."""

    out: Path
    written: dict[str, set[tuple[str, int]]]
    """metrics and geometry -> the (run_id, step) pairs on disk."""
    statuses: dict[str, str]
    """run_id -> the status of its last-written run row."""
    grokked: set[str] = field(default_factory=set)
    """Runs whose test accuracy reached train.grok_threshold at an evaluation on disk."""

    @property
    def run_ids(self) -> set[str]:
        return {run_id for run_id, _ in self.written["metrics"]} | set(self.statuses)

    @property
    def unfinished(self) -> set[str]:
        """Runs without a final row (none yet, or an interrupted one)."""
        return {r for r in self.run_ids if self.statuses.get(r) not in ENDED_STATUSES}

    @property
    def last_step(self) -> int:
        return max((step for _, step in self.written["metrics"]), default=0)

    @property
    def checkpoint(self) -> Path:
        return self.out / CHECKPOINT_DIR


def read_folder(out: Path, grok_threshold: float) -> TrainFolder:
    """The rows of `out` (none when it does not exist yet). Raises parts.DamagedPart."""
    metrics = read_table(out, "metrics", ["run_id", "step", "test_acc"]).to_pandas()
    geometry = read_table(out, "geometry", ["run_id", "step"])
    runs = read_table(out, "runs", ["run_id", "status"]).to_pylist()
    written = {
        "metrics": set(zip(metrics["run_id"], metrics["step"].astype(int), strict=True)),
        "geometry": set(zip(geometry.column("run_id").to_pylist(),
                            geometry.column("step").to_pylist(), strict=True)),
    }
    grokked = set(metrics.loc[reached(metrics["test_acc"], grok_threshold), "run_id"])
    return TrainFolder(out, written, {r["run_id"]: r["status"] for r in runs}, grokked)


def check_folder(folder: TrainFolder, run_ids: list[str], resume: bool) -> None:
    """Refuse (FolderError) a folder with runs unless resuming the same trial into it."""
    out, ids = folder.out, folder.run_ids
    if not ids:
        return
    if not resume:
        if folder.unfinished:
            raise FolderError(
                f"{out}: holds an interrupted run ({len(folder.unfinished)} of {len(ids)} run(s) "
                f"unfinished, evaluations to step {folder.last_step:,}): pass --resume to "
                "continue it, or --fresh to delete it and start over")
        raise FolderError(f"{out}: already holds runs: pass --fresh to delete it and start "
                          "over, or choose another --out")
    other = sorted(ids - set(run_ids))
    if other:
        raise FolderError(
            f"{out}: holds runs of another trial (run id {other[0]}, not one this file and "
            "these --set values make): --resume continues the same command only; --fresh "
            "deletes the folder and starts over")


class Checkpoints:
    """The on_eval hook: progress, a checkpoint every `every` evaluations, and the safe point
    where a first signal stops the run (a checkpoint there, then Interrupted)."""

    def __init__(self, directory: Path, every: int, sink: FirstWriteSink,
                 intr: Interruption, progress: Callable[[Any], None]) -> None:
        self.directory, self.every, self.sink = directory, every, sink
        self.intr, self.progress = intr, progress
        self.evals = 0
        self.step: int | None = None
        """The step of the newest checkpoint this process wrote."""

    def __call__(self, report: Any) -> None:
        self.progress(report)
        self.evals += 1
        if len(report.metrics) == len(report.finished):
            return  # every run ended here: the trainer finishes, nothing is left to interrupt
        if report.step > 0 and (self.intr.requested or self.evals % self.every == 0):
            self.save(report)
        self.intr.check()

    def save(self, report: Any) -> None:
        # Rows first: a checkpoint must never be ahead of the rows on disk (a resume would skip
        # the evaluations in between). The trainer writes report.finished after this hook:
        # written here already, the sink passes each run row once.
        self.sink.flush()
        for row in report.finished:
            self.sink.write_run(row)
        with critical():  # the step is recorded with the file: a deferred interrupt comes after
            report.save_checkpoint(self.directory)
            self.step = report.step


def record_interruption(trainer: Any, sink: FirstWriteSink, folder: TrainFolder) -> int:
    """After a signal: flush the rows, write the run rows of the runs that ended but have none
    on disk yet, and an interrupted row for each run that goes on. Returns how many."""
    sink.flush()
    for row in trainer.done:
        rid = row["run_id"]
        if rid not in sink.run_ids and folder.statuses.get(rid) not in ENDED_STATUSES:
            sink.write_run(row)
    rows = trainer.interrupted_rows(INTERRUPTED)
    for row in rows:
        sink.write_run(row)
    # A save cut short leaves its temporary file (save_checkpoint replaces it next time).
    from sweepgrok.train.trainer import CHECKPOINT_FILE

    with contextlib.suppress(OSError):
        (folder.checkpoint / f".{CHECKPOINT_FILE}.tmp").unlink(missing_ok=True)
    return len(rows)


def kept_text(out: Path, last_step: int, interrupted: int, checkpoint: int | None) -> str:
    """What an interrupted `train` kept, for sweepgrok.core.interrupt.continue_line."""
    where = (f"a checkpoint at step {checkpoint:,}" if checkpoint is not None
             else "no checkpoint yet (--resume starts over and writes only the rows not there)")
    return (f"{out} holds every evaluation to step {last_step:,}, {interrupted} run(s) marked "
            f"interrupted and {where}")


def steps_on_disk(out: Path) -> int:
    """The last evaluated step whose rows are in `out` (0 when none can be read)."""
    try:
        steps = read_table(out, "metrics", ["step"]).column("step").to_pylist()
    except Exception:  # a record of what was kept must not fail the interrupted command
        return 0
    return max(steps, default=0)


def remove_checkpoint(folder: TrainFolder) -> None:
    """Every run ended: nothing resumes from the checkpoint any more."""
    shutil.rmtree(folder.checkpoint, ignore_errors=True)
