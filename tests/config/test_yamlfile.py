"""Numbers as people write them (YAML 1.2 core schema), "did you mean" for a mistyped key (from
a file or from --set, and saying which), and `sweepgrok --version`.

Files and --set values go through the one strict loader (sweepgrok.config.yamlfile): `lr: 1e-3` is
0.001 as in every published config, while a value's type is still checked against its key.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from conftest import one_line_error, write_grid

from sweepgrok.config.grid_file import load_grid
from sweepgrok.config.search_file import load_search
from sweepgrok.config.trial import ConfigError, load_config, parse_overrides
from sweepgrok.config.yamlfile import parse

ROOT = Path(__file__).parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real `sweepgrok` command, in a subprocess."""
    return subprocess.run([sys.executable, "-m", "sweepgrok", *args], capture_output=True,
                          text=True, timeout=120)


# ---- the core schema's scalars ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e-3", 0.001),  # YAML 1.1 (PyYAML's default): the text '1e-3'
        ("1E5", 100000.0),
        ("-2.5e+2", -250.0),
        (".5", 0.5),
        ("1.", 1.0),
        ("1.0e-3", 0.001),
        ("+7", 7),
        ("-7", -7),
        ("010", 10),  # YAML 1.1: octal 8
        ("0o17", 15),  # YAML 1.1: the text '0o17'
        ("0x1F", 31),
        ("true", True),
        ("FALSE", False),
        ("on", "on"),  # YAML 1.1: True (so `train.cuda_graph: on` was refused as a boolean)
        ("yes", "yes"),
        ("no", "no"),
        ("1_000", "1_000"),  # YAML 1.1: 1000
        ("1:20", "1:20"),  # YAML 1.1: sexagesimal 80
        ("2024-01-01", "2024-01-01"),  # YAML 1.1: a date
        ("'1e-3'", "1e-3"),  # quoted: text, whatever it spells
        ("~", None),
        ("Null", None),
    ],
)
def test_plain_scalars_follow_yaml_1_2(text: str, value: object) -> None:
    got = parse(f"v: {text}")["v"]
    assert got == value and type(got) is type(value), (text, got)


def test_infinities_and_nan_are_read_and_then_refused_by_the_key(tmp_path: Path) -> None:
    assert parse("[.inf, -.Inf, +.INF]") == [math.inf, -math.inf, math.inf]
    assert math.isnan(parse(".NaN"))
    trial = tmp_path / "t.yaml"
    trial.write_text("optim:\n  lr: .inf\n")
    with pytest.raises(ConfigError, match=re.escape("optim.lr: must be a finite number")):
        load_config(trial)


def test_a_trial_file_reads_1e_3_as_a_float_and_keeps_the_types_strict(tmp_path: Path) -> None:
    trial = tmp_path / "t.yaml"
    trial.write_text("optim:\n  lr: 1e-3\n  eps: 1E-8\n  weight_decay: .5\n"
                     "train:\n  cuda_graph: off\n")
    cfg = load_config(trial)
    assert (cfg.optim.lr, cfg.optim.eps, cfg.optim.weight_decay) == (0.001, 1e-8, 0.5)
    assert cfg.train.cuda_graph == "off"
    refusals = {
        "train:\n  max_steps: 1e5\n": "train.max_steps: must be an integer, got 100000.0",
        "train:\n  stop_after_grok: yes\n": "must be true or false, got 'yes'",
        "optim:\n  lr: '0.001'\n": "a number in quotes is text",
    }
    for text, words in refusals.items():
        trial.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(words)):
            load_config(trial)


def test_grid_and_search_files_read_exponents_as_numbers(tmp_path: Path) -> None:
    write_grid(tmp_path / "g.yaml", "g")
    with (tmp_path / "g.yaml").open("a") as f:
        f.write("grid:\n  optim.lr: [1e-3, 3E-3]\n  optim.weight_decay: [.5]\n")
    grid = load_grid(tmp_path / "g.yaml")
    assert [t.flat["optim.lr"] for t in grid.trials] == [0.001, 0.003]
    assert {t.flat["optim.weight_decay"] for t in grid.trials} == {0.5}
    search = (ROOT / "search_spaces/searches/quick_optuna.yaml").read_text()
    search = search.replace("lr: 1.0e-3", "lr: 1e-3").replace("[3.0e-4, 3.0e-3]", "[3e-4, 3e-3]")
    (tmp_path / "s.yaml").write_text(search)
    spec = load_search(tmp_path / "s.yaml")
    assert spec.base["optim.lr"] == 0.001
    lr = next(d for d in spec.space if d.key == "optim.lr")
    assert (lr.low, lr.high) == (3e-4, 3e-3)


def test_set_values_are_read_as_file_values_are() -> None:
    flat = parse_overrides(["optim.lr=1e-3", "train.max_steps=010", "train.cuda_graph=on",
                            "task.p='7'"])
    assert flat == {"optim.lr": 0.001, "train.max_steps": 10, "train.cuda_graph": "on",
                    "task.p": "7"}


# ---- did you mean ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "suggested"),
    [("model.d_modle=64", "model.d_model"), ("modle.d_model=64", "model.d_model"),
     ("train.seeed=3", "train.seed")],
)
def test_a_mistyped_set_key_names_set_and_the_closest_key(item: str, suggested: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_overrides([item])
    message = str(err.value)
    assert message.startswith("--set: unknown key"), message
    assert f"(did you mean '{suggested}'?)" in message


def test_a_key_like_no_other_gets_no_suggestion() -> None:
    with pytest.raises(ConfigError) as err:
        parse_overrides(["model.zzzzzz=1"])
    assert "did you mean" not in str(err.value)
    assert "allowed keys in 'model' are arch, n_layers, d_model" in str(err.value)


def test_the_commands_say_where_a_mistyped_key_came_from(tmp_path: Path) -> None:
    trial = tmp_path / "t.yaml"
    trial.write_text("model:\n  d_modle: 64\n")
    res = cli("validate", str(trial))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert one_line_error(res.stderr) == (
        f"error: {trial}: unknown key 'model.d_modle' (did you mean 'model.d_model'?): allowed "
        "keys in 'model' are arch, n_layers, d_model, n_heads, d_mlp, norm, attention, "
        "unembed, temperature, norm_eps, options"
    )
    trial.write_text("modle:\n  d_model: 64\n")
    assert "unknown key 'modle' (did you mean 'model'?)" in cli("validate", str(trial)).stderr
    res = cli("train", str(ROOT / "search_spaces/trials/trial_quick.yaml"), "--out",
              str(tmp_path / "o"), "--set", "model.d_modle=64")
    assert res.returncode == 2 and not (tmp_path / "o").exists()
    assert one_line_error(res.stderr).startswith(
        "error: --set: unknown key 'model.d_modle' (did you mean 'model.d_model'?)"
    )
    grid = write_grid(tmp_path / "g.yaml", "g", seeds_per_trail=2)
    res = cli("validate", str(grid))
    assert res.returncode == 2
    assert "unknown key 'seeds_per_trail' (did you mean 'seeds_per_trial'?)" in res.stderr


def test_version_prints_the_installed_version() -> None:
    res = cli("--version")
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"sweepgrok {metadata.version('sweepgrok')}\n"
