"""Tasks and models from outside the package (sweepgrok.config.plugins, docs/extending.md):
resolution by import path and entry point, the checks at load, options, and run ids."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import yaml
from conftest import one_line_error, tiny_tree

from sweepgrok.config.plugins import (
    BUILTIN_ARCHS,
    GROUPS,
    _plugin_task,
    check_model,
    load,
    task_spec,
)
from sweepgrok.config.tasks import TASKS
from sweepgrok.config.trial import ConfigError, config_hash, from_flat

ROOT = Path(__file__).resolve().parents[2]

GOOD = '''
from pydantic import BaseModel, ConfigDict


class TaskOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int = 30


def _size(cfg):
    return TaskOptions.model_validate(cfg.options).size


class Echo:
    """The label is the first token; tokens 0..4."""
    Options = TaskOptions

    def table(self, cfg):
        import torch  # here: validation imports the module, and torch is slow to import

        x = torch.arange(2 * _size(cfg)).reshape(-1, 2) % 5
        return x, x[:, 0].clone()

    def n_tokens(self, cfg):
        return 5

    def size(self, cfg):
        return _size(cfg)


echo = Echo()


def factory(cfg, n_tokens, n_classes, seeds, seq_len=2):
    raise AssertionError("not built at validation")


def validate_options(options):
    if set(options) - {"width"}:
        raise ValueError(f"unknown option(s) {sorted(set(options) - {'width'})}")


factory.validate_options = validate_options
'''

BROKEN = {
    "import error": ("bad_import", "import not_a_module_anywhere\n", "task.name", "bad_import:x",
                     ["cannot import module 'bad_import'", "not_a_module_anywhere"]),
    "module raises": ("bad_body", "raise RuntimeError('boom at import')\n", "task.name",
                      "bad_body:x", ["importing module 'bad_body' failed", "boom at import"]),
    "missing attribute": ("good_mod", GOOD, "task.name", "good_mod:nope",
                          ["module 'good_mod' has no attribute 'nope'"]),
    "not a task": ("good_mod", GOOD, "task.name", "good_mod:factory",
                   ["(module good_mod)", "missing attribute(s) table, n_tokens, size"]),
    "task signature": ("bad_sig", "class T:\n    def table(self, cfg, extra): ...\n"
                       "    def n_tokens(self, cfg): ...\n    def size(self, cfg): ...\n"
                       "t = T()\n", "task.name", "bad_sig:t",
                       ["(module bad_sig): table has the wrong signature"]),
    "model signature": ("bad_model", "def make(cfg, seeds): ...\n", "model.arch",
                        "bad_model:make", ["(module bad_model): the factory has the wrong "
                                           "signature"]),
}


def _write_module(folder: Path, name: str, source: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    """A folder with plugin modules, as the current directory (not on sys.path before)."""
    _write_module(tmp_path, "good_mod", GOOD)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the loader may append the folder
    yield tmp_path
    for name in [m for m in sys.modules if m in ("good_mod",)]:
        del sys.modules[name]
    for cached in (load, _plugin_task, check_model):
        cached.cache_clear()


@pytest.mark.parametrize(("case", "command"), [
    *((case, "validate") for case in BROKEN),
    ("import error", "train"), ("missing attribute", "train"), ("model signature", "train"),
])
def test_a_broken_plugin_exits_2_naming_key_and_module(case, command, tmp_path):
    """The user's command in a subprocess, the plugin module beside the trial file: one error
    line naming the file, the key and the module; no traceback, no training."""
    module, source, key, name, words = BROKEN[case]
    _write_module(tmp_path, module, source)
    tree = tiny_tree({key: name})
    trial = tmp_path / "trial.yaml"
    trial.write_text(yaml.safe_dump(tree))
    args = [command, str(trial)] + (["--out", str(tmp_path / "out")] if command == "train" else [])
    # The console script, as typed: the current directory is not on its path (the loader adds
    # it for a plugin module found there).
    proc = subprocess.run([str(Path(sys.executable).parent / "sweepgrok"), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr
    line = one_line_error(proc.stderr)
    assert f"{key}: " in line and str(trial) in line, line
    assert all(w in line for w in words), line
    assert not (tmp_path / "out").exists()


def test_an_import_path_from_the_current_directory_resolves(plugin_dir):
    cfg = from_flat({"task.name": "good_mod:echo", "task.options": {"size": 12},
                     "task.train_fraction": 0.5, "geometry.enabled": False})
    assert (cfg.task.n_tokens, cfg.task.n_classes, cfg.task.size, cfg.task.seq_len) == (5, 5, 12, 2)
    assert not cfg.task.spec.cyclic and not cfg.task.spec.additive  # a plugin's default
    assert cfg.task.describe() == "good_mod:echo"
    assert str(plugin_dir) in sys.path


def test_plugin_options_are_checked_by_the_plugin(plugin_dir):
    with pytest.raises(ConfigError, match=r"task\.options\.colour: Extra inputs"):
        from_flat({"task.name": "good_mod:echo", "task.options": {"colour": 1}})
    with pytest.raises(ConfigError, match=r"model\.options: unknown option\(s\) \['depth'\]"):
        from_flat({"model.arch": "good_mod:factory", "model.options": {"depth": 2}})
    assert from_flat({"model.arch": "good_mod:factory", "model.options": {"width": 8}})
    with pytest.raises(ConfigError, match=r"task\.options: task add takes no options"):
        from_flat({"task.options": {"size": 3}})
    with pytest.raises(ConfigError, match=r"model\.options: model mlp takes no options"):
        from_flat({"model.arch": "mlp", "model.options": {"width": 3}})


def test_options_enter_the_run_id_only_when_set(plugin_dir):
    """An empty mapping is the default, left out of the hash (every existing id stays: the
    pinned ids of tests/robustness/test_run_ids.py); any option is a different trial."""
    base = {"model.arch": "good_mod:factory"}
    empty = config_hash(from_flat({**base, "model.options": {}}))
    assert empty == config_hash(from_flat(base))
    wide, narrow = ({**base, "model.options": {"width": w}} for w in (64, 8))
    assert len({empty, config_hash(from_flat(wide)), config_hash(from_flat(narrow))}) == 3
    assert config_hash(from_flat({})) == "293481f899d7"  # 0.1.0's id of the default trial


def test_unknown_name_lists_built_ins_and_suggests():
    with pytest.raises(ConfigError, match=r"model\.arch: must be one of transformer, mlp.*"
                       r"sweepgrok\.models.*got 'mpl' \(did you mean 'mlp'\?\)"):
        from_flat({"model.arch": "mpl"})


def test_built_ins_go_through_the_registry():
    from sweepgrok.train.models import ARCHS

    assert tuple(ARCHS) == BUILTIN_ARCHS
    assert all(task_spec(name) is task for name, task in TASKS.items())
    assert GROUPS == {"task.name": "sweepgrok.tasks", "model.arch": "sweepgrok.models"}


def test_the_example_package_is_installed_with_its_entry_points():
    """`make venv` installs examples/grokking_plugins (editable): its entry points resolve by
    name like a built-in."""
    names = {ep.name for g in GROUPS.values() for ep in entry_points(group=g)}
    assert {"plugin_parity", "small_mlp"} <= names, (
        "examples/grokking_plugins is not installed: pip install -e examples/grokking_plugins "
        "(make venv does)")
    cfg = from_flat({"task.name": "plugin_parity", "task.options": {"bits": 6, "samples": 64},
                     "model.arch": "small_mlp", "model.options": {"width": 16},
                     "geometry.knn_k": 3, "geometry.sample": 32})
    assert (cfg.task.n_tokens, cfg.task.n_classes, cfg.task.seq_len, cfg.task.size) == (2, 2, 6, 64)
    with pytest.raises(ConfigError, match=r"model\.options\.width: must be greater than or equal"):
        from_flat({"model.arch": "small_mlp", "model.options": {"width": 0}})
