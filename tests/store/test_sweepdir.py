"""Sweep folders through the commands a user types: what --fresh may delete, which paths are
refused before anything starts, damaged study records, file modes (no Ray, no training)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import tiny_tree
from typer.testing import CliRunner

from sweepgrok.cli import app
from sweepgrok.config.search_file import load_search
from sweepgrok.search import study as S
from sweepgrok.store.sweepdir import MARKER, SWEEP_FILE

runner = CliRunner()
BASE = tiny_tree({"task.p": 11, "train.max_steps": 50, "train.eval_every": 25})
SEARCH = {
    "base": {"geomdr": {"enabled": True}, "train": {"max_steps": 1000, "eval_every": 50}},
    "search": {"space": {"geomdr.lambda_max": {"loguniform": [0.01, 1.0]}}},
}
TRIAL = Path(__file__).resolve().parents[2] / "search_spaces" / "trials" / "trial_quick.yaml"


def grid_file(tmp_path: Path, **top: Any) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump({"name": "alice", "base": BASE, "seeds": [1], **top}))
    return path


def search_file(tmp_path: Path, **top: Any) -> Path:
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump({"name": "s", **SEARCH, **top}))
    return path


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, Any]]:
    """Record what would start (a launch, a search, a training) instead of starting it; a
    launch or a search then exits 0."""
    calls: list[tuple[str, Any]] = []
    monkeypatch.chdir(tmp_path)

    def fake_launch(spec: Any, sweep_dir: Path, *args: Any, **kwargs: Any) -> Any:
        calls.append(("launch", sweep_dir))
        raise SystemExit(0)

    def fake_search(spec: Any, sweep_dir: Path, record: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(("search", record))
        raise SystemExit(0)

    def fake_train(trainer: Any, sink: Any, on_eval: Any) -> list[dict[str, Any]]:
        calls.append(("train", sink))
        return []

    monkeypatch.setattr("sweepgrok.cli.launch.run", fake_launch)
    monkeypatch.setattr("sweepgrok.cli.search.run", fake_search)
    monkeypatch.setattr("sweepgrok.train.trainer.Trainer.run", fake_train)
    return calls


@pytest.fixture
def keep_umask():
    """--umask sets the process's mask: give the test process its own back."""
    old = os.umask(0o022)
    os.umask(old)
    yield
    os.umask(old)


def started_ok(result: Any) -> None:
    """The command got past its checks and started (the fake exits 0 there)."""
    assert result.exit_code == 0, result.output


def refused(result: Any, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    for word in words:
        assert word in result.output


# ---- --fresh deletes only a sweep folder ------------------------------------------------------


def test_fresh_refuses_a_folder_that_is_not_a_sweep(tmp_path: Path, started: list) -> None:
    # storage: home, name: alice -- a home folder must survive --fresh.
    home = tmp_path / "home" / "alice"
    (home / "runs").mkdir(parents=True)
    (home / "thesis.tex").write_text("years of work")
    (home / "runs" / "part-1.parquet").write_bytes(b"")
    grid = grid_file(tmp_path, storage=str(tmp_path / "home"))
    refused(runner.invoke(app, ["launch", str(grid), "--fresh"]), str(home), "nothing deleted")
    assert (home / "thesis.tex").read_text() == "years of work"
    assert (home / "runs" / "part-1.parquet").exists() and not started


def test_fresh_deletes_a_folder_with_the_marker(tmp_path: Path, started: list) -> None:
    grid = grid_file(tmp_path)
    sweep = tmp_path / "runs" / "alice"
    started_ok(runner.invoke(app, ["launch", str(grid)]))
    assert (sweep / MARKER).is_file() and (sweep / SWEEP_FILE).is_file()
    (sweep / "runs").mkdir()
    (sweep / "runs" / "part-1.parquet").write_bytes(b"")
    (sweep / "notes.txt").write_text("the user's, inside a sweep folder")
    refused(runner.invoke(app, ["launch", str(grid)]), "--fresh")  # holds a sweep
    started_ok(runner.invoke(app, ["launch", str(grid), "--fresh"]))
    assert not (sweep / "runs").exists() and not (sweep / "notes.txt").exists()
    assert (sweep / MARKER).is_file() and started == [("launch", sweep.resolve())] * 2


def test_fresh_deletes_an_old_sweep_folder_of_sweepgrok_files_only(
    tmp_path: Path, started: list
) -> None:
    grid = grid_file(tmp_path)
    sweep = tmp_path / "runs" / "alice"
    (sweep / "runs").mkdir(parents=True)
    (sweep / "runs" / "part-1.parquet").write_bytes(b"")
    (sweep / SWEEP_FILE).write_text("name: alice\n")
    (sweep / "stray.txt").write_text("keep me")
    refused(runner.invoke(app, ["launch", str(grid), "--fresh"]), "runs/alice: --fresh")
    assert (sweep / "stray.txt").exists() and (sweep / "runs" / "part-1.parquet").exists()
    (sweep / "stray.txt").unlink()
    started_ok(runner.invoke(app, ["launch", str(grid), "--fresh"]))
    assert not (sweep / "runs").exists() and started == [("launch", sweep.resolve())]


def test_search_fresh_refuses_a_folder_that_is_not_a_sweep(tmp_path: Path, started: list) -> None:
    sweep = tmp_path / "runs" / "s"
    sweep.mkdir(parents=True)
    (sweep / "data.csv").write_text("1,2\n")
    path = search_file(tmp_path)
    refused(runner.invoke(app, ["search", str(path), "--fresh"]), "runs/s: ")
    assert (sweep / "data.csv").exists() and not started


# ---- paths refused before anything starts -----------------------------------------------------


def test_a_folder_of_other_files_is_not_written_into(tmp_path: Path, started: list) -> None:
    home = tmp_path / "runs" / "alice"
    home.mkdir(parents=True)
    (home / "thesis.tex").write_text("x")
    refused(runner.invoke(app, ["launch", str(grid_file(tmp_path))]), "runs/alice: ", "no sweep")
    assert sorted(p.name for p in home.iterdir()) == ["thesis.tex"] and not started


def test_an_empty_folder_becomes_a_sweep_folder(tmp_path: Path, started: list) -> None:
    (tmp_path / "runs" / "alice").mkdir(parents=True)
    started_ok(runner.invoke(app, ["launch", str(grid_file(tmp_path))]))
    assert (tmp_path / "runs" / "alice" / MARKER).is_file()


@pytest.mark.parametrize("option", [True, False], ids=["--storage", "storage key"])
def test_storage_that_is_a_file(tmp_path: Path, started: list, option: bool) -> None:
    storage = tmp_path / "store"
    storage.write_text("a file")
    grid = grid_file(tmp_path) if option else grid_file(tmp_path, storage=str(storage))
    args = ["--storage", str(storage)] if option else []
    refused(runner.invoke(app, ["launch", str(grid), *args]), f"{storage} is a file")
    refused(runner.invoke(app, ["search", str(search_file(tmp_path)), "--storage", str(storage)]),
            f"{storage} is a file")
    assert storage.read_text() == "a file" and not started


def test_sweep_folder_that_is_a_file_or_a_link(tmp_path: Path, started: list) -> None:
    grid = grid_file(tmp_path)
    sweep = tmp_path / "runs" / "alice"
    sweep.parent.mkdir()
    sweep.write_text("a file")
    refused(runner.invoke(app, ["launch", str(grid), "--fresh"]), "is a file")
    assert sweep.read_text() == "a file"
    sweep.unlink()
    target = tmp_path / "elsewhere"
    (target / "runs").mkdir(parents=True)
    (target / "runs" / "part-1.parquet").write_bytes(b"")
    sweep.symlink_to(target)
    refused(runner.invoke(app, ["launch", str(grid), "--fresh"]), "symbolic link")
    assert (target / "runs" / "part-1.parquet").exists() and not started


def test_train_out_that_is_a_file_fails_before_training(tmp_path: Path, started: list) -> None:
    out = tmp_path / "out"
    out.write_text("a file")
    refused(runner.invoke(app, ["train", str(TRIAL), "--out", str(out)]), "--out", "is a file")
    refused(runner.invoke(app, ["train", str(TRIAL), "--out", str(out / "x")]), "is a file")
    assert out.read_text() == "a file" and not started


def test_train_out_with_runs_is_refused_like_launch(tmp_path: Path, started: list) -> None:
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    (out / "runs" / "part-1.parquet").write_bytes(b"old")
    refused(runner.invoke(app, ["train", str(TRIAL), "--out", str(out)]), "--fresh", str(out))
    assert (out / "runs" / "part-1.parquet").read_bytes() == b"old" and not started
    result = runner.invoke(app, ["train", str(TRIAL), "--out", str(out), "--fresh", "--quiet"])
    assert result.exit_code == 0, result.output
    assert not (out / "runs").exists() and (out / MARKER).is_file()
    assert [kind for kind, _ in started] == ["train"]


# ---- study.json on --resume -------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["not json {", "[1, 2]", "folder", '{"study_name": 3}'])
def test_damaged_study_record_exits_2_naming_the_file(
    tmp_path: Path, started: list, damage: str
) -> None:
    path = search_file(tmp_path)
    record = tmp_path / "runs" / "s" / S.STUDY_FILE
    record.parent.mkdir(parents=True)
    if damage == "folder":
        record.mkdir()
    else:
        record.write_text(damage)
    refused(runner.invoke(app, ["search", str(path), "--resume"]), "runs/s/study.json: ",
            "not a study")
    assert not started


def test_study_record_cannot_point_optuna_elsewhere(tmp_path: Path, started: list) -> None:
    path = search_file(tmp_path)
    spec = load_search(path)
    sweep = spec.sweep_dir()
    record = S.new_study_record(spec, sweep)
    S.write_study_record(sweep, {**record, "storage": f"sqlite:///{tmp_path / 'other.db'}"})
    started_ok(runner.invoke(app, ["search", str(path), "--resume"]))
    [(kind, used)] = started
    assert kind == "search"
    assert used["storage"] == f"sqlite:///{sweep.resolve() / 'optuna.db'}"
    S.write_study_record(sweep, {**record, "study_storage": "postgresql"})
    refused(runner.invoke(app, ["search", str(path), "--resume"]), "study_storage", "journal")


# ---- file modes -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_study_storage_is_owner_only(tmp_path: Path, kind: str) -> None:
    record = {"study_storage": kind, "storage": S.storage_url(tmp_path, kind)}
    S.open_storage(record)
    (made,) = [p for p in tmp_path.iterdir() if p.name.startswith("optuna.")]
    assert made.stat().st_mode & 0o777 == 0o600


def test_umask_option(tmp_path: Path, started: list, keep_umask: None) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["train", str(TRIAL), "--out", str(out), "--umask", "077"])
    assert result.exit_code == 0, result.output
    assert out.stat().st_mode & 0o777 == 0o700
    assert (out / MARKER).stat().st_mode & 0o777 == 0o600
    for bad in ("999", "abc", "1000"):
        refused(runner.invoke(app, ["launch", str(grid_file(tmp_path)), "--umask", bad]),
                "--umask", bad)


def test_trial_checkpoints_are_copied_owner_only(tmp_path: Path, keep_umask: None) -> None:
    # Tune persists a trial's checkpoint with pyarrow's copy, in the trial's process.
    import pyarrow.fs

    from sweepgrok.tune.trainable import owner_only_files

    os.umask(0o022)
    src = tmp_path / "src"
    src.mkdir()
    (src / "trainer.pt").write_bytes(b"state")
    dst = tmp_path / "tune" / "checkpoint_000001"
    with owner_only_files():  # as Ray's StorageContext.persist_current_checkpoint copies
        pyarrow.fs.LocalFileSystem().create_dir(str(dst))
        pyarrow.fs.copy_files(str(src), str(dst))
    assert os.umask(0o022) == 0o022  # restored
    assert (dst / "trainer.pt").stat().st_mode & 0o777 == 0o600
    assert dst.stat().st_mode & 0o777 == 0o700
