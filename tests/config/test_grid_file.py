"""Grid files: expansion (grid x zip x seeds), shared readers, and every bad-file case."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import tiny_tree

from sweepgrok.config.grid_file import Resources, is_grid_doc, load_grid, read_common
from sweepgrok.config.trial import ConfigError

BASE = tiny_tree({"task.p": 23, "train.max_steps": 100})


def write(tmp_path: Path, doc: dict, name: str = "g.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def test_cross_product_order_and_validation(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "name": "x",
            "base": BASE,
            "grid": {"model.norm": ["none", "sphere"], "optim.lr": [1e-3, 3e-3, 1e-2]},
        },
    )
    spec = load_grid(path)
    assert len(spec.trials) == 6
    assert [t.index for t in spec.trials] == list(range(6))
    # Last axis varies fastest; every trial is a full flat config with the base applied.
    assert spec.trials[1].overrides == {"model.norm": "none", "optim.lr": 3e-3}
    assert all(t.flat["task.p"] == 23 for t in spec.trials)
    assert spec.varying == ["model.norm", "optim.lr"]
    assert spec.settings.name == "x"
    assert spec.settings.sweep_dir() == Path("runs/x")


def test_zip_groups_are_zipped_then_crossed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "base": BASE,
            "grid": {"optim.lr": [1e-3, 2e-3]},
            "zip": [{"model.norm": ["layernorm", "sphere"], "optim.weight_decay": [1.0, 0.0]}],
        },
    )
    spec = load_grid(path)
    pairs = {(t.flat["model.norm"], t.flat["optim.weight_decay"]) for t in spec.trials}
    assert pairs == {("layernorm", 1.0), ("sphere", 0.0)}
    assert len(spec.trials) == 4
    assert spec.settings.name == "g"  # defaults to the file stem


def test_seeds_axis_and_packed_seeds(tmp_path: Path) -> None:
    spec = load_grid(
        write(tmp_path, {"base": BASE, "grid": {"model.norm": ["none"]}, "seeds": [1, 2, 3]})
    )
    assert [t.flat["train.seed"] for t in spec.trials] == [1, 2, 3]
    assert spec.varying == ["train.seed"]
    packed = load_grid(write(tmp_path, {"base": BASE, "seeds": [1, 2, 3], "seeds_per_trial": 2}))
    assert [t.flat["train.seeds"] for t in packed.trials] == [[1, 2], [3]]
    assert packed.varying == ["train.seeds"]


def test_base_path_relative_to_grid_file_and_common_keys(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", BASE, "trial.yaml")
    path = write(
        tmp_path / "sub",
        {
            "name": "b",
            "base": "trial.yaml",
            "seeds": [0, 1],
            "resources": {"cpu": 0.5, "gpu": 0.25},
            "max_concurrent": 3,
            "storage": "elsewhere",
            "max_failures": 2,
            "checkpoint_every": 4,
        },
    )
    spec = load_grid(path)
    s = spec.settings
    assert s.resources == Resources(0.5, 0.25)
    assert (s.max_concurrent, s.storage, s.max_failures, s.checkpoint_every) == (
        3,
        "elsewhere",
        2,
        4,
    )
    assert spec.trials[0].flat["task.p"] == 23
    assert is_grid_doc(yaml.safe_load(path.read_text()))


def test_defaults_of_common_keys(tmp_path: Path) -> None:
    s = read_common({"base": BASE}, tmp_path / "q.yaml")
    assert (s.name, s.storage, s.max_concurrent, s.max_failures, s.checkpoint_every) == (
        "q",
        "runs",
        None,
        1,
        None,
    )
    assert s.resources == Resources(1.0, 0.0)


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ({"base": BASE, "grdi": {}}, ["grdi", "allowed top-level keys", "grid"]),
        ({"base": BASE, "grid": {"model.nrom": ["none"]}}, ["model.nrom", "norm"]),
        ({"base": BASE, "grid": {"model.norm": []}}, ["model.norm", "non-empty list"]),
        ({"base": BASE, "grid": {"model.norm": "sphere"}}, ["model.norm", "non-empty list"]),
        ({"base": BASE, "grid": {"model.norm": ["cube"]}}, ["model.norm", "sphere", "cube"]),
        ({"base": BASE, "grid": {"model.d_model": ["wide"]}}, ["model.d_model", "integer"]),
        (
            {"base": BASE, "zip": [{"optim.lr": [1e-3, 2e-3], "optim.weight_decay": [1.0]}]},
            ["zip[0]", "equal lengths"],
        ),
        (
            {"base": BASE, "grid": {"optim.lr": [1e-3]}, "zip": [{"optim.lr": [1e-3]}]},
            ["zip[0].optim.lr", "already varies"],
        ),
        ({"base": BASE, "grid": {"train.seed": [1]}, "seeds": [1]}, ["seeds", "train.seed"]),
        ({"base": BASE, "seeds": []}, ["seeds", "non-empty"]),
        ({"base": BASE, "seeds": [1, "two"]}, ["seeds", "ints"]),
        ({"base": BASE, "seeds": [1, 1]}, ["seeds", "distinct"]),
        ({"base": BASE, "seeds_per_trial": 2}, ["seeds_per_trial", "seeds"]),
        ({"base": BASE, "seeds": [1], "seeds_per_trial": 0}, ["seeds_per_trial", ">= 1"]),
        ({"base": {"task": {"p": "x"}}, "seeds": [1]}, ["base", "task.p"]),
        ({"base": {"tsak": {}}, "seeds": [1]}, ["tsak", "task"]),
        ({"base": 3, "seeds": [1]}, ["base", "mapping"]),
        ({"base": BASE, "seeds": [1], "resources": {"cpus": 1}}, ["resources.cpus", "cpu, gpu"]),
        ({"base": BASE, "seeds": [1], "resources": {"cpu": -1}}, ["resources.cpu", ">= 0"]),
        ({"base": BASE, "seeds": [1], "max_concurrent": 0}, ["max_concurrent", ">= 1"]),
        ({"base": BASE, "seeds": [1], "max_failures": "x"}, ["max_failures", "integer"]),
        ({"base": BASE, "seeds": [1], "name": "a/b"}, ["name", "folder name"]),
        ({"base": BASE, "seeds": [1], "storage": ""}, ["storage"]),
        (
            {"base": BASE, "grid": {"model.d_model": [30], "model.n_heads": [4]}},
            ["d_model", "divisible"],
        ),
    ],
)
def test_bad_grid_names_file_and_key(tmp_path: Path, doc: dict, words: list[str]) -> None:
    path = write(tmp_path, doc)
    with pytest.raises(ConfigError) as err:
        load_grid(path)
    msg = str(err.value)
    assert str(path) in msg
    for word in words:
        assert word in msg, (word, msg)


def test_missing_base_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml"):
        load_grid(write(tmp_path, {"base": "nope.yaml", "seeds": [1]}))
    bad = tmp_path / "bad.yaml"
    bad.write_text("grid: [unclosed")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_grid(bad)
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_grid(tmp_path / "list.yaml")
