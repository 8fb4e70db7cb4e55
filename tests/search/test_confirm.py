"""The confirm stage's arms (sweepgrok.search.confirm) and its `confirm:` section
(sweepgrok.config.confirm_section, validated by sweepgrok.config.search_file.load_search)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from conftest import tiny_tree

from sweepgrok.config.grid_file import label_of, trial_labels
from sweepgrok.config.search_file import load_search
from sweepgrok.config.trial import ConfigError
from sweepgrok.search.confirm import ARMS_FILE, arm_trials, new_stage, read_stage, stage_json

SWEEPGROK = str(Path(sys.executable).parent / "sweepgrok")
CONFIRM = {"top_k": 2, "seeds": [1, 2, 3], "seeds_per_trial": 2, "max_steps": 300,
           "references": {"baseline": {"geomdr.enabled": False},
                          "paper": {"geomdr.target_dim": 8, "geomdr.start_step": 40}}}  # fmt: skip


def search_file(tmp_path: Path, confirm: dict[str, Any] | None = None, **train: Any) -> Path:
    base = tiny_tree({"geomdr.enabled": True, "geomdr.target_dim": 4, "train.seed": 101,
                      **{f"train.{k}": v for k, v in train.items()}})  # fmt: skip
    doc = {"name": "cf", "base": base,
           "search": {"seeds_per_trial": 2, "num_samples": 4,
                      "space": {"geomdr.lambda_max": {"loguniform": [0.01, 1.0]}}},
           "confirm": CONFIRM if confirm is None else confirm}  # fmt: skip
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def trial(number: int, value: float, lam: float, capped: bool = False) -> Any:
    attrs = {"capped_at": 100} if capped else {}
    return SimpleNamespace(number=number, value=value, params={"geomdr.lambda_max": lam},
                           user_attrs=attrs)  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seeds": [1, 102]}, "confirm.seeds: seed 102 was used by the search (its seeds: 101, "
                              "102): the confirm stage needs fresh seeds"),
        ({"references": {"search_1": {}}}, "'search_1' names a searched arm"),
        ({"references": {"b": {"train.seed": 3}}}, "train.seed: a reference's seeds are "
                                                   "confirm.seeds"),
        ({"top_k": 1, "references": {}}, "needs at least two arms"),
        ({"references": {"odd": {"geomdr.penalty": "cube"}}},
         "confirm.references.odd: geomdr.penalty: must be one of"),
        ({"seeds": [1]}, "confirm.seeds"),
        ({"top_k": 3, "typo": 1}, "typo"),
    ],
)
def test_a_bad_confirm_section_names_the_file_and_the_key(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    path = search_file(tmp_path, {**CONFIRM, **change})
    with pytest.raises(ConfigError) as err:
        load_search(path)
    assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_a_reused_seed_exits_2_before_anything_starts(tmp_path: Path) -> None:
    path = search_file(tmp_path, {**CONFIRM, "seeds": [101, 7]})
    for command in (["search", str(path)], ["confirm", str(path)]):
        done = subprocess.run([SWEEPGROK, *command, "--storage", str(tmp_path / "st")],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "confirm.seeds: seed 101 was used by the search" in done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "st").exists()


def test_the_arms_are_the_top_k_by_objective_then_the_references(tmp_path: Path) -> None:
    spec = load_search(search_file(tmp_path))
    top = [trial(4, 120.0, 0.2), trial(1, 150.0, 0.3, capped=True), trial(2, 900.0, 0.5)]
    stage = new_stage(spec, "study-x", top)
    assert [a.name for a in stage.arms] == ["search_1", "search_2", "baseline", "paper"]
    assert stage.references == ["baseline", "paper"]
    first, second = stage.arms[:2]
    assert (first.trial, first.search_value, first.capped) == (4, 120.0, False)
    assert (second.trial, second.capped) == (1, True)
    assert stage.search_seeds == [101, 102] and stage.seeds == [1, 2, 3]
    assert stage.budget == 200 and stage.study_name == "study-x"


def test_no_complete_trial_means_nothing_to_confirm(tmp_path: Path) -> None:
    spec = load_search(search_file(tmp_path))
    with pytest.raises(ConfigError, match="no complete trial yet"):
        new_stage(spec, "s", [])


def test_each_arm_runs_every_fresh_seed_at_the_confirm_budget(tmp_path: Path) -> None:
    spec = load_search(search_file(tmp_path))
    stage = new_stage(spec, "s", [trial(0, 100.0, 0.25), trial(1, 110.0, 0.5)])
    trials = arm_trials(spec, stage)
    # 4 arms x seeds [1, 2] and [3] (2 per trial), the references first (the slowest, usually).
    assert [(t.label, t.flat["train.seed"], t.flat["train.seeds"]) for t in trials] == [
        (arm, seed, seeds) for arm in ("baseline", "paper", "search_1", "search_2")
        for seed, seeds in ((1, [1, 2]), (3, [3]))
    ]
    assert {t.flat["train.max_steps"] for t in trials} == {300}
    by_arm = {t.label: t.flat for t in trials}
    assert by_arm["search_2"]["geomdr.lambda_max"] == 0.5
    assert by_arm["baseline"]["geomdr.enabled"] is False
    assert (by_arm["paper"]["geomdr.target_dim"], by_arm["paper"]["geomdr.start_step"]) == (8, 40)
    # A reference keeps the base's values of the searched keys, not a searched arm's.
    assert by_arm["paper"]["geomdr.lambda_max"] == spec.base["geomdr.lambda_max"]
    labels = trial_labels(trials)
    assert [label_of(labels, t.flat) for t in trials] == [t.label for t in trials]
    assert label_of(labels, {**trials[0].flat, "train.seed": 99}) == ""


def test_the_stage_reads_back_and_a_damaged_record_names_its_file(tmp_path: Path) -> None:
    spec = load_search(search_file(tmp_path))
    stage = new_stage(spec, "s", [trial(0, 100.0, 0.25)])
    (tmp_path / ARMS_FILE).write_text(stage_json(stage))
    assert read_stage(tmp_path) == stage
    assert read_stage(tmp_path / "elsewhere") is None
    (tmp_path / ARMS_FILE).write_text(json.dumps({"arms": [{"nome": 1}]}))
    with pytest.raises(ConfigError, match=f"{tmp_path / ARMS_FILE}: not a confirm stage"):
        read_stage(tmp_path)
