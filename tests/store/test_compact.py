"""sweepgrok.store.compact on hand-written part folders: real Parquet, read back raw by pandas,
DuckDB and Polars, and by the readers of sweepgrok.store.sink."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytest
from conftest import assert_plain_readers_read_one_row_per_key

from sweepgrok.store import compact, sink
from sweepgrok.store.compact import compact_folder, compact_sweep
from sweepgrok.store.sink import ParquetSink, read_table, temporary_name


def _session(folder: Path, steps: list[int], status: str, wall: float) -> None:
    """One driver session's rows: runs a and b evaluated at `steps`, then their run rows."""
    out = ParquetSink(folder)
    for run in ("a", "b"):
        out.write_metrics([{"run_id": run, "step": s, "train_acc": 1.0, "test_acc": 0.5,
                            "wall_time": wall} for s in steps])
        out.write_geometry([{"run_id": run, "step": s, "layer": layer} for s in steps
                            for layer in (0, 1)])
        out.write_run({"run_id": run, "status": status, "steps_run": steps[-1]})


@pytest.fixture
def resumed(tmp_path: Path) -> Path:
    """A folder as a resume leaves it: the evaluations after the checkpoint (200) written
    again, and each run's final row after its interrupted one."""
    folder = tmp_path / "sweep"
    _session(folder, [0, 100, 200, 300], "interrupted", wall=1.0)
    _session(folder, [300, 400], "completed", wall=2.0)
    return folder


def _files(folder: Path) -> dict[str, list[str]]:
    return {k: sorted(p.name for p in (folder / k).iterdir()) for k in sink.SCHEMAS}


def _read(folder: Path) -> dict[str, pd.DataFrame]:
    return {kind: read_table(folder, kind).to_pandas() for kind in sink.SCHEMAS}


def _assert_same(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> None:
    for kind in sink.SCHEMAS:
        pd.testing.assert_frame_equal(a[kind], b[kind])


def test_a_compacted_folder_reads_one_row_per_key_with_any_reader(resumed: Path) -> None:
    before = _read(resumed)
    with pytest.raises(AssertionError):  # 2 rows for run a, step 300 twice
        assert_plain_readers_read_one_row_per_key(resumed)
    assert compact_sweep(resumed) == ["runs", "metrics", "geometry"]
    assert_plain_readers_read_one_row_per_key(resumed)
    assert {k: len(v) for k, v in _files(resumed).items()} == {"runs": 1, "metrics": 1,
                                                               "geometry": 1}
    _assert_same(_read(resumed), before)  # the readers read what they read before
    metrics = pd.read_parquet(resumed / "metrics")
    assert metrics.set_index(["run_id", "step"]).loc[("a", 300), "wall_time"] == 2.0  # the last
    assert pd.read_parquet(resumed / "runs")["status"].tolist() == ["completed"] * 2


def test_a_folder_with_each_key_once_is_left_as_it_is(tmp_path: Path) -> None:
    _session(tmp_path, [0, 100], "completed", wall=1.0)
    files = _files(tmp_path)
    assert compact_sweep(tmp_path) == []
    assert _files(tmp_path) == files


def test_a_crash_after_the_rename_leaves_a_folder_read_right_and_compacted_next_time(
    resumed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _read(resumed)
    real = compact._flush

    def crash_at_the_folder(path: Path) -> None:
        if path.is_dir():  # after the rename, before any old part goes
            raise OSError(5, "Input/output error")
        real(path)

    monkeypatch.setattr(compact, "_flush", crash_at_the_folder)
    assert compact_sweep(resumed) == []
    assert len(_files(resumed)["runs"]) == 5  # 4 run rows and the compacted part beside them
    assert not list(resumed.rglob("*.tmp"))
    _assert_same(_read(resumed), before)  # half-compacted: the readers read the same rows
    monkeypatch.setattr(compact, "_flush", real)
    assert compact_sweep(resumed) == ["runs", "metrics", "geometry"]
    assert_plain_readers_read_one_row_per_key(resumed)
    _assert_same(_read(resumed), before)


def test_a_write_that_fails_changes_nothing(
    resumed: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    files = _files(resumed)

    def disk_full(table: object, where: Path) -> None:
        Path(where).write_bytes(b"PAR1 half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(compact.pq, "write_table", disk_full)
    logger = logging.getLogger("sweepgrok")  # the CLI's setup stops it propagating to caplog's
    logger.addHandler(caplog.handler)
    try:
        assert compact_sweep(resumed) == []
    finally:
        logger.removeHandler(caplog.handler)
    assert _files(resumed) == files  # no temporary file left, no part removed
    assert "runs: left as it is, not compacted" in caplog.text
    assert "No space left on device" in caplog.text


def test_a_damaged_part_is_never_compacted_away(resumed: Path) -> None:
    (resumed / "runs" / "part-9-empty.parquet").write_bytes(b"")
    files = _files(resumed)
    assert compact_sweep(resumed) == ["metrics", "geometry"]
    assert _files(resumed)["runs"] == files["runs"]


def test_a_linked_part_folder_is_left_alone(resumed: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    (resumed / "metrics").rename(outside)
    (resumed / "metrics").symlink_to(outside)
    names = sorted(p.name for p in outside.iterdir())
    assert not compact_folder(resumed, "metrics")
    assert sorted(p.name for p in outside.iterdir()) == names


def test_a_reader_whose_parts_a_compaction_removed_lists_again(
    resumed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _read(resumed)
    real = sink.part_files
    calls = []

    def listed_then_compacted(*args: object, **kwargs: object) -> object:
        parts = real(*args, **kwargs)  # type: ignore[arg-type]
        calls.append(len(parts))
        if len(calls) == 1:
            assert compact_folder(resumed, "runs")  # every part just listed is gone
        return parts

    monkeypatch.setattr(sink, "part_files", listed_then_compacted)
    runs = read_table(resumed, "runs").to_pandas()
    assert calls == [4, 4, 1]  # the reader's, the compaction's own, the reader's again
    pd.testing.assert_frame_equal(runs, before["runs"])


def test_no_reader_lists_a_temporary_part(resumed: Path) -> None:
    # What a writer killed between its write and its rename leaves behind.
    compact_sweep(resumed)
    for kind in sink.SCHEMAS:
        final = sink.part_path(resumed / kind)
        temporary_name(final).write_bytes(b"PAR1 half written")
        assert temporary_name(final).name.startswith(".")
    assert_plain_readers_read_one_row_per_key(resumed)
