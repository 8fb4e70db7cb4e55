"""TrackedSink: the driver's Parquet sink, mirrored to trackers, exactly once per (run, step).

Where the rows are mirrored is where the Parquet gets them: the sink the driver writes through
(``sweepgrok train``'s, and the Tune callback's for ``launch`` and ``search``). The Parquet is
written first; a tracker sees a row only after it. A retried or resumed trial replays the
evaluations after its checkpoint with the same (run_id, step) keys: the Parquet readers keep
the last row of each key, a tracker cannot drop a duplicate afterwards, so a step is sent to a
tracker only when it is beyond the last step that tracker holds for the run (remembered in this
session, and asked of the tracker when a former session's tracker run is continued).

A tracker that fails (server down, bad URI, no permission) logs one warning and is off for the
rest of the command; it never fails the sweep, and the Parquet is complete either way.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from sweepgrok.store.columns import summary_columns
from sweepgrok.store.sink import (
    INTERRUPTED,
    METRICS_SCHEMA,
    RUN_FIELDS,
    RUNS_SCHEMA,
    Sink,
    to_table,
)
from sweepgrok.store.sweepdir import MARKER
from sweepgrok.trackers.spec import MissingExtra, TrackerSpec

log = logging.getLogger(__name__)

METRIC_KEYS = tuple(f.name for f in METRICS_SCHEMA if pa.types.is_floating(f.type))
"""The metrics/ columns sent as step-indexed series (the numeric ones; null values are left
out)."""
SUMMARY_KEYS = (*summary_columns(), "delay")
"""The numbers a run ends with, sent as numeric summary values (MLflow metrics, W&B summary) a
tracker can sort and plot by: the runs/ columns declared as summaries (Column.summary in
sweepgrok.store.columns; docs/outputs.md lists them) and delay = grok_step - fit_step;
censored = 1 when the run did not grok within its steps, else 0. A value that is null (a
censored run's grok_step and delay) is left out, never sent as text. The run's status goes with
them as text."""
CONFIG_KEYS = tuple(n for n in RUNS_SCHEMA.names if n not in {name for name, _ in RUN_FIELDS})
"""The config columns of runs/ (dotted keys), sent as the tracker run's parameters."""


class Tracker(Protocol):
    """One tracker backend; `run_id` is always a sweepgrok run id."""

    kind: str

    def open(self, run_id: str) -> int | None:
        """Start the tracker run of `run_id`, or continue the one an earlier session of this
        sweep folder started; the last step it holds (None: none)."""
        ...

    def log_metrics(self, run_id: str, step: int, values: Mapping[str, float]) -> None:
        """One evaluation's metrics at `step` (steps arrive increasing per run)."""
        ...

    def finish(self, run_id: str, params: Mapping[str, Any], summary: Mapping[str, Any]) -> None:
        """The run ended: its config as parameters, its summary values; end the tracker run."""
        ...

    def close(self) -> None:
        """End the tracker runs still open (trials cut short: a --resume continues them)."""
        ...

    def attach(self, files: Sequence[Path]) -> None:
        """Put `files` (the sweep file, analyze's table, the report) on the sweep's parent run
        (MLflow: the run the sweep's runs are nested under; W&B: a run of the sweep's group)."""
        ...


def folder_key(sweep_dir: str | Path) -> str:
    """What tells this sweep folder from an earlier one of the same name (deleted by --fresh):
    the creation time of its marker. A tracker run is continued only within one folder."""
    try:
        return str((Path(sweep_dir) / MARKER).stat().st_mtime_ns)
    except OSError:
        return "none"


def load_tracker(spec: TrackerSpec, sweep: str, folder: str) -> Tracker:
    """The backend of `spec`, constructed (MissingExtra when its library cannot be imported)."""
    try:
        if spec.kind == "mlflow":
            from sweepgrok.trackers.mlflow import MlflowTracker

            return MlflowTracker(spec.target, sweep, folder)
        from sweepgrok.trackers.wandb import WandbTracker

        return WandbTracker(spec.target, sweep, folder)
    except ImportError as err:
        raise MissingExtra(spec.kind) from err


def warn_failed(kind: str, err: BaseException) -> None:
    """The one warning of a tracker that failed."""
    reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    log.warning(
        "%s tracker failed (%s): it is off for the rest of this command; the Parquet sweep "
        "folder is complete", kind, reason[:300],
    )


class _Mirror:
    """One tracker and the last step it holds per run; off after its first failure."""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker
        self.last: dict[str, int] = {}
        self.open_runs: set[str] = set()
        self.ok = True

    def guard(self, action: Callable[..., None], *args: Any) -> None:
        if not self.ok:
            return
        try:
            action(*args)
        except Exception as err:  # any failure of the tracker or its server: never the sweep's
            self.ok = False
            warn_failed(self.tracker.kind, err)
            try:
                self.tracker.close()
            except Exception:
                log.debug("closing the failed %s tracker", self.tracker.kind, exc_info=True)

    def _ensure_open(self, run_id: str) -> None:
        if run_id in self.open_runs:
            return
        held = self.tracker.open(run_id)
        self.open_runs.add(run_id)
        if held is not None:
            self.last[run_id] = max(held, self.last.get(run_id, held))

    def metrics(self, rows: Sequence[Mapping[str, Any]]) -> None:
        for row in rows:
            run_id, step = str(row["run_id"]), int(row["step"])
            self._ensure_open(run_id)
            if step <= self.last.get(run_id, -1):
                continue  # replayed after a checkpoint: the tracker holds this step already
            self.tracker.log_metrics(run_id, step, metric_values(row))
            self.last[run_id] = step

    def run(self, row: Mapping[str, Any]) -> None:
        run_id = str(row["run_id"])
        self._ensure_open(run_id)
        if row.get("status") == INTERRUPTED:
            return  # not finished: close() ends the tracker run as cut short, --resume continues
        record = to_table([row], RUNS_SCHEMA).to_pylist()[0]  # the values runs/ holds
        params = {k: record[k] for k in CONFIG_KEYS}
        summary = {"status": record["status"], **summary_values(record)}
        self.tracker.finish(run_id, params, summary)
        self.open_runs.discard(run_id)

    def close(self) -> None:
        self.tracker.close()
        self.open_runs.clear()


def summary_values(record: Mapping[str, Any]) -> dict[str, int | float]:
    """The SUMMARY_KEYS of a runs/ record, as numbers (nulls left out)."""
    grok, fit, censored = record["grok_step"], record["fit_step"], record["censored"]
    values = {k: record[k] for k in SUMMARY_KEYS if k in record}
    values["delay"] = grok - fit if grok is not None and fit is not None else None
    values["censored"] = int(grok is None if censored is None else censored)
    return {k: float(v) if isinstance(v, float) else int(v) for k, v in values.items()
            if v is not None}


def metric_values(row: Mapping[str, Any]) -> dict[str, float]:
    """The numeric metrics of a metrics/ row (nulls left out)."""
    return {k: float(row[k]) for k in METRIC_KEYS if row.get(k) is not None}


class TrackedSink:
    """A Sink that writes through `inner` (the Parquet) and then mirrors to trackers."""

    def __init__(
        self, inner: Sink, trackers: Sequence[Tracker] = (), sweep_dir: str | Path | None = None
    ) -> None:
        self.inner = inner
        self.mirrors = [_Mirror(t) for t in trackers]
        self.sweep_dir = None if sweep_dir is None else Path(sweep_dir)
        """Whose files the parent runs get when the command ends (None: none, or done)."""

    def write_metrics(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.inner.write_metrics(rows)
        for mirror in self.mirrors:
            mirror.guard(mirror.metrics, rows)

    def write_geometry(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.inner.write_geometry(rows)

    def write_run(self, row: Mapping[str, Any]) -> None:
        self.inner.write_run(row)
        for mirror in self.mirrors:
            mirror.guard(mirror.run, row)

    def flush(self) -> None:
        self.inner.flush()

    @property
    def runs_written(self) -> set[str]:
        """The run ids whose row `inner` put on disk (when it records them: ParquetSink)."""
        return set(getattr(self.inner, "runs_written", ()))

    def close(self) -> None:
        """End the tracker runs still open, then put the sweep's files on its parent run
        (idempotent); the Parquet is the caller's (flushed before)."""
        for mirror in self.mirrors:
            mirror.guard(mirror.close)
        sweep_dir, self.sweep_dir = self.sweep_dir, None
        if sweep_dir is not None and any(m.ok for m in self.mirrors):
            attach_sweep_files(self.mirrors, sweep_dir)


def attach_sweep_files(mirrors: Sequence[_Mirror], sweep_dir: Path) -> None:
    """The sweep file, analyze's table and the report of `sweep_dir` on each parent run."""
    from sweepgrok.trackers.artifacts import report_files, sweep_files

    with tempfile.TemporaryDirectory(prefix="sweepgrok-tracker-") as scratch:
        try:
            files = sweep_files(sweep_dir, Path(scratch))
        except Exception as err:  # a damaged or half-written folder: the runs are mirrored
            _not_attached("analysis table", err)
            return
        try:
            files += report_files(sweep_dir, Path(scratch))
        except Exception as err:  # the table is attached without it
            _not_attached("report", err)
        for mirror in mirrors:
            mirror.guard(mirror.tracker.attach, files)


def _not_attached(what: str, err: BaseException) -> None:
    log.warning("the sweep's %s was not attached to the trackers (%s)", what,
                str(err).splitlines()[0][:300] if str(err) else type(err).__name__)


def tracked(
    inner: Sink, specs: Sequence[TrackerSpec], sweep: str, sweep_dir: str | Path
) -> TrackedSink:
    """`inner` mirrored to the trackers of `specs`; one that cannot start is warned about and
    left out (the command goes on)."""
    trackers = []
    folder = folder_key(sweep_dir)
    for spec in specs:
        try:
            trackers.append(load_tracker(spec, sweep, folder))
        except Exception as err:
            warn_failed(spec.kind, err)
    return TrackedSink(inner, trackers, sweep_dir)
