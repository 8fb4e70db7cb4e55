"""sweepgrok.api.running: sg.train on the tiny trial (a path, a dict, a Config), read back by
sg.analyze; bad input raises ConfigError with the message `sweepgrok train` prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import one_line_error, tiny_config, tiny_tree

import sweepgrok as sg
from sweepgrok.config.trial import from_flat

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent / "sweepgrok"


def test_train_then_analyze_a_tiny_config(tmp_path: Path) -> None:
    seen: list[int] = []
    runs = sg.train(tiny_config({"train.seeds": [0, 1]}), out=tmp_path / "t",
                    on_eval=lambda report: seen.append(report.step))
    assert len(runs) == 2 and set(runs["status"]) <= {"censored", "grokked", "completed"}
    assert runs["steps_run"].max() == 200 and seen == list(range(0, 201, 20))
    table = sg.analyze(tmp_path / "t")
    assert len(table) == 1 and table.iloc[0]["n"] == 2
    metrics = sg.read_metrics(tmp_path / "t")
    assert len(metrics) == 2 * 11 and "margin" not in metrics  # no extras: the schema alone


def test_a_path_a_dict_and_a_config_train_the_same_run(tmp_path: Path) -> None:
    flat = tiny_config({"train.max_steps": 20})
    path = tmp_path / "trial.yaml"
    path.write_text(yaml.safe_dump(tiny_tree({"train.max_steps": 20})))
    ids = [
        sg.train(path, out=tmp_path / "a")["run_id"].tolist(),
        sg.train(tiny_tree(), overrides={"train.max_steps": 20}, out=tmp_path / "b")[
            "run_id"].tolist(),
        sg.train(from_flat(flat), out=tmp_path / "c")["run_id"].tolist(),
    ]
    assert ids[0] == ids[1] == ids[2]
    with pytest.raises(sg.ConfigError, match="already holds runs: pass --fresh"):
        sg.train(path, out=tmp_path / "a")
    assert len(sg.train(path, out=tmp_path / "a", fresh=True)) == 1


def _cli_error(*args: str, cwd: Path) -> str:
    """The one error line of a real `sweepgrok` command, without its 'error: '."""
    done = subprocess.run([str(BIN), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)
    assert done.returncode == 2, done.stderr
    return one_line_error(done.stderr).removeprefix("error: ")


def test_bad_input_raises_config_error_with_the_commands_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(tiny_tree({"model.norm": "layer_norm"})))
    with pytest.raises(sg.ConfigError) as caught:
        sg.train(bad)
    cli = _cli_error("train", str(bad), cwd=tmp_path)
    assert str(caught.value) == cli and "model.norm" in cli

    sg.train(tiny_config({"train.max_steps": 20}), out=tmp_path / "done")
    with pytest.raises(sg.ConfigError) as caught:
        sg.analyze(tmp_path / "done", by="model.nrom")
    cli = _cli_error("analyze", str(tmp_path / "done"), "--by", "model.nrom", cwd=tmp_path)
    assert str(caught.value) == cli and cli.startswith("--by: ")

    with pytest.raises(sg.ConfigError, match="a trial config is a YAML path, a dict"):
        sg.train(42)  # type: ignore[arg-type]
    with pytest.raises(sg.ConfigError, match=r"--set: unknown key 'task\.q'"):
        sg.train({}, overrides={"task.q": 3})
    with pytest.raises(sg.ConfigError, match=r"--threshold: 0\.9 is not one of 0\.95, 0\.99"):
        sg.analyze(tmp_path / "done", threshold=0.9)
