"""`sweepgrok launch` and `sweepgrok validate` without Ray: dry runs and user mistakes.

Every bad input must exit 2 with the message and start no Ray (no ray.init, no session dir).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from conftest import tiny_tree
from typer.testing import CliRunner

from sweepgrok.cli import app

runner = CliRunner()
BASE = tiny_tree({"task.p": 11, "train.max_steps": 50, "train.eval_every": 25})


def grid_file(tmp_path: Path, **doc: object) -> Path:
    doc = {"name": "g", "base": BASE, **doc}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def no_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Make any Ray start fail loudly and leave a trace, and point its temp dir at tmp_path."""
    ray_tmp = tmp_path / "ray_tmp"
    monkeypatch.setenv("RAY_TMPDIR", str(ray_tmp))
    monkeypatch.chdir(tmp_path)

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray must not start")

    monkeypatch.setattr("sweepgrok.cli.launch.run", boom)
    yield ray_tmp
    assert not ray_tmp.exists()
    if "ray" in sys.modules:
        assert not sys.modules["ray"].is_initialized()


def test_dry_run_prints_trials_and_starts_nothing(tmp_path: Path, no_ray: Path) -> None:
    path = grid_file(tmp_path, grid={"model.norm": ["none", "sphere"]}, seeds=[1, 2, 3])
    result = runner.invoke(app, ["launch", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "grid g: 6 trials" in result.output
    assert "model.norm" in result.output and "sphere" in result.output
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        # One loader error (test_spaces.py has every one): the CLI's exit 2 path is the same.
        ({"grid": {"model.norm": ["cube"]}}, ["model.norm", "sphere"]),
        ({"seeds": [1], "search": {"n_trials": 3}}, ["search file"]),
    ],
)
def test_bad_grid_exits_2_without_ray(
    tmp_path: Path, no_ray: Path, doc: dict, words: list[str]
) -> None:
    path = grid_file(tmp_path, **doc)
    result = runner.invoke(app, ["launch", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.output.startswith("error: ")
    for word in words:
        assert word in result.output
    assert "grid.yaml" in result.output


def test_missing_file_and_flag_conflicts(tmp_path: Path, no_ray: Path) -> None:
    result = runner.invoke(app, ["launch", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "cannot read" in result.output
    path = grid_file(tmp_path, seeds=[1])
    result = runner.invoke(app, ["launch", str(path), "--resume", "--fresh"])
    assert result.exit_code == 2 and "exclude" in result.output


def test_resume_refuses_a_new_concurrency_cap_and_keeps_the_folder(
    tmp_path: Path, no_ray: Path
) -> None:
    # Tune restores the first launch's cap (its saved grid generator and the trials it made):
    # a cap given on --resume would have been silently ignored.
    path = grid_file(tmp_path, seeds=[1])
    part = tmp_path / "runs" / "g" / "runs" / "part-1.parquet"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"rows")
    result = runner.invoke(app, ["launch", str(path), "--resume", "--max-concurrent", "1"])
    assert result.exit_code == 2
    assert result.output.startswith("error: --max-concurrent: cannot change on --resume")
    assert part.read_bytes() == b"rows"  # nothing touched


def test_refuses_a_folder_with_runs(tmp_path: Path, no_ray: Path) -> None:
    path = grid_file(tmp_path, seeds=[1])
    (tmp_path / "runs" / "g" / "runs").mkdir(parents=True)
    (tmp_path / "runs" / "g" / "runs" / "part-1.parquet").write_bytes(b"")
    result = runner.invoke(app, ["launch", str(path)])
    assert result.exit_code == 2
    assert "--resume" in result.output and "--fresh" in result.output
    assert (tmp_path / "runs" / "g" / "runs" / "part-1.parquet").exists()  # nothing lost


def test_an_empty_folder_is_not_refused(tmp_path: Path, no_ray: Path) -> None:
    from sweepgrok.store.sweepdir import has_runs

    (tmp_path / "runs" / "g" / "runs").mkdir(parents=True)
    assert not has_runs(tmp_path / "runs" / "g")


def test_resume_without_tune_state_is_refused(tmp_path: Path, no_ray: Path) -> None:
    path = grid_file(tmp_path, seeds=[1])
    (tmp_path / "runs" / "g" / "runs").mkdir(parents=True)
    (tmp_path / "runs" / "g" / "runs" / "part-1.parquet").write_bytes(b"")
    result = runner.invoke(app, ["launch", str(path), "--resume"])
    assert result.exit_code == 2 and "no Ray Tune state" in result.output


def test_verbose_lets_ray_worker_output_through(monkeypatch: pytest.MonkeyPatch) -> None:
    from sweepgrok.tune import grid

    calls: list[dict[str, object]] = []
    monkeypatch.setattr(grid.ray, "init", lambda **kwargs: calls.append(kwargs))
    monkeypatch.setattr(grid, "QUIET_ENV", {})  # leave this process's environment alone
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    grid.start_ray(None, 1)
    grid.start_ray(None, 1, verbose=True)
    assert [c["log_to_driver"] for c in calls] == [False, True]
    assert [c["logging_level"] for c in calls] == ["WARNING", "INFO"]


def test_verbose_flag_and_the_sweepgrok_log_handler(tmp_path: Path, no_ray: Path) -> None:
    import logging

    logger = logging.getLogger("sweepgrok")
    path = grid_file(tmp_path, seeds=[1])
    result = runner.invoke(app, ["launch", str(path), "--dry-run"])
    assert result.exit_code == 0 and logger.level == logging.INFO
    result = runner.invoke(app, ["launch", str(path), "--dry-run", "--verbose"])
    assert result.exit_code == 0 and logger.level == logging.DEBUG
    assert len([h for h in logger.handlers if getattr(h, "_sweepgrok", False)]) == 1


def test_into_a_pipe_a_long_path_is_printed_on_one_line(tmp_path: Path) -> None:
    # rich assumes 80 columns when its output is not a terminal: the sweep folder (and the
    # commands other commands print) came out broken over two lines in a log.
    import os
    import subprocess

    storage = tmp_path / ("a_storage_folder_with_a_long_name_" * 3)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run(
        [sys.executable, "-m", "sweepgrok", "launch", str(grid_file(tmp_path)), "--dry-run",
         "--storage", str(storage)],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"sweep folder: {storage / 'g'}\n" in proc.stdout
