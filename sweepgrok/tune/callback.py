"""Driver-side Tune callback: the trials' rows -> the sweep's Parquet, plus the live view.

Exactly-once argument (readers keep the last row per key, see sweepgrok.store.sink):
- every row a trial reports is buffered here and flushed every `flush_rows` rows, at trial end,
  and *before* any result that carries a checkpoint is acknowledged, so rows up to a checkpoint
  are on disk before Tune's experiment snapshot can refer to that checkpoint;
- a retried or restored trial resumes from a checkpoint and re-emits the steps after it: the
  same (run_id, step) keys, deduplicated by the readers (run ids come from the trial id);
- a run row is written when its run ends; a failed trial gets a `failed` row; a later success
  (retry, or --resume of errored trials) writes a newer row that supersedes it; a run whose
  row said it ended (not failed) when this driver session began keeps that row (ended_before),
  and so does one whose row this session wrote (a retried trial re-emits its end);
- a trial a signal stopped gets an `interrupted` row for each run that had not ended (as
  `sweepgrok train` writes them): not an end; --resume supersedes it with the run's own end.
Trackers (sweepgrok.trackers) are mirrored from this same sink, after the Parquet: a replayed
step is not sent to a tracker again (TrackedSink remembers the last step each one holds).
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ray import tune

from sweepgrok.config.trial import flatten, from_flat
from sweepgrok.core import interrupt
from sweepgrok.store.heartbeat import Heartbeat
from sweepgrok.store.sink import (
    ENDED_STATUSES,
    INTERRUPTED,
    ParquetSink,
    PartWriteError,
    read_runs,
)
from sweepgrok.trackers import TrackerSpec
from sweepgrok.trackers.base import TrackedSink, tracked
from sweepgrok.trackers.targets import absolute_spec
from sweepgrok.train.events import GROKKED_STATUSES
from sweepgrok.tune.progress import LiveView
from sweepgrok.tune.prune import CheckpointPruner
from sweepgrok.tune.trainable import CKPT_FLAG, PAYLOAD, run_ids_for

TUNE_DIR = "tune"
"""Tune's experiment folder inside the sweep folder."""
ERROR_CHARS = 4000
"""Tail of the error trace kept in a failed run row."""


class ParquetCallback(tune.Callback):
    """Writes every trial's rows through one ParquetSink; picklable (Tune pickles callbacks)."""

    def __init__(
        self,
        sweep_dir: str | Path,
        sweep: str,
        total: int,
        flush_rows: int = 2000,
        live: bool = True,
        trackers: Sequence[TrackerSpec] = (),
        heartbeat: Heartbeat | None = None,
    ) -> None:
        # Absolute now: the driver's working directory may vanish during the fit (a Ray job's).
        self.sweep_dir = str(Path(sweep_dir).resolve())
        self.sweep = sweep
        self.total = total
        self.flush_rows = flush_rows
        self.live = live
        # MLflow targets absolute now, in the directory the command started in: the fit runs
        # in the sweep folder, where a relative (or MLflow's default) store would be opened.
        self.trackers = [absolute_spec(t) for t in trackers]
        self._sink: TrackedSink | None = None
        self._view: LiveView | None = None
        self._finished: dict[str, set[str]] = {}  # trial_id -> run ids with a run row
        self._trial_dirs: dict[str, Path] = {}  # trial_id -> its folder in storage
        self._ended_runs: dict[str, list[dict[str, Any]]] = {}  # trial_id -> its ended runs
        self._ended_before: set[str] | None = None  # runs ended in earlier driver sessions
        # trial (row key) -> run id -> the run's last step written in this session
        self._last_step: dict[str, dict[str, int]] = {}
        self.pruner = CheckpointPruner(Path(self.sweep_dir) / TUNE_DIR)
        self.grokked = 0
        self.heartbeat = heartbeat
        self._started: set[str] = set()  # Tune trial ids started in this session
        self._ended_here: set[str] = set()  # ... and those that ended (completed or failed)
        # Tune trial id -> its status when this session first saw it (TERMINATED: it ended in
        # an earlier session; anything else: it had to start here to end).
        self._first_seen: dict[str, str] = {}
        self._stopping = False
        self.ended: dict[str, int] | None = None
        """Trial status -> count when the experiment ended (None before); INTERRUPTED: a trial
        this session started that was stopped before it ended (Tune calls it TERMINATED)."""

    def __getstate__(self) -> dict[str, Any]:
        # The sink holds a lock and tracker clients, the view a terminal: rebuilt lazily.
        state = self.__dict__.copy()
        state.update(_sink=None, _view=None, heartbeat=None)
        return state

    @property
    def sink(self) -> TrackedSink:
        if self._sink is None:
            parquet = ParquetSink(self.sweep_dir, flush_rows=self.flush_rows)
            self._sink = tracked(parquet, self.trackers, self.sweep, self.sweep_dir)
        return self._sink

    # ---- Tune hooks -------------------------------------------------------------------------

    def setup(self, *args: Any, **info: Any) -> None:
        if self.live and self._view is None:
            self._view = LiveView(self.total, self.sweep)
            self._view.start()

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self._see(trials)
        if interrupt.requested() is not None and not self._stopping:
            self._stopping = True
            # Tune's own graceful stop (its handler of SIGUSR1, installed by fit): the loop
            # ends, the experiment state is saved with these trials RUNNING (so --resume
            # resumes them from their checkpoints), then the trials are stopped.
            stop = signal.getsignal(signal.SIGUSR1)
            if callable(stop):
                stop(signal.SIGUSR1, None)
            if self._view is not None:
                self._view.stopping = interrupt.name()

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._see(trials)
        self._started.add(_tune_id(trial))
        self._refresh(trials)

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict, **info: Any
    ) -> None:
        raw = result.get(PAYLOAD)
        if raw:
            self.write_rows(trial.trial_id, json.loads(raw))
        if result.get(CKPT_FLAG):
            self.sink.flush()
        if self._view is not None:
            self._view.trial_result(trial.trial_id, result.get("step"), result.get("test_acc"))
        self._refresh(trials)

    def on_checkpoint(
        self, iteration: int, trials: list[Any], trial: Any, checkpoint: Any, **info: Any
    ) -> None:
        self.sink.flush()
        self.pruner.on_checkpoint(checkpoint.path)
        self._trial_dirs[trial.trial_id] = Path(checkpoint.path).parent

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self._see(trials)  # trials made during the step, before a stop can mark them
        self.pruner.prune()

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._ended_here.add(_tune_id(trial))
        self.sink.flush()
        if trial.trial_id in self._trial_dirs:
            self.pruner.on_complete(self._trial_dirs[trial.trial_id])
        if self._view is not None:
            key = self.row_key(trial)
            self._view.trial_ended(key, self._ended_runs.pop(key, []))
        self._refresh(trials)

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.sink.flush()

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._ended_here.add(_tune_id(trial))
        failed = self.write_failed(trial.trial_id, trial.config, error_text(trial))
        if self._view is not None:
            ended = self._ended_runs.pop(trial.trial_id, [])
            self._view.trial_ended(trial.trial_id, ended + failed, failed=True)
        self._refresh(trials)

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self.ended = dict(Counter(self._status(t) for t in trials))
        try:
            for trial in trials:
                if self._status(trial) == "INTERRUPTED":
                    self.write_interrupted(self.row_key(trial), trial.config)
        finally:
            self.close(trials)

    def _see(self, trials: Sequence[Any]) -> None:
        """Remember the status of each trial the first time this session sees it."""
        for trial in trials:
            self._first_seen.setdefault(_tune_id(trial), str(trial.status))

    def _status(self, trial: Any) -> str:
        """Tune's status of the trial; INTERRUPTED for one stopped after it started and before
        it ended, PENDING for one stopped before it started.

        Tune's stop marks TERMINATED every trial that holds a worker, including one still
        waiting for its resources: only a trial that ended here, or had ended before this
        session, is done."""
        status = str(trial.status)
        if status != "TERMINATED" or not (self._started or self._first_seen):
            return status  # no trial seen in this session (none started): Tune's word
        tid = _tune_id(trial)
        if tid in self._ended_here:
            return status
        if tid in self._started:
            return "INTERRUPTED"
        return status if self._first_seen.get(tid, status) == status else "PENDING"

    def states(self, trials: Sequence[Any]) -> dict[str, int]:
        """This session's trials by sweepgrok state (done, running, pending, failed,
        interrupted)."""
        ours = {"TERMINATED": "done", "ERROR": "failed", "RUNNING": "running",
                "INTERRUPTED": "interrupted"}
        counts = Counter(ours.get(self._status(t), "pending") for t in trials)
        return {s: counts.get(s, 0) for s in ("done", "running", "pending", "failed",
                                             "interrupted")}

    def row_key(self, trial: Any) -> str:
        """The id the trial's rows are written under (its Tune trial id here)."""
        return str(trial.trial_id)

    def all_ended(self, total: int) -> bool:
        """True once the experiment ended with each of `total` trials finished or failed."""
        ended = self.ended or {}
        return ended.get("TERMINATED", 0) + ended.get("ERROR", 0) == total

    # ---- rows ---------------------------------------------------------------------------

    def write_rows(self, trial_id: str, rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        """One evaluation's rows: metrics, geometry, then run rows of runs that ended."""
        metrics = rows.get("metrics", [])
        self.sink.write_metrics(metrics)
        self.sink.write_geometry(rows.get("geometry", []))
        last = self._last_step.setdefault(trial_id, {}) if metrics else {}
        for row in metrics:
            rid, step = str(row["run_id"]), int(row["step"])
            last[rid] = max(step, last.get(rid, step))
        finished = self._finished.setdefault(trial_id, set())
        for run in rows.get("finished", []):
            rid = str(run["run_id"])
            if rid in finished:
                # Its row is written: a trial Tune retried from a checkpoint (its worker died
                # after this report, before the trial ended) reaches the same end again.
                continue
            if rid not in self.ended_before():
                self.sink.write_run(run)  # flushes the metrics first
            finished.add(rid)
            self._ended_runs.setdefault(trial_id, []).append(_ended(run))
            if run.get("status") in GROKKED_STATUSES:
                self.grokked += 1

    def write_failed(
        self, trial_id: str, config: Mapping[str, Any], error: str
    ) -> list[dict[str, Any]]:
        """A `failed` run row for each run of the trial that has not ended well already
        (returned, shortened to what the live view shows)."""
        self.sink.flush()
        written = []
        ended = self._finished.get(trial_id, set()) | self.ended_before()
        for row in trial_rows(self.sweep, trial_id, config, "failed", error=error):
            if row["run_id"] in ended:
                continue
            self.sink.write_run(row)
            written.append(_ended(row))
        return written

    def write_interrupted(self, trial_id: str, config: Mapping[str, Any]) -> None:
        """An `interrupted` run row for each run of a trial a signal stopped that had not
        ended: its config, and steps_run the last step this session wrote of it (`analyze
        --censor-interrupted` censors it there). A run this session wrote no step of (its trial
        stopped before its first result) gets none: its rows, if any, are older."""
        last = self._last_step.get(trial_id)
        if not last:
            return
        self.sink.flush()
        ended = self._finished.get(trial_id, set()) | self.ended_before()
        for row in trial_rows(self.sweep, trial_id, config, INTERRUPTED):
            step = last.get(row["run_id"])
            if row["run_id"] not in ended and step is not None:
                self.sink.write_run({**row, "steps_run": step})

    def ended_before(self) -> set[str]:
        """The runs whose row said they ended (not failed) when this driver session began.

        Their rows stay as written: no `failed` row over them, no second final row. A trial
        whose last result reached the driver as a signal stopped it can end there (run row
        written) while Tune's snapshot still calls it unfinished; --resume then runs it again
        from its checkpoint to the same end (deterministic training), and a second run row
        would only repeat the first. Read once, when this session first writes a run row,
        before it does. A damaged part is left out (warned): it must not stop the sweep;
        analyze refuses it.
        """
        if self._ended_before is None:
            runs = read_runs(self.sweep_dir, columns=["status"], skip_damaged=True)
            ended = runs[runs["status"].isin(ENDED_STATUSES) & (runs["status"] != "failed")]
            self._ended_before = set(ended["run_id"].astype(str))
        return self._ended_before

    def close(self, trials: Sequence[Any] = ()) -> None:
        """Flush everything, end open tracker runs, stop the live view, log what was pruned
        (idempotent)."""
        self.sink.flush()
        self.sink.close()
        self.pruner.prune(force=True)
        self._refresh(trials)
        if self._view is not None:
            self._view.stop()
            self._view = None
        self.pruner.report()

    def _refresh(self, trials: Sequence[Any]) -> None:
        if not trials:
            return
        states = self.states(trials)
        if self.heartbeat is not None:
            self.heartbeat.update(states)
        if self._view is None:
            return
        self._view.update(
            done=states["done"] + states["failed"],
            running=states["running"],
            grokked=self.grokked,
            failed=states["failed"],
            interrupted=states["interrupted"],
        )


def _tune_id(trial: Any) -> str:
    """Tune's own id of a trial (SearchCallback shows some hooks a trial keyed otherwise)."""
    return str(getattr(trial, "_trial", trial).trial_id)


def _ended(run: Mapping[str, Any]) -> dict[str, Any]:
    """What the live view's log line shows of a run row."""
    return {k: run.get(k) for k in ("run_id", "status", "grok_step", "steps_run")}


def raise_write_error(err: BaseException) -> None:
    """Raise the PartWriteError behind `err`, if any (else return).

    Tune turns a callback's exception into a TuneError holding only its traceback's text (the
    original is its __context__): unwrapped, a full disk reaches the command as itself.
    """
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, PartWriteError):
            raise seen from None
        seen = seen.__cause__ or seen.__context__


def error_text(trial: Any) -> str:
    """The trial's error (the end of its trace), for the failed run row."""
    text = None
    try:
        # The driver-local error file is written before on_trial_error; storage may lag.
        local = trial.error_file
        if local and Path(local).exists():
            text = Path(local).read_text()
        text = text or trial.get_error()
    except Exception:  # the error file may live on unreachable storage
        text = None
    text = str(text or "trial failed (no error text recorded)").strip()
    return text[-ERROR_CHARS:]


def trial_rows(
    sweep: str, trial_id: str, config: Mapping[str, Any], status: str, **fields: Any
) -> list[dict[str, Any]]:
    """Run rows with `status` (failed, interrupted: censored, no events) for every run of a
    trial, config columns filled in, the driver's code version (a run row the trial itself
    writes carries its worker's), `fields` added."""
    from sweepgrok.config.tasks import split_seed_for
    from sweepgrok.store.provenance import git_commit, git_dirty, package_version

    cfg = from_flat(config["cfg"])
    rows = []
    for seed, run_id in zip(cfg.train.seed_list, run_ids_for(sweep, trial_id, cfg), strict=True):
        member = cfg.member(seed)
        flat = {**flatten(member), "task.data_seed": split_seed_for(cfg.task, seed)}
        rows.append(
            {
                **flat,
                "run_id": run_id,
                "sweep": sweep,
                "trial_id": trial_id,
                "status": status,
                "censored": True,
                "sweepgrok_version": package_version("sweepgrok"),
                "git_commit": git_commit(),
                "git_dirty": git_dirty(),
                **fields,
            }
        )
    return rows
