"""Parquet layout: one fixed schema, immutable parts, dedupe on read, any reader."""

from pathlib import Path

import duckdb
import pandas as pd
import pytest

from sweepgrok.config.trial import Config, flatten
from sweepgrok.store.sink import (
    METRICS_SCHEMA,
    RUNS_SCHEMA,
    ParquetSink,
    read_metrics,
    read_runs,
)


def _metric(run, step, acc, **kw):
    return {"run_id": run, "step": step, "train_acc": acc, "test_acc": acc / 2, **kw}


def test_fixed_schema_read_by_pandas_and_duckdb(tmp_path):
    sink = ParquetSink(tmp_path, flush_rows=2)
    sink.write_metrics([_metric("a", 0, 0.1), _metric("a", 10, 0.5)])  # flushed: no geometry
    sink.write_metrics([_metric("b", 0, 0.2, deff=3.0, fourier_freqs="1,2")])
    sink.write_run({**flatten(Config()), "run_id": "a", "status": "censored", "steps_run": 10})
    files = sorted((tmp_path / "metrics").glob("*.parquet"))
    assert len(files) == 2
    df = pd.read_parquet(tmp_path / "metrics")
    assert list(df.columns) == METRICS_SCHEMA.names and len(df) == 3  # no column dropped
    query = f"select count(*), count(deff) from '{tmp_path}/metrics/*.parquet'"
    n = duckdb.sql(query).fetchall()[0]
    assert n == (3, 1)
    runs = pd.read_parquet(tmp_path / "runs")
    assert list(runs.columns) == RUNS_SCHEMA.names
    assert runs.loc[0, "optim.betas"] == "[0.9, 0.98]" and runs.loc[0, "task.p"] == 113


def test_readers_keep_the_last_written_row(tmp_path):
    sink = ParquetSink(tmp_path)
    sink.write_metrics([_metric("a", 0, 0.1), _metric("a", 10, 0.5)])
    sink.flush()
    sink.write_metrics([_metric("a", 10, 0.7), _metric("a", 20, 0.9)])  # a retry re-reports 10
    sink.write_run({"run_id": "a", "status": "failed"})
    sink.write_run({"run_id": "a", "status": "grokked"})
    m = read_metrics(tmp_path)
    assert m[["step", "train_acc"]].values.tolist() == [[0, 0.1], [10, 0.7], [20, 0.9]]
    assert read_runs(tmp_path)["status"].tolist() == ["grokked"]
    assert len(read_metrics(tmp_path, columns=["test_acc"]).columns) == 3  # keys + projection


def test_no_temporary_files_left_and_unknown_columns_rejected(tmp_path):
    sink = ParquetSink(tmp_path)
    sink.write_metrics([_metric("a", 0, 0.1)])
    sink.flush()
    assert not list((tmp_path / "metrics").glob(".tmp-*"))
    with pytest.raises(KeyError, match="not in the schema"):
        sink.write_run({"run_id": "a", "mystery": 1})


def test_empty_sweep_reads_as_empty_frame(tmp_path):
    assert read_metrics(tmp_path).empty and list(read_runs(tmp_path).columns) == RUNS_SCHEMA.names


def test_fast_dedupe_equals_pandas_keep_last():
    import numpy as np
    import pyarrow as pa

    from sweepgrok.store.sink import dedupe

    rng = np.random.default_rng(0)
    n = 5000
    df = pd.DataFrame({
        "run_id": rng.choice(["a", "b", "c10", "c2"], n),
        "step": rng.integers(0, 300, n),
        "layer": rng.integers(0, 3, n),
        "v": np.arange(n, dtype=float),  # write order
    })
    want = (df.drop_duplicates(["run_id", "step", "layer"], keep="last")
            .sort_values(["run_id", "step", "layer"]).reset_index(drop=True))
    got = dedupe(pa.Table.from_pandas(df), ["run_id", "step", "layer"]).to_pandas()
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want)


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_write_leaves_no_partial_file(tmp_path, monkeypatch, error):
    import pyarrow.parquet as pq

    from sweepgrok.store.sink import PartWriteError

    sink = ParquetSink(tmp_path)
    sink.write_metrics([_metric("a", 0, 0.1)])
    sink.flush()
    before = sorted((tmp_path / "metrics").iterdir())

    def fail_half_way(table, where, *args, **kwargs):
        Path(where).write_bytes(b"PAR1 half a part")
        raise error

    monkeypatch.setattr(pq, "write_table", fail_half_way)
    sink.write_metrics([_metric("a", 10, 0.5)])
    expected = PartWriteError if isinstance(error, OSError) else KeyboardInterrupt
    with pytest.raises(expected) as info:
        sink.flush()
    if expected is PartWriteError:
        assert str(info.value) == (
            f"{tmp_path / 'metrics'}: cannot write a part file: No space left on device"
        )
        assert info.value.errno == 28
    assert sorted((tmp_path / "metrics").iterdir()) == before  # nothing half-written stays
    assert read_metrics(tmp_path)["step"].tolist() == [0]  # what was written is intact


def test_readers_accept_narrower_numbers_and_numbers_as_text(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "metrics").mkdir()
    table = pa.table(
        {
            "run_id": pa.array([7], pa.int32()),  # an id written as a number: read as "7"
            "step": pa.array([10], pa.int32()),
            "test_acc": pa.array([0.5], pa.float32()),
            "deff": pa.array([None], pa.null()),
        }
    )
    pq.write_table(table, tmp_path / "metrics" / "part-1.parquet")
    m = read_metrics(tmp_path)
    assert m[["run_id", "step", "test_acc"]].values.tolist() == [["7", 10, 0.5]]


def test_first_write_sink_passes_each_run_row_once():
    """A checkpoint at the evaluation where a run ended writes its run row; the trainer then
    hands on the same row: the folder must hold it once (seen on an H200, seeds 1 and 5)."""
    from sweepgrok.store.sink import FirstWriteSink, ListSink

    inner = ListSink()
    sink = FirstWriteSink(inner, {"metrics": set(), "geometry": set()})
    row = {"run_id": "a", "status": "grokked", "steps_run": 2400}
    sink.write_run(row)
    sink.write_run(dict(row))
    sink.write_run({"run_id": "b", "status": "censored", "steps_run": 6000})
    assert [r["run_id"] for r in inner.runs] == ["a", "b"]
