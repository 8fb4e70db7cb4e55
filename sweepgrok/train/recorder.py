"""Any training loop's evaluations, recorded as a sweep folder that sweepgrok reads like its own.

``Recorder(folder, config)`` takes the evaluations of a loop sweepgrok did not write
(``.log(step, train_acc=..., test_acc=..., ...)``) and writes them in the sweep folder layout
(sweepgrok.store.sink): metrics/ rows with the columns of sweepgrok.store.columns, a metric it
does not know kept as an extra column of its own; at the end one runs/ row whose fit and grok
steps and status come from the trainer's own definitions (sweepgrok.train.events:
``RunTracker``, ``end_status``, ``run_row``). So ``analyze``, ``report``, ``status`` and ``ls``
read the folder as they read one of ``sweepgrok train``.

`config` describes the run as a trial config does: ``train.max_steps`` is its budget (a run
that has not grokked by then is censored), ``train.grok_threshold`` and ``train.fit_threshold``
its thresholds, ``train.stop_after_grok`` whether grokking ends it, and the other keys are the
runs/ columns that ``analyze --by`` groups on. Its run id is the config's hash, as for
``sweepgrok train``: one Recorder per run (per seed), several into one folder.

Until ``finish()``, every ``flush_every`` evaluations the rows go to disk with a run row of
status ``interrupted`` (the events so far): a loop that crashes, is killed or never finishes
leaves a folder that reads as an interrupted run, and ``finish()``'s final row supersedes it.
Its heartbeat (sweepgrok.store.heartbeat, as a sweep's driver writes) tells ``status`` whether
the process that records is still alive.
"""

from __future__ import annotations

import atexit
import math
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa

from sweepgrok.config.trial import Config, ConfigError, as_config, config_hash
from sweepgrok.core.errors import quoted
from sweepgrok.store.columns import INTERRUPTED, METRICS_COLUMNS
from sweepgrok.store.compact import compact_sweep
from sweepgrok.store.heartbeat import Heartbeat
from sweepgrok.store.provenance import provenance
from sweepgrok.store.sink import METRICS_SCHEMA, RUNS_SCHEMA, to_table, write_part
from sweepgrok.store.sweepdir import check_sweep_path, make_sweep_folder
from sweepgrok.train.events import RunTracker, end_status, run_row
from sweepgrok.train.trainrun import read_folder

KEY_COLUMNS = ("run_id", "step")
"""metrics/ columns the Recorder fills itself; a metric may not be named so."""
ACCURACIES = ("train_acc", "test_acc")
"""The two accuracies every evaluation gives: the fit and grok steps are read from them."""
_KNOWN = {c.name: c.type for c in METRICS_COLUMNS}


class Recorder:
    """Record one run of any training loop into the sweep folder `folder`.

    >>> with Recorder("runs/mlp", {"train": {"max_steps": 3000}}) as rec:
    ...     for step in range(0, 3001, 100):
    ...         ...  # train, then evaluate
    ...         if rec.log(step, train_acc=a_train, test_acc=a_test, train_loss=loss):
    ...             break  # the run ended by the trainer's rule (grokked, diverged, budget)

    `config`: a trial config (a YAML path, a dict or a Config; see
    sweepgrok.config.trial.as_config), `overrides` dotted keys over it. `run_id` replaces the
    config hash. `device` is recorded in the run row's provenance. Bad input (a config key or
    value, an accuracy outside [0, 1], a step that goes back, a folder holding this run
    already) raises ConfigError with the message the command line would print.
    """

    def __init__(
        self,
        folder: str | Path,
        config: str | Path | Mapping[str, Any] | Config | None = None,
        *,
        overrides: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        device: str = "cpu",
        flush_every: int = 20,
    ) -> None:
        self.config = as_config(config if config is not None else {}, overrides or {})
        if len(self.config.train.seed_list) != 1:
            raise ConfigError("config: train.seeds: a Recorder records one run: give "
                              "train.seed, one Recorder per seed")
        if flush_every < 1:
            raise ConfigError(f"flush_every: must be at least 1 (got {quoted(flush_every)})")
        self.folder = Path(folder)
        self.run_id = run_id or config_hash(self.config)
        self.flush_every = flush_every
        self.tracker = RunTracker.for_config(self.run_id, self.config)
        self.status: str | None = None
        """The status the run would end with by the trainer's rule after the last evaluation
        (grokked, completed, censored, diverged), else None; after finish(), its status."""
        self._check_folder()
        self._extra = {"sweep": self.folder.name, **provenance(device)}
        self._rows: list[dict[str, Any]] = []
        self._extras: dict[str, pa.DataType] = {}
        self._diverged = False
        self._t0 = time.perf_counter()
        self.finished = False
        # The heartbeat `status` reads: running while this process lives, then how it ended
        # (a process killed outright leaves "running" with a dead pid: read as interrupted).
        self._beat = Heartbeat(self.folder, "record", total=1).start()
        self._beat.update({"running": 1})
        atexit.register(self._abandon)  # a script that ends without finish(): interrupted

    def _check_folder(self) -> None:
        """A folder a sweep may be written to, not holding this run yet; created, marked."""
        check_sweep_path(self.folder)
        held = read_folder(self.folder, self.config.train.grok_threshold).run_ids
        if self.run_id in held:
            raise ConfigError(
                f"{self.folder}: already holds run {self.run_id} (this config's): give another "
                "train.seed or run_id, or another folder")
        make_sweep_folder(self.folder)

    # ---- evaluations --------------------------------------------------------------------

    def log(self, step: int, *, train_acc: float, test_acc: float, **metrics: Any) -> bool:
        """Record the evaluation at `step` (accuracies are fractions in [0, 1]); `metrics` are
        more columns (train_loss, test_loss, lr, deff, ... or any name of your own, a number
        each). Returns True when the run has ended by the trainer's rule (`status`)."""
        if self.finished:
            raise ConfigError(f"run {self.run_id}: finished already: log before finish()")
        row = self._row(step, train_acc, test_acc, metrics)
        self.tracker.update(row["step"], row["train_acc"], row["test_acc"], row.get("deff"))
        loss = row.get("train_loss")
        self._diverged |= loss is not None and not math.isfinite(loss)
        t = self.config.train
        self.status = end_status(self.tracker, row["step"], t.max_steps, self._diverged,
                                 t.stop_after_grok)
        self._rows.append(row)
        if len(self._rows) >= self.flush_every:
            self._flush(INTERRUPTED)
        return self.status is not None

    def _row(self, step: Any, train_acc: Any, test_acc: Any,
             metrics: Mapping[str, Any]) -> dict[str, Any]:
        """The metrics/ row of one evaluation, every value checked."""
        last = self.tracker.last.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ConfigError(f"step: must be an int >= 0 (got {quoted(step)})")
        if last is not None and step <= last:
            raise ConfigError(f"step: must grow from one evaluation to the next (got {step} "
                              f"after {last})")
        row: dict[str, Any] = {"run_id": self.run_id, "step": step,
                               "wall_time": time.perf_counter() - self._t0}
        for name, value in {"train_acc": train_acc, "test_acc": test_acc, **metrics}.items():
            row[name] = self._value(name, value)
        return row

    def _value(self, name: str, value: Any) -> Any:
        """A metric's value as its column takes it; a new name becomes an extra column."""
        if name in KEY_COLUMNS:
            raise ConfigError(f"{name}: is set by the Recorder, not a metric")
        text = name in _KNOWN and pa.types.is_string(_KNOWN[name])
        if value is None or (text and isinstance(value, str)):
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            try:  # a 0-d tensor or numpy scalar: its number
                value = float(value.item() if hasattr(value, "item") else value)
            except (TypeError, ValueError):
                raise ConfigError(f"{name}: must be a number (got {quoted(value)})") from None
        if name in ACCURACIES and not 0.0 <= value <= 1.0:
            raise ConfigError(f"{name}: must be a fraction in [0, 1] (got {quoted(value)}): "
                              "divide a percentage by 100")
        if name not in _KNOWN:
            self._extras.setdefault(name, pa.float64())
        return float(value)

    # ---- the end ------------------------------------------------------------------------

    def finish(self) -> dict[str, Any]:
        """End the run: the rows left and its run row, whose status is the trainer's rule's at
        the last evaluation, else ``censored`` (stopped before its budget, as a stopped trial
        is). Returns the run row."""
        if self.finished:
            raise ConfigError(f"run {self.run_id}: finished already")
        return self._end(self.status or "censored")

    def _end(self, status: str, error: str | None = None) -> dict[str, Any]:
        row = self._flush(status, error)
        self.finished = True
        atexit.unregister(self._abandon)
        compact_sweep(self.folder)  # the interrupted rows go: one row per run on disk
        ended = status != INTERRUPTED
        self._beat.stop("ended" if ended else INTERRUPTED,
                        {"failed" if status == "failed" else "done" if ended else INTERRUPTED: 1})
        return row

    def _flush(self, status: str, error: str | None = None) -> dict[str, Any]:
        """Write the rows so far, then the run row with `status` (metrics first: a run row is
        never on disk before its metrics)."""
        if self._rows:
            extra = [pa.field(n, t) for n, t in self._extras.items()]
            write_part(self.folder / "metrics", to_table(self._rows, pa.schema(
                [*METRICS_SCHEMA, *extra])))
            self._rows = []
        steps = int(self.tracker.last.get("step", 0))
        row = run_row(self.config, self.tracker, status, steps,
                      time.perf_counter() - self._t0, {**self._extra, "error": error})
        write_part(self.folder / "runs", to_table([row], RUNS_SCHEMA))
        return row

    def _abandon(self) -> None:
        """At exit without finish(): what was logged stays, the run marked interrupted."""
        if not self.finished and (self._rows or self.tracker.last):
            self._end(INTERRUPTED)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 trace: TracebackType | None) -> None:
        """finish() at the block's end; on Ctrl-C the run is marked interrupted, on an error
        failed (its message in the run row's error); the exception goes on."""
        if self.finished:
            return
        if err is None:
            self.finish()
        elif isinstance(err, KeyboardInterrupt):
            self._end(INTERRUPTED)
        else:
            self._end("failed", f"{type(err).__name__}: {err}")
