"""Damaged or hostile sweep folders and unwritable outputs, through the commands a user types.

Every case exits with one plain line (``error: <where>: <message>``), never a traceback: 2 for
bad input (a damaged part file, a bad option or output path), 1 for a run whose rows could not
be written (a full disk), and nothing already written is lost.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import GROKS, write_sweep
from conftest import one_line_error as message
from typer.testing import CliRunner

from sweepgrok.cli import app

runner = CliRunner()
ROOT = Path(__file__).parents[2]


def run_cli(*args: str | Path) -> Any:
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    return write_sweep(tmp_path / "quick", GROKS)


def first_part(sweep: Path, kind: str) -> Path:
    return sorted((sweep / kind).glob("part-*.parquet"))[0]


# ---- damaged part files ----------------------------------------------------------------------


ACCURACY = {"metrics": "test_acc", "runs": "final_test_acc"}


def _wrong_type(path: Path) -> None:
    column = ACCURACY[path.parent.name]
    pq.write_table(pa.table({"run_id": ["x"], column: ["0.5"]}), path)  # an accuracy as text


DAMAGE = {
    "zero-byte": (lambda p: p.write_bytes(b""), "an empty file (0 bytes)"),
    "truncated": (lambda p: p.write_bytes(p.read_bytes()[:-40]), "not a readable Parquet file"),
    "garbage": (lambda p: p.write_bytes(b"not parquet\n" * 50), "not a readable Parquet file"),
    "folder": (lambda p: (p.unlink(), p.mkdir()), "a folder, not a part file"),
    "wrong-type": (_wrong_type, "column {accuracy} holds string values, expected double"),
}


@pytest.mark.parametrize("kind", ["metrics", "runs"])
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_part_exits_2_naming_it(sweep: Path, kind: str, damage: str) -> None:
    part = first_part(sweep, kind)
    spoil, reason = DAMAGE[damage]
    spoil(part)
    reason = reason.format(accuracy=ACCURACY[kind])
    result = run_cli("analyze", sweep)
    assert result.exit_code == 2
    line = message(result.output)
    assert line.startswith(f"error: {sweep}: {kind}/{part.name}: {reason}"), line
    assert "move it aside (the other part files are intact)" in line and "--skip-damaged" in line


@pytest.mark.parametrize("kind", ["metrics", "runs"])
def test_skip_damaged_leaves_the_part_out_with_a_warning(sweep: Path, kind: str) -> None:
    part = first_part(sweep, kind)
    part.write_bytes(b"")
    result = run_cli("analyze", sweep, "--skip-damaged", "--format", "csv")
    assert result.exit_code == 0, result.output
    warned = " ".join(result.stderr.split())  # the log handler wraps lines
    assert f"{kind}/{part.name}: an empty file (0 bytes): left out" in warned
    assert "model.norm" in result.stdout  # the table of the parts that could be read


def _set_value(path: Path, column: str, value: float) -> None:
    table = pq.read_table(path)
    values = [value, *table.column(column).to_pylist()[1:]]  # one bad row among good ones
    pq.write_table(table.set_column(table.schema.get_field_index(column), column,
                                    pa.array(values, pa.float64())), path)


def _drop_column(path: Path, column: str) -> None:
    table = pq.read_table(path)
    pq.write_table(table.drop_columns([column]), path)


OUT_OF_RANGE = {
    "negative": (lambda p: _set_value(p, "test_acc", -5.0), "test_acc holds -5, outside [0, 1]"),
    "percent": (lambda p: _set_value(p, "train_acc", 97.0), "train_acc holds 97, outside [0, 1]"),
    "no-test-acc": (lambda p: _drop_column(p, "test_acc"), "no test_acc column"),
}


@pytest.mark.parametrize("damage", list(OUT_OF_RANGE))
def test_metrics_out_of_range_or_without_test_acc_exit_2_naming_the_part(
    sweep: Path, damage: str
) -> None:
    parts = sorted((sweep / "metrics").glob("part-*.parquet"))
    part = parts[len(parts) // 2]  # not the first: the reader must find which one
    spoil, reason = OUT_OF_RANGE[damage]
    spoil(part)
    result = run_cli("analyze", sweep)
    assert result.exit_code == 2, result.output
    line = message(result.output)
    assert line.startswith(f"error: {sweep}: metrics/{part.name}: {reason}"), line
    skipped = run_cli("analyze", sweep, "--skip-damaged", "--format", "csv")
    assert skipped.exit_code == 0, skipped.output
    assert f"metrics/{part.name}: {reason}" in " ".join(skipped.stderr.split())


def test_corrupt_rows_behind_a_good_footer_exit_2(sweep: Path) -> None:
    part = first_part(sweep, "metrics")
    data = bytearray(part.read_bytes())
    data[4:400] = bytes(396)  # the first column chunk, not the footer
    part.write_bytes(bytes(data))
    result = run_cli("analyze", sweep)
    assert result.exit_code == 2
    assert f"metrics/{part.name}: unreadable rows, truncated or corrupt" in message(result.output)


def test_report_refuses_a_damaged_part_before_writing_anything(
    sweep: Path, tmp_path: Path
) -> None:
    first_part(sweep, "runs").write_bytes(b"garbage")
    out = tmp_path / "report"
    result = run_cli("report", sweep, "--out", out)
    assert result.exit_code == 2 and "runs/part-" in message(result.output)
    assert not out.exists()
    result = run_cli("report", sweep, "--out", out, "--skip-damaged")
    assert result.exit_code == 0 and (out / "report.md").is_file()


def test_skip_damaged_that_leaves_no_part_exits_2_before_writing_anything(
    sweep: Path, tmp_path: Path
) -> None:
    # Every part damaged and skipped: analyze printed a 0/0 nan% table, report a traceback
    # after making its folder.
    for kind in ("metrics", "runs"):
        for part in (sweep / kind).glob("part-*.parquet"):
            part.write_bytes(b"garbage")
    out = tmp_path / "report"
    for args in (["analyze", sweep], ["report", sweep, "--out", out]):
        result = run_cli(*args, "--skip-damaged")
        assert result.exit_code == 2
        line = message(result.output.splitlines()[-1])
        assert f"{sweep}: no run to analyse" in line and "--skip-damaged left every part" in line
    assert not out.exists()


# ---- what the readers ignore, and folders that are missing ---------------------------------


def _csv(*args: str | Path) -> str:
    result = run_cli("analyze", *args, "--format", "csv")
    assert result.exit_code == 0, result.output
    return str(result.stdout)


def test_links_and_a_killed_writers_files_are_ignored(sweep: Path, tmp_path: Path) -> None:
    clean = _csv(sweep)
    outside = write_sweep(tmp_path / "elsewhere", {"rmsnorm": [100, 100, 100]})
    for kind in ("runs", "metrics"):
        target = first_part(outside, kind)
        (sweep / kind / "part-9999999999999999999-link.parquet").symlink_to(target)
        (sweep / kind / ".tmp-part-9999999999999999999-dead.parquet").write_bytes(b"half")
        (sweep / kind / "part-1.parquet.tmp").write_bytes(b"half")
        (sweep / kind / ".part-2.parquet").write_bytes(b"")
    result = run_cli("analyze", sweep, "--format", "csv")
    assert result.exit_code == 0 and result.stdout == clean  # no rmsnorm group
    warned = " ".join(result.stderr.split())  # the log handler wraps lines
    assert "part-9999999999999999999-link.parquet: a symbolic link, ignored" in warned


def test_runs_without_metrics_exit_2(sweep: Path) -> None:
    for part in (sweep / "metrics").iterdir():
        part.unlink()
    result = run_cli("analyze", sweep)
    assert result.exit_code == 2
    assert "runs/ records 6 run(s) that ran, but metrics/ holds none" in message(result.output)
    (sweep / "metrics").rmdir()
    assert run_cli("analyze", sweep).exit_code == 2


def test_metrics_without_runs_are_analysed_as_one_group(sweep: Path) -> None:
    for part in (sweep / "runs").iterdir():
        part.unlink()
    (sweep / "runs").rmdir()
    assert "all runs" in _csv(sweep)  # no configs: the runs as they stand, one group


def test_a_file_in_place_of_a_kind_folder_exits_2(sweep: Path) -> None:
    for part in (sweep / "metrics").iterdir():
        part.unlink()
    (sweep / "metrics").rmdir()
    (sweep / "metrics").write_text("oops")
    result = run_cli("analyze", sweep)
    assert result.exit_code == 2
    assert message(result.output).startswith(f"error: {sweep}: metrics: a file, not the metrics/")


# ---- options and output paths, checked before anything is computed or printed ---------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--seed", "-1"], "error: --seed: "),
        (["--n-boot", "1000000000"], "error: --n-boot: "),
        (["--out", "{tmp}"], "error: --out: {tmp}: is a folder"),
        (["--out", "{file}/table.csv"], "error: --out: {file}/table.csv: {file} is not a folder"),
        (["--plots", "{file}"], "error: --plots: {file}: is a file, not a folder"),
        (["--plots", "{file}/figures"], "error: --plots: {file}/figures: {file} is not a folder"),
    ],
)
def test_bad_options_and_output_paths_exit_2_before_any_output(
    sweep: Path, tmp_path: Path, args: list[str], needle: str
) -> None:
    file = tmp_path / "a-file"
    file.write_text("keep me")
    fill = {"tmp": tmp_path, "file": file}
    result = run_cli("analyze", sweep, *[a.format(**fill) for a in args])
    assert result.exit_code == 2
    assert message(result.output).startswith(needle.format(**fill)), result.output
    assert file.read_text() == "keep me"


def test_an_unwritable_place_exits_2(
    sweep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: let the check see what a user would
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != locked and real(p, mode))
    for args, where in [
        (["analyze", sweep, "--out", locked / "t.csv"], "--out"),
        (["analyze", sweep, "--plots", locked / "figs"], "--plots"),
        (["report", sweep, "--out", locked / "report"], "--out"),
    ]:
        result = run_cli(*args)
        assert result.exit_code == 2
        assert message(result.output) == f"error: {where}: {args[-1]}: {locked} is not writable"


def test_a_full_disk_keeps_the_previous_out_file(
    sweep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "table.csv"
    out.write_text("the previous table")

    def disk_full(self: Path, *args: Any, **kwargs: Any) -> int:
        self.write_bytes(b"half a tab")  # what a writer leaves before ENOSPC
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    result = run_cli("analyze", sweep, "--out", out)
    assert result.exit_code == 2
    assert message(result.output) == f"error: --out: {out}: cannot write: No space left on device"
    assert out.read_text() == "the previous table" and os.listdir(tmp_path).count(out.name) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# ---- a full disk while a run writes its rows -------------------------------------------------


def test_train_on_a_full_disk_exits_1_and_resume_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = pq.write_table

    def disk_full(table: Any, where: Any, *args: Any, **kwargs: Any) -> None:
        Path(where).write_bytes(b"PAR1 half")
        raise OSError(errno.ENOSPC, "No space left on device")

    out = tmp_path / "o"
    args = [
        "train", ROOT / "search_spaces/trials/trial_quick.yaml", "--quiet", "--out", out,
        "--set", "train.max_steps=20", "--set", "task.p=11", "--set", "train.eval_every=10",
    ]  # fmt: skip
    monkeypatch.setattr(pq, "write_table", disk_full)
    result = run_cli(*args)
    assert result.exit_code == 1
    line = message(result.output)
    assert line.startswith(f"error: {out}/") and "No space left on device" in line
    assert line.endswith("--resume` continues")
    assert not list(out.rglob("*.parquet*"))  # no partial part file
    monkeypatch.setattr(pq, "write_table", real)  # space again
    assert run_cli(*args, "--resume").exit_code == 0
    assert len(list((out / "runs").glob("part-*.parquet"))) == 1
