"""Parquet output of a sweep: schemas declared once, immutable part files, deduplicating readers.

Layout of one sweep folder (``<storage>/<name>/``)::

    runs/      one row per run (run_id, every config key by dotted path, status, fit/grok steps,
               provenance)
    metrics/   one row per (run_id, step) evaluation
    geometry/  long form, one row per (run_id, step, layer)

Every column is declared once in sweepgrok.store.columns: the schemas below are built from it,
and docs/outputs.md lists them (the run statuses too, re-exported here). Every file is written
to a temporary name in the same folder and then ``os.replace``d, so a reader never sees a
half-written part. A retried or resumed run writes new parts; the readers keep the last-written
row per key (``(run_id, step)``, ``(run_id, step, layer)``, ``run_id``), and the command's end
compacts a folder that holds a key twice to one row per key (sweepgrok.store.compact), so that
plain Parquet readers read a finished sweep right too.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from sweepgrok.config.trial import SECTIONS
from sweepgrok.core.interrupt import critical
from sweepgrok.store.columns import ENDED_STATUSES as ENDED_STATUSES
from sweepgrok.store.columns import (
    FOLDERS,
    GEOMETRY_COLUMNS,
    METRICS_COLUMNS,
    RUNS_COLUMNS,
    schema,
)
from sweepgrok.store.columns import INTERRUPTED as INTERRUPTED
from sweepgrok.store.columns import STATUSES as STATUSES
from sweepgrok.store.outputs import os_reason
from sweepgrok.store.parts import (
    ARROW_ERRORS,
    DamagedPart,
    PartVanished,
    as_dataset,
    damaged,
    drop_out_of_range,
    part_files,
    range_problem,
    scan_problem,
)

# Part files carry a monotone write order in their name so readers can keep the newest row.
_PART_FMT = "part-{seq:013d}-{uid}.parquet"

METRICS_SCHEMA = schema(METRICS_COLUMNS)
"""metrics/: one row per (run_id, step) evaluation (columns: sweepgrok.store.columns)."""
GEOMETRY_SCHEMA = schema(GEOMETRY_COLUMNS)
"""geometry/: one row per (run_id, step, layer) (columns: sweepgrok.store.columns)."""
RUN_FIELDS: list[tuple[str, pa.DataType]] = [(c.name, c.type) for c in RUNS_COLUMNS]
"""runs/ columns besides the config keys (sweepgrok.store.columns.RUNS_COLUMNS)."""


def _config_fields() -> list[tuple[str, pa.DataType]]:
    from sweepgrok.config.trial import Config

    types = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}
    out = []
    for section, cls in SECTIONS.items():
        defaults = getattr(Config(), section)
        for field in cls.model_fields:
            value = getattr(defaults, field)
            typ = types.get(type(value), pa.string())
            if field in ("batch_size", "threads"):
                typ = pa.int64()
            out.append((f"{section}.{field}", typ))
    return out


RUNS_SCHEMA = pa.schema(RUN_FIELDS + _config_fields())
"""runs/: list-valued config keys (optim.betas, train.seeds, geomdr.layers) are stored as their
JSON text so that every tool can group by them."""


def _cell(value: Any, typ: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_string(typ) and not isinstance(value, str):
        import json

        return json.dumps(value)
    return value


def to_table(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows -> a table with exactly `schema` (missing columns null, unknown keys rejected)."""
    names = set(schema.names)
    for row in rows:
        extra = set(row) - names
        if extra:
            raise KeyError(f"columns not in the schema: {sorted(extra)}")
    cols = {
        f.name: pa.array([_cell(r.get(f.name), f.type) for r in rows], type=f.type)
        for f in schema
    }
    return pa.table(cols, schema=schema)


_seq_lock = threading.Lock()
_last_seq = 0


def _next_seq() -> int:
    # Nanosecond clock, forced strictly increasing within the process: order of writes.
    global _last_seq
    import time

    with _seq_lock:
        _last_seq = max(_last_seq + 1, time.time_ns())
        return _last_seq


class PartWriteError(OSError):
    """A part file could not be written (disk full, read-only, no permission).

    Nothing of it is left behind, and the parts written before are intact: once the cause is
    gone, a resumed sweep re-emits the rows after its last checkpoint (readers deduplicate).
    """

    def __init__(self, folder: Path, err: OSError) -> None:
        reason = os_reason(err)  # pyarrow's own text is a sentence around the errno's
        super().__init__(err.errno, reason)
        self.folder = folder
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.folder}: cannot write a part file: {self.reason}"


def write_part(folder: Path, table: pa.Table) -> Path:
    """Write one immutable part: temporary name in the same folder, then atomic rename, as one
    critical() block (a second Ctrl-C ends the process after the rename, not between).

    Raises PartWriteError when the folder cannot take it; the temporary file is removed.
    """
    final = part_path(folder)
    tmp = temporary_name(final)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with critical():
            pq.write_table(table, tmp)
            os.replace(tmp, final)
    except BaseException as err:  # interrupted too: never leave a partial file behind
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise PartWriteError(folder, err) from err
        raise
    return final


def part_path(folder: Path, seq: int | None = None) -> Path:
    """A new part's path in `folder`: ``part-<seq>-<uid>.parquet``, seq the next in write
    order unless given (a compacted part takes the newest seq of the parts it replaces)."""
    number = _next_seq() if seq is None else seq
    return folder / _PART_FMT.format(seq=number, uid=uuid.uuid4().hex[:8])


def temporary_name(final: Path) -> Path:
    """Where a part is written before its rename: hidden, and not ``*.parquet``, so that no
    reader lists it (DuckDB's and Polars' globs match hidden names; pandas skips them)."""
    return final.with_name(f".tmp-{final.name}.tmp")


class Sink(Protocol):
    """Where the trainer's rows go (a Parquet folder, Ray's reporter, a test list)."""

    def write_metrics(self, rows: Sequence[Mapping[str, Any]]) -> None: ...
    def write_geometry(self, rows: Sequence[Mapping[str, Any]]) -> None: ...
    def write_run(self, row: Mapping[str, Any]) -> None: ...
    def flush(self) -> None: ...


class ParquetSink:
    """Buffers rows and writes part files of the sweep folder layout.

    Metric and geometry rows are flushed every `flush_rows` rows, at `flush()` and with each
    run row (so a run row is never on disk before its metrics).
    """

    def __init__(self, sweep_dir: str | Path, flush_rows: int = 2000) -> None:
        self.root = Path(sweep_dir)
        self.flush_rows = flush_rows
        self.runs_written: set[str] = set()
        """Run ids whose run row this sink put on disk (recorded with the part's rename)."""
        self._metrics: list[Mapping[str, Any]] = []
        self._geometry: list[Mapping[str, Any]] = []
        self._lock = threading.Lock()

    def write_metrics(self, rows: Sequence[Mapping[str, Any]]) -> None:
        with self._lock:
            self._metrics.extend(rows)
            full = len(self._metrics) >= self.flush_rows
        if full:
            self.flush()

    def write_geometry(self, rows: Sequence[Mapping[str, Any]]) -> None:
        with self._lock:
            self._geometry.extend(rows)
            full = len(self._geometry) >= self.flush_rows
        if full:
            self.flush()

    def write_run(self, row: Mapping[str, Any]) -> None:
        self.flush()
        with critical():  # recorded with its part: a deferred interrupt comes after both
            write_part(self.root / "runs", to_table([row], RUNS_SCHEMA))
            self.runs_written.add(str(row["run_id"]))

    def flush(self) -> None:
        # The rows leave the buffer, are written and are cleared in one block: an interrupt it
        # defers (a second Ctrl-C) comes after all three, never between.
        metrics: list[Mapping[str, Any]] = []
        geometry: list[Mapping[str, Any]] = []
        with critical():
            try:
                with self._lock:
                    metrics, self._metrics = self._metrics, []
                    geometry, self._geometry = self._geometry, []
                if metrics:
                    write_part(self.root / "metrics", to_table(metrics, METRICS_SCHEMA))
                    metrics = []
                if geometry:
                    write_part(self.root / "geometry", to_table(geometry, GEOMETRY_SCHEMA))
                    geometry = []
            except (KeyboardInterrupt, SystemExit):
                # An interrupt not deferred (Python's own SIGINT handler, outside
                # sweepgrok.core.interrupt's): the rows go back to the buffer for a later flush.
                # An OSError drops them (PartWriteError: a resume re-emits them).
                with self._lock:
                    self._metrics[:0], self._geometry[:0] = metrics, geometry
                raise


class FirstWriteSink:
    """A Sink that passes on only the evaluations not yet in the sweep folder, and remembers
    which run rows it wrote.

    A resumed run re-emits the evaluations between its checkpoint and the interruption; they are
    bit-identical but for wall_time, so the first-written rows stay and the folder holds each
    (run_id, step) once (the readers would keep the last anyway). `written` maps metrics and
    geometry to the (run_id, step) pairs already on disk (``written_steps``)."""

    def __init__(self, inner: Sink, written: Mapping[str, set[tuple[str, int]]]) -> None:
        self.inner = inner
        self.written = written
        self.run_ids: set[str] = set()
        """The run ids whose run row went through this sink."""

    def _new(self, kind: str, rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        seen = self.written.get(kind, set())
        return [r for r in rows if (r["run_id"], r["step"]) not in seen]

    def write_metrics(self, rows: Sequence[Mapping[str, Any]]) -> None:
        new = self._new("metrics", rows)
        if new:
            self.inner.write_metrics(new)

    def write_geometry(self, rows: Sequence[Mapping[str, Any]]) -> None:
        new = self._new("geometry", rows)
        if new:
            self.inner.write_geometry(new)

    def write_run(self, row: Mapping[str, Any]) -> None:
        """Pass a run's row once: a checkpoint written where a run ended writes its row before
        the trainer hands on the same row."""
        run_id = str(row["run_id"])
        if run_id in self.run_ids:
            return
        try:
            self.inner.write_run(row)
        except BaseException:
            # A second Ctrl-C lands right after the row's part is in place (and before the
            # trackers): the cleanup must not write the row again.
            if run_id in getattr(self.inner, "runs_written", ()):
                self.run_ids.add(run_id)
            raise
        self.run_ids.add(run_id)

    def flush(self) -> None:
        self.inner.flush()


def written_steps(sweep_dir: str | Path) -> dict[str, set[tuple[str, int]]]:
    """metrics and geometry -> the (run_id, step) pairs their parts hold (FirstWriteSink)."""
    out = {}
    for kind in ("metrics", "geometry"):
        table = read_table(sweep_dir, kind, ["run_id", "step"])
        out[kind] = set(zip(table.column("run_id").to_pylist(), table.column("step").to_pylist(),
                            strict=True))
    return out


class ListSink:
    """In-memory sink for tests and for callers that post-process rows themselves."""

    def __init__(self) -> None:
        self.metrics: list[dict[str, Any]] = []
        self.geometry: list[dict[str, Any]] = []
        self.runs: list[dict[str, Any]] = []

    def write_metrics(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.metrics.extend(dict(r) for r in rows)

    def write_geometry(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.geometry.extend(dict(r) for r in rows)

    def write_run(self, row: Mapping[str, Any]) -> None:
        self.runs.append(dict(row))

    def flush(self) -> None:
        pass


KEYS = {name: list(folder.key) for name, folder in FOLDERS.items()}
SCHEMAS = {"metrics": METRICS_SCHEMA, "geometry": GEOMETRY_SCHEMA, "runs": RUNS_SCHEMA}


def read_table(
    sweep_dirs: str | Path | Iterable[str | Path],
    kind: str = "metrics",
    columns: Sequence[str] | None = None,
    *,
    skip_damaged: bool = False,
) -> pa.Table:
    """Read `kind` (metrics, geometry, runs) of one or more sweep folders, deduplicated.

    Keeps the last-written row for each key, so a retried, resumed or re-reported run counts
    once. `columns` projects (the key columns are always read). A damaged part file raises
    DamagedPart, or with `skip_damaged` is left out with a warning (sweepgrok.store.parts).
    A part that vanishes between the listing and the read (compacted meanwhile:
    sweepgrok.store.compact) makes the read start over from a new listing.
    """
    if kind not in SCHEMAS:
        raise ValueError(f"kind must be one of {', '.join(SCHEMAS)} (got {kind!r})")
    dirs = [Path(sweep_dirs)] if isinstance(sweep_dirs, str | Path) else list(map(Path, sweep_dirs))
    for _ in range(RELIST_TRIES - 1):
        try:
            return read_parts(dirs, kind, columns, skip_damaged)[0]
        except PartVanished:
            continue
    return read_parts(dirs, kind, columns, skip_damaged)[0]


RELIST_TRIES = 5
"""Listings a read tries when parts vanish under it (each compaction takes one)."""


def read_parts(
    dirs: Sequence[Path], kind: str, columns: Sequence[str] | None, skip_damaged: bool
) -> tuple[pa.Table, list[ds.Fragment]]:
    """(`kind`'s rows deduplicated, the parts they were read from): one listing, one read.
    Raises PartVanished when a listed part is gone before its rows are read."""
    schema = SCHEMAS[kind]
    parts = part_files(dirs, kind, schema, skip_damaged)
    keys = KEYS[kind]
    cols = None if columns is None else list(dict.fromkeys([*keys, *columns]))
    try:
        table = _scan(parts, schema, cols)
    except ARROW_ERRORS:
        # A part whose footer is fine but whose rows are not: find it (and, skipping, retry).
        parts = _drop_unreadable(parts, schema, cols, skip_damaged)
        table = _scan(parts, schema, cols)
    if range_problem(table, kind):  # find the part(s) at fault: the error names them
        parts = drop_out_of_range(parts, schema, kind, skip_damaged)
        table = _scan(parts, schema, cols)
    return dedupe(table, keys), parts


def _scan(parts: Sequence[ds.Fragment], schema: pa.Schema, cols: list[str] | None) -> pa.Table:
    if not parts:
        empty = schema.empty_table()
        return empty if cols is None else empty.select(cols)
    # Parts are appended in write order; dedupe keeps the last occurrence of each key.
    return as_dataset(parts, schema).to_table(columns=cols)


def _drop_unreadable(
    parts: Sequence[ds.Fragment],
    schema: pa.Schema,
    cols: list[str] | None,
    skip: bool,
) -> list[ds.Fragment]:
    """`parts` without those whose rows cannot be read (DamagedPart unless `skip`)."""
    kept = []
    for part in parts:
        problem = scan_problem(part, schema, cols)
        if problem is None:
            kept.append(part)
            continue
        path = Path(part.path)  # <sweep_dir>/<kind>/<name>, as part_files built it
        damaged(path.parents[1], path, problem, skip)
    if len(kept) == len(parts):  # every part reads alone: name the folder rather than crash
        folder = Path(parts[0].path).parent
        raise DamagedPart(folder.parent, f"{folder.name}/", "its parts cannot be read together")
    return kept


def dedupe(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Keep the last row of each key (row order = write order), sorted by key.

    A numpy sort rather than pyarrow's group_by: the single-threaded hash aggregation on the
    string run_id was most of the read time of a 2M-row sweep (benchmarks/bench_analysis.py).
    """
    if table.num_rows == 0:
        return table
    import numpy as np
    import pandas as pd

    cols = []
    for k in keys:
        values = table.column(k).to_numpy(zero_copy_only=False)
        cols.append(pd.factorize(values, sort=True)[0] if values.dtype == object else values)
    # lexsort: last key is primary; the write index breaks ties so the newest row comes last.
    order = np.lexsort([np.arange(table.num_rows), *reversed(cols)])
    sorted_cols = [c[order] for c in cols]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = np.logical_or.reduce([c[1:] != c[:-1] for c in sorted_cols])
    return table.take(pa.array(order[last]))


def read_metrics(
    sweep_dirs: Any,
    columns: Sequence[str] | None = None,
    *,
    skip_damaged: bool = False,
    extras: bool = False,
) -> Any:
    """metrics/ as a pandas DataFrame, one row per (run_id, step) (see read_table); with
    `extras`, also every column a part holds beyond the schema (a Recorder's own metrics)."""
    frame = read_table(sweep_dirs, "metrics", columns, skip_damaged=skip_damaged).to_pandas()
    return _with_extras(frame, sweep_dirs, skip_damaged) if extras else frame


def _with_extras(frame: Any, sweep_dirs: Any, skip_damaged: bool) -> Any:
    """`frame` (metrics/ read) joined with the extra columns of its parts, the last-written
    value per (run_id, step) as for every other column."""
    dirs = [Path(sweep_dirs)] if isinstance(sweep_dirs, str | Path) else list(map(Path, sweep_dirs))
    parts = part_files(dirs, "metrics", METRICS_SCHEMA, skip_damaged)
    fields: dict[str, pa.Field] = {}
    for part in parts:
        for f in part.physical_schema:
            if f.name not in METRICS_SCHEMA.names:
                fields.setdefault(f.name, f)
    if not fields:
        return frame
    wide = pa.schema([METRICS_SCHEMA.field("run_id"), METRICS_SCHEMA.field("step"),
                      *fields.values()])
    extra = dedupe(as_dataset(parts, wide).to_table(), KEYS["metrics"]).to_pandas()
    return frame.merge(extra, on=KEYS["metrics"], how="left")


def read_runs(
    sweep_dirs: Any, columns: Sequence[str] | None = None, *, skip_damaged: bool = False
) -> Any:
    """runs/ as a pandas DataFrame, one row per run_id, its last-written (see read_table)."""
    return read_table(sweep_dirs, "runs", columns, skip_damaged=skip_damaged).to_pandas()


def read_geometry(
    sweep_dirs: Any, columns: Sequence[str] | None = None, *, skip_damaged: bool = False
) -> Any:
    """geometry/ as a pandas DataFrame, one row per (run_id, step, layer) (see read_table)."""
    return read_table(sweep_dirs, "geometry", columns, skip_damaged=skip_damaged).to_pandas()
