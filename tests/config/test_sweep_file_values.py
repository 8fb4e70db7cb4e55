"""Grid and search file values that used to validate and be wrong, or crash once Ray started.

Refused by the file models (GridFile, SearchFile) and by the real commands (`sweepgrok
validate`, `sweepgrok launch --dry-run`, `sweepgrok search`): exit 2, one line naming the file,
the key and the allowed values or bound, no sweep folder and no Ray.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import assert_each_refuses, one_line_error, tiny_tree
from typer.testing import CliRunner

from sweepgrok.cli import app
from sweepgrok.config.grid_file import load_grid
from sweepgrok.config.search_file import load_search
from sweepgrok.config.trial import ConfigError

runner = CliRunner()
BASE = tiny_tree({"task.p": 11, "train.max_steps": 50, "train.eval_every": 25})
SEARCH = {"space": {"optim.lr": {"loguniform": [1.0e-4, 1.0e-2]}}}


@pytest.fixture(autouse=True)
def no_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Work in tmp_path; any Ray start fails the test."""
    monkeypatch.chdir(tmp_path)

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray must not start")

    monkeypatch.setattr("sweepgrok.cli.launch.run", boom)
    monkeypatch.setattr("sweepgrok.cli.search.run", boom)
    yield
    if "ray" in sys.modules:
        assert not sys.modules["ray"].is_initialized()


def write(tmp_path: Path, text: str = "", **doc: Any) -> Path:
    """A sweep file: the YAML `text` (for values yaml.safe_dump cannot write) after `doc`."""
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"base": BASE, **doc}) + text)
    return path


def grid_error(path: Path) -> str:
    with pytest.raises(ConfigError) as err:
        load_grid(path)
    return str(err.value)


def search_error(path: Path) -> str:
    with pytest.raises(ConfigError) as err:
        load_search(path)
    return str(err.value)


# ---- grid files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("resources: {cpu: .nan}\n", "resources.cpu: must be a finite number"),
        ("resources: {gpu: .inf}\n", "resources.gpu: must be a finite number"),
        ("resources: {cpu: 100000}\n", "resources.cpu: must be <= 1024"),
        ("max_concurrent: 1000000\n", "max_concurrent: must be <= 1024"),
        ("max_failures: 1000000\n", "max_failures: must be <= 100"),
        ("seeds: [9223372036854775808]\n", "seeds: must be a non-empty list of ints in [0, 2**63"),
        ("seeds: [1, 2]\nseeds_per_trial: 2000\n", "seeds_per_trial: must be <= 1024"),
        ("grid: {optim.lr: [.nan]}\n", "optim.lr: must be a finite number"),
        ("grid: {train.max_steps: [true]}\n", "train.max_steps: must be an integer, got True"),
        ("name: \"x\\n\"\n", "name: must be a folder name"),
        ("storage: s3://bucket/runs\n", "storage: object stores and other URLs are not supported"),
        ("storage: gs://bucket\n", "storage: object stores and other URLs are not supported"),
    ],
)
def test_grid_values_are_refused(tmp_path, text, words):
    path = write(tmp_path, text)
    msg = grid_error(path)
    assert msg.startswith(str(path)) and words in msg, msg


def test_a_drive_letter_is_not_a_url(tmp_path):
    assert load_grid(write(tmp_path, "storage: C:/runs\n")).settings.storage == "C:/runs"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("resources: {cpu: .nan}\n", ["resources.cpu", "finite"]),
        ("name: \"x\\n\"\n", ["name", "folder name"]),
        ("storage: s3://bucket/runs\n", ["storage", "not supported yet", "s3://bucket/runs"]),
        ("max_concurrent: 1000000\n", ["max_concurrent", "<= 1024"]),
    ],
)
def test_validate_and_dry_run_refuse_them(tmp_path, text, words):
    path = write(tmp_path, text)
    commands = [["validate", str(path)], ["launch", str(path), "--dry-run"]]
    assert_each_refuses(runner, app, commands, path, words)
    assert not any(p.name.startswith("s3") for p in tmp_path.iterdir())


def test_storage_option_refuses_a_url(tmp_path):
    path = write(tmp_path, name="g")
    res = runner.invoke(app, ["launch", str(path), "--dry-run", "--storage", "s3://bucket/r"])
    assert res.exit_code == 2
    line = one_line_error(res.output)
    assert line.startswith("error: --storage:") and "not supported yet" in line
    assert not (tmp_path / "s3:").exists()


# ---- search files ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("search", "words"),
    [
        ({"time_cap_margin": float("nan")}, "search.time_cap_margin: must be a finite number"),
        ({"time_cap_margin": float("inf")}, "search.time_cap_margin: must be a finite number"),
        ({"seed": 2**32}, "search.seed: must be <= 4294967295"),
        ({"num_samples": 10**7}, "search.num_samples: must be <= 100000"),
        ({"num_samples": True}, "search.num_samples: must be an integer, got True"),
        ({"max_concurrent": 10**6}, "search.max_concurrent: must be <= 1024"),
        ({"seeds_per_trial": 5000}, "search.seeds_per_trial: must be <= 1024"),
        (
            {"space": {"optim.lr": {"loguniform": [1.0e-4, float("inf")]}}},
            "search.space.optim.lr: loguniform: must be a list [lo, hi] of two finite numbers",
        ),
        (
            {"space": {"optim.lr": {"choice": [1.0e-3, float("nan")]}}},
            "value nan makes the trial config invalid",
        ),
    ],
)
def test_search_values_are_refused(tmp_path, search, words):
    path = write(tmp_path, search={**SEARCH, **search})
    msg = search_error(path)
    assert msg.startswith(str(path)) and words in msg, msg


def test_search_refuses_a_seed_numpy_cannot_take_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    path = write(tmp_path, storage=str(out), search={**SEARCH, "seed": 2**32})
    res = runner.invoke(app, ["search", str(path)])
    assert res.exit_code == 2
    line = one_line_error(res.output)
    assert str(path) in line and "search.seed: must be <= 4294967295" in line
    assert not out.exists()
    res = runner.invoke(app, ["search", str(path), "--storage", "gs://b"])
    assert res.exit_code == 2 and "--storage" in one_line_error(res.output)
