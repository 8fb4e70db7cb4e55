"""Run ids across versions: the ids of 0.1.0 stay, a new key at its default changes none, any
key set to another value changes the id; a sweep folder written by 0.1.0 is read and resumed.

tests/data/run_ids_v0.1.0.json and tests/data/fixture_sweep_v0.1.0/ were written by sweepgrok
0.1.0 (tests/data/make_run_ids.py, tests/data/make_fixture_sweep.py) and are never rewritten.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pandas as pd
import pytest
from golden import first_difference
from pydantic import Field

from sweepgrok.config.trial import (
    ID_KEYS_0_1,
    SECTIONS,
    Config,
    TrainConfig,
    all_keys,
    config_hash,
    from_flat,
    update,
)
from sweepgrok.store.sink import read_metrics, read_runs

DATA = Path(__file__).parents[1] / "data"
FIXTURE = "fixture_sweep_v0.1.0"
SWEEPGROK = str(Path(sys.executable).parent / "sweepgrok")
sys.path.insert(0, str(DATA))
from make_run_ids import ONE_CHANGE  # noqa: E402  (the recording script's one value per key)


def test_every_id_of_0_1_0_is_unchanged() -> None:
    recorded = json.loads((DATA / "run_ids_v0.1.0.json").read_text())
    assert len(recorded) == 435
    changed = [r for r in recorded if config_hash(from_flat(r["config"])) != r["run_id"]]
    assert changed == []


def test_the_keys_of_0_1_0_all_still_exist() -> None:
    # A removed key could no longer enter the hash: every id of a config using it would move.
    assert len(ID_KEYS_0_1) == 53 and set(all_keys()) >= ID_KEYS_0_1


def test_hand_computed_id_of_the_default_config() -> None:
    # 0.1.0's scheme: sha256 of the sorted flat config as JSON, first 12 hex digits.
    assert config_hash(Config()) == "293481f899d7"


# ---- a key added later --------------------------------------------------------------------


class NewTrain(TrainConfig):
    fancy_kernels: bool = False
    """A key a later version adds, whose default trains as before."""
    precision: str = Field("highest")
    """Another one, a string."""


class NewConfig(Config):
    train: NewTrain = NewTrain()


def with_new_keys(cfg: Config, **new: Any) -> NewConfig:
    tree = {s: getattr(cfg, s).model_dump() for s in type(cfg).model_fields}
    tree["train"] = {**tree["train"], **new}
    return NewConfig.model_validate(tree)


@pytest.mark.parametrize(
    "flat",
    [{}, {"model.norm": "sphere", "optim.lr": 3e-3}, {"train.seeds": [1, 2], "geomdr.layers": [0]}],
)
def test_a_new_key_at_its_default_changes_no_id(flat: dict[str, Any]) -> None:
    cfg = from_flat(flat)
    assert config_hash(with_new_keys(cfg)) == config_hash(cfg)


@pytest.mark.parametrize("new", [{"fancy_kernels": True}, {"precision": "high"}])
def test_a_new_key_set_to_another_value_changes_the_id(new: dict[str, Any]) -> None:
    cfg = from_flat({"model.norm": "sphere"})
    ids = {config_hash(cfg), config_hash(with_new_keys(cfg, **new))}
    assert len(ids) == 2


LATER_CHANGE = {"model.norm_eps": 1e-8, "task.bits": 41, "task.relevant_bits": 2,
                "task.samples": 999}
"""A non-default value of each number key added since 0.1.0 (a bool or a Literal gets one
from its type)."""


def another_value(key: str) -> Any:
    """A valid non-default value of `key`: ONE_CHANGE's (keys of 0.1.0), LATER_CHANGE's, else
    the negated default of a bool or another choice of a Literal (a key added since)."""
    if key in ONE_CHANGE:
        return ONE_CHANGE[key]
    if key in LATER_CHANGE:
        return LATER_CHANGE[key]
    section, _, field = key.partition(".")
    info = SECTIONS[section].model_fields[field]
    if isinstance(info.default, bool):
        return not info.default
    choices = [c for c in get_args(info.annotation) if c != info.default]
    assert choices, f"{key}: give it a non-default value in this test"
    return choices[0]


def test_every_key_set_to_another_value_changes_the_id() -> None:
    default = config_hash(Config())
    # The options take a value only with a plugin: tests/config/test_plugins.py checks them.
    keys = [k for k in all_keys() if k not in ("task.options", "model.options")]
    ids = {key: config_hash(from_flat({key: another_value(key)})) for key in keys}
    assert all(rid != default for rid in ids.values())
    assert len(set(ids.values())) == len(ids)


def test_a_value_written_differently_is_the_same_id() -> None:
    # Canonical: 1 and 1.0, 1e-3 and 0.001, a tuple and a list are one value once validated.
    a = from_flat({"optim.weight_decay": 1, "optim.lr": 1e-3, "optim.betas": (0.9, 0.98)})
    b = from_flat({"optim.weight_decay": 1.0, "optim.lr": 0.001, "optim.betas": [0.9, 0.98]})
    assert config_hash(a) == config_hash(b) == config_hash(Config())
    assert config_hash(update(a, {"optim.lr": 0.0011})) != config_hash(a)


# ---- the sweep folder of 0.1.0 ------------------------------------------------------------


def fixture_copy(tmp_path: Path) -> Path:
    sweep = tmp_path / FIXTURE
    shutil.copytree(DATA / FIXTURE, sweep)
    return sweep


def test_analyze_reads_the_0_1_0_folder(tmp_path: Path) -> None:
    sweep = fixture_copy(tmp_path)
    run = subprocess.run(
        [SWEEPGROK, "analyze", str(sweep)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
    runs = read_runs(sweep)  # the one trial that ended before the interruption
    assert runs["train.seed"].tolist() == [1] and runs["status"].tolist() == ["censored"]
    # One run, censored at its 300 steps; the interrupted trial's rows are named, not counted.
    assert "0/1" in run.stdout and "> 300" in run.stdout
    assert "1 run(s) have not ended (no runs/ row yet" in run.stdout + run.stderr


def rows(sweep: Path) -> dict[str, Any]:
    """Per seed: the run's outcome and every metrics column but run_id and wall_time, as the
    JSON that tests/data/make_fixture_sweep.py wrote for the uninterrupted sweep."""
    sys.path.insert(0, str(DATA))
    from make_fixture_sweep import rows as fixture_rows

    return json.loads(json.dumps(fixture_rows(sweep)))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_resume_of_the_0_1_0_folder_finishes_it(tmp_path: Path, ray_env: dict[str, str]) -> None:
    sweep = fixture_copy(tmp_path)
    before = read_runs(sweep)
    cmd = [SWEEPGROK, "launch", str(sweep / "sweep.yaml"), "--storage", str(tmp_path)]
    run = subprocess.run(
        [*cmd, "--resume"], env=ray_env, capture_output=True, text=True, timeout=240
    )
    assert run.returncode == 0, run.stdout + run.stderr
    runs = read_runs(sweep)
    assert sorted(runs["run_id"]) == [f"{FIXTURE}-626c1_0000{i}" for i in range(3)]
    # The run that had ended is kept as 0.1.0 wrote it: its one run row, never re-run.
    first = before["run_id"].iloc[0]
    raw = pd.concat(pd.read_parquet(p) for p in sorted((sweep / "runs").glob("*.parquet")))
    kept = raw[raw["run_id"] == first]
    assert kept["finished_at"].tolist() == before["finished_at"].tolist()
    assert kept["sweepgrok_version"].tolist() == ["0.1.0"]
    metrics = read_metrics(sweep)
    assert not metrics.duplicated(["run_id", "step"]).any()
    expected = json.loads((DATA / f"{FIXTURE}.expected.json").read_text())
    got = rows(sweep)
    # The rows of the same grid run uninterrupted by 0.1.0 (every column 0.1.0 wrote), floats
    # within golden.REL_TOL (the fixture was written on another CPU model): a deliberate change
    # of training numerics (CHANGELOG.md) regenerates this file's rows.
    for seed, want in expected.items():
        assert got[seed]["run"] == want["run"], seed
        columns = set(want["metrics"][0])
        diff = first_difference([{c: r[c] for c in columns} for r in got[seed]["metrics"]],
                                want["metrics"])
        assert not diff, f"seed {seed}: {diff}"
