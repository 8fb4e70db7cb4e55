"""`sweepgrok validate`: a one-line summary of a trial, grid or search file (exit 0), or the
error (exit 2); nothing started. The values each kind of file refuses: tests/config/."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import one_line_error, tiny_tree, write_grid, write_search
from typer.testing import CliRunner

from sweepgrok.cli import app

runner = CliRunner()


def test_validate_kinds(tmp_path: Path) -> None:
    grid = write_grid(tmp_path / "grid.yaml", "g", grid={"model.norm": ["none", "sphere"]},
                      seeds=[1, 2])
    result = runner.invoke(app, ["validate", str(grid)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "grid g: 4 trials over model.norm, train.seed"
    trial = tmp_path / "trial.yaml"
    trial.write_text(yaml.safe_dump(tiny_tree({"task.p": 11})))
    result = runner.invoke(app, ["validate", str(trial)])
    assert result.exit_code == 0 and result.output.startswith("trial trial:")
    trial.write_text(yaml.safe_dump({"task": {"p": "many"}}))
    result = runner.invoke(app, ["validate", str(trial)])
    assert result.exit_code == 2 and "task.p" in result.output
    bad = write_grid(tmp_path / "bad.yaml", "g", seeds=[1], grid={"optim.lr": [-1.0]})
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2 and "optim.lr" in result.output


def test_a_search_file_is_named_with_its_trial_count(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(write_search(tmp_path, {"num_samples": 7}))])
    assert result.exit_code == 0, result.output
    assert result.output == "search s: 7 trials\n"


def test_a_missing_file_exits_2_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    result = runner.invoke(app, ["validate", str(missing)])
    assert result.exit_code == 2
    line = one_line_error(result.output)
    assert line == f"error: {missing}: cannot read (No such file or directory)"


def test_validate_starts_no_ray_and_trains_nothing(tmp_path: Path) -> None:
    # As a user types it; a grid of 4 trials: Ray, torch and Optuna are never imported.
    grid = write_grid(tmp_path / "grid.yaml", "g", grid={"model.norm": ["none", "sphere"]},
                      seeds=[1, 2])
    code = (
        "import sys; from sweepgrok.cli import app; "
        f"app(['validate', {str(grid)!r}], standalone_mode=False); "
        "sys.exit(sorted({'ray', 'torch', 'optuna'} & set(sys.modules)) or None)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "grid g: 4 trials over model.norm, train.seed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.yaml"]
