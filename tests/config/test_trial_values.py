"""Trial-config values that used to validate and be wrong, or validate and then crash in training.

Each class of value is refused by the config model (unit tests) and by the real commands
(`sweepgrok validate` / `sweepgrok train`): exit 2, one line naming the file, the key and the
allowed values or bound, nothing written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import assert_each_refuses, one_line_error, tiny_config
from typer.testing import CliRunner

from sweepgrok.cli import app
from sweepgrok.config.tasks import TASKS, make_split
from sweepgrok.config.trial import (
    MAX_SEED,
    ConfigError,
    device_problem,
    from_flat,
    parse_overrides,
)
from sweepgrok.store.sink import ParquetSink
from sweepgrok.train.trainer import train

runner = CliRunner()
TINY = tiny_config(
    {"task.p": 11, "model.d_mlp": 16, "train.max_steps": 4, "train.eval_every": 2},
    # Written against the default split, geometry sample, schedule and device: the bounds in
    # the messages below follow from them.
    defaults=("task.train_fraction", "geometry.sample", "train.early_evals", "train.device"),
)
"""A config that trains in well under a second."""


def refused(flat: dict[str, object]) -> str:
    """The message of the ConfigError that `flat` (over TINY) raises."""
    with pytest.raises(ConfigError) as err:
        from_flat({**TINY, **flat}, "t.yaml")
    return str(err.value)


# ---- 1. non-finite numbers -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("optim.lr", float("inf")),  # passed gt=0 and trained with lr = inf
        ("optim.lr", float("nan")),
        ("optim.weight_decay", float("inf")),
        ("model.temperature", float("inf")),
        ("geomdr.lambda_max", float("nan")),
        ("task.train_fraction", float("nan")),
        ("optim.betas", [float("nan"), 0.9]),
    ],
)
def test_non_finite_numbers_are_refused(key, value):
    msg = refused({key: value})
    assert msg.startswith(f"t.yaml: {key}") and "finite number (not nan or inf)" in msg


# ---- 2. strict types -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("train.max_steps", True, "must be an integer, got True"),  # was accepted as 1
        ("task.p", "7", "must be an integer, got '7'"),
        ("train.max_steps", 100.0, "must be an integer, got 100.0"),
        ("optim.lr", True, "must be a number, got True"),
        ("geomdr.enabled", 1, "must be true or false, got 1"),
        ("geomdr.enabled", "yes", "must be true or false, got 'yes'"),
        ("optim.betas", [True, 0.5], "optim.betas[0]: must be a number, got True"),
    ],
)
def test_values_are_not_coerced_across_types(key, value, words):
    msg = refused({key: value})
    assert msg.startswith(f"t.yaml: {key}") and words in msg, msg


def test_a_number_written_as_text_gets_a_hint():
    # A quoted number is text (an unquoted 1e-3 is a number: tests/config/test_yamlfile.py).
    msg = refused({"optim.lr": "1e-3"})
    assert "optim.lr: must be a number, got '1e-3'" in msg
    assert "a number in quotes is text: write it without the quotes" in msg


def test_ints_are_still_floats_and_set_still_parses_yaml_scalars():
    assert from_flat({"optim.weight_decay": 1}).optim.weight_decay == 1.0
    flat = parse_overrides(
        ["optim.lr=1e-3", "train.max_steps=500", "geomdr.enabled=true", "model.norm=sphere",
         "train.seeds=[1, 2]", "optim.betas=[0.9, 0.99]", "optim.eps=1E-8"]
    )
    assert flat["optim.lr"] == 0.001 and flat["optim.eps"] == 1e-8
    assert parse_overrides(["task.p='7'"]) == {"task.p": "7"}  # quoted: text, refused by task.p
    cfg = from_flat(flat)
    assert cfg.train.max_steps == 500 and cfg.geomdr.enabled and cfg.model.norm == "sphere"
    assert cfg.train.seeds == [1, 2] and cfg.optim.betas == (0.9, 0.99)


# ---- 3. upper bounds -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "bound"),
    [
        ("train.max_steps", 10**9, "must be <= 100000000"),
        ("train.eval_every", 10**9, "must be <= 100000000"),
        ("train.threads", 100_000, "must be <= 1024"),
        ("model.d_model", 10**6, "must be <= 16384"),
        ("model.d_mlp", 10**6, "must be <= 16384"),
        ("optim.batch_size", 10**9, "must be <= 4000000"),
        ("geometry.sample", 10**6, "must be <= 16384"),
        ("train.seeds", list(range(1025)), "must have at most 1024 item(s)"),
    ],
)
def test_huge_values_are_refused_with_the_bound(key, value, bound):
    assert f"t.yaml: {key}: {bound}" in refused({key: value})


# ---- 6. values that crashed the trainer ------------------------------------------------------


@pytest.mark.parametrize(
    ("flat", "words"),
    [
        ({"train.seeds": [-1]}, "train.seeds[0]: must be >= 0, got -1"),
        ({"train.seeds": [0, 2**63]}, f"train.seeds[1]: must be <= {MAX_SEED}"),
        ({"train.seed": 2**63}, f"train.seed: must be <= {MAX_SEED}"),
        ({"task.data_seed": 2**64}, f"task.data_seed: must be <= {MAX_SEED}"),
    ],
)
def test_seeds_outside_int64_are_refused(flat, words):
    assert words in refused(flat)


def test_the_largest_seed_trains(tmp_path):
    # The bound is what the run row's int64 columns hold: 2**63 crashed writing the Parquet.
    cfg = from_flat({**TINY, "train.seed": MAX_SEED, "task.data_seed": MAX_SEED})
    rows = train(cfg, ParquetSink(tmp_path), sweep="s")
    assert rows[0]["train.seed"] == MAX_SEED


@pytest.mark.parametrize(
    ("flat", "words"),
    [
        # p = 2, 3 (and 5 at the default fraction) crashed rho / D_eff at the first evaluation.
        ({"task.p": 2}, "geometry.knn_k: must be < 1"),
        ({"task.p": 3}, "geometry.knn_k: must be < 3"),
        ({"task.p": 5}, "geometry.knn_k: must be < 8"),
        ({"task.train_fraction": 0.05}, "geometry.knn_k: must be < 6"),
        ({"geometry.sample": 16, "geometry.knn_k": 16}, "geometry.knn_k: must be < 16"),
        ({"task.train_fraction": 0.001}, "rounds to 0 training examples"),
        ({"task.train_fraction": 0.001}, "above 0.00413 and below 0.996"),
        ({"task.train_fraction": 0.999, "geometry.enabled": False}, "rounds to 121 training"),
    ],
)
def test_splits_too_small_for_the_geometry_are_refused(flat, words):
    msg = refused(flat)
    assert words in msg
    assert "task.train_fraction" in msg  # what to change is named


@pytest.mark.parametrize(
    "flat",
    [
        {"task.p": 2, "geometry.enabled": False},  # the real minimum p without geometry
        {"task.p": 3, "task.train_fraction": 0.5, "geometry.knn_k": 3},  # k = points - 1
        {"geometry.sample": 16, "geometry.knn_k": 15},
        {"task.name": "div", "task.p": 5, "task.train_fraction": 0.9, "geometry.knn_k": 17},
    ],
)
def test_the_smallest_allowed_splits_train(tmp_path, flat):
    # The check and the trainer agree at the edge: what validates runs its evaluations.
    cfg = from_flat({**TINY, **flat})
    rows = train(cfg, ParquetSink(tmp_path), sweep="s")
    assert rows[0]["steps_run"] == 4


@pytest.mark.parametrize("name", sorted(TASKS))
def test_split_sizes_known_without_building_the_table(name):
    task = from_flat({"task.name": name, "task.p": 7, "task.train_fraction": 0.4}).task
    split = make_split(task, 0)
    assert task.size == split.train_x.shape[0] + split.test_x.shape[0]
    assert task.n_train == split.train_x.shape[0]


def test_device_cuda_is_a_machine_problem(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert device_problem("cpu") is None and device_problem("auto") is None
    assert "train.device: cuda" in str(device_problem("cuda"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert device_problem("cuda") is None


# ---- 7. --set given twice --------------------------------------------------------------------


def test_a_key_set_twice_is_refused():
    with pytest.raises(ConfigError, match=r"--set: train\.max_steps given twice"):
        parse_overrides(["train.max_steps=1", "model.norm=sphere", "train.max_steps=2"])


# ---- through the commands --------------------------------------------------------------------


def trial_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trial.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("train: {max_steps: true}\n", ["train.max_steps", "must be an integer"]),
        ("optim: {lr: .inf}\n", ["optim.lr", "finite"]),
        ("optim: {lr: '1e-3'}\n", ["optim.lr", "a number in quotes is text"]),
        ("train: {max_steps: 1000000000}\n", ["train.max_steps", "<= 100000000"]),
        ("train: {seeds: [-1]}\n", ["train.seeds[0]", ">= 0"]),
        ("train: {seed: 9223372036854775808}\n", ["train.seed", "<= 9223372036854775807"]),
        ("task: {p: 3}\n", ["geometry.knn_k", "must be < 3", "task.p"]),
    ],
)
def test_validate_and_train_refuse_the_same_values(tmp_path, monkeypatch, text, words):
    monkeypatch.chdir(tmp_path)
    path = trial_file(tmp_path, text)
    commands = [["validate", str(path)], ["train", str(path), "--quiet"]]
    assert_each_refuses(runner, app, commands, path, words)
    assert not (tmp_path / "runs").exists()


def test_train_refuses_set_overrides_twice_and_non_finite(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = trial_file(tmp_path, "task: {p: 11}\n")
    res = runner.invoke(app, ["train", str(path), "--set", "optim.lr=.nan"])
    assert res.exit_code == 2 and "optim.lr" in one_line_error(res.output)
    res = runner.invoke(
        app, ["train", str(path), "--set", "train.max_steps=1", "--set", "train.max_steps=2"]
    )
    assert res.exit_code == 2
    assert "train.max_steps given twice" in one_line_error(res.output)
    assert not (tmp_path / "runs").exists()


def test_cuda_without_cuda_train_exits_2_validate_warns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    path = trial_file(tmp_path, "task: {p: 11}\ntrain: {device: cuda}\n")
    res = runner.invoke(app, ["train", str(path), "--quiet"])
    assert res.exit_code == 2
    line = one_line_error(res.output)
    assert str(path) in line and "train.device: cuda" in line and "cpu or auto" in line
    assert not (tmp_path / "runs").exists()
    res = runner.invoke(app, ["validate", str(path)])
    assert res.exit_code == 0, res.output
    assert f"warning: {path}: train.device: cuda" in res.stderr
    assert res.stdout.startswith("trial trial:")
