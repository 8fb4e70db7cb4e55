"""The example plugin package (examples/grokking_plugins, installed by `make venv`) end to end:
its task and model by entry-point name through `sweepgrok train`, `sweepgrok launch` on real
local Ray, and `sweepgrok analyze`; the measurements that do not apply are null, not missing
rows; a built-in model on sparse parity trains too."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import tiny_tree

from sweepgrok.store.sink import read_metrics, read_runs

pytestmark = pytest.mark.slow
SWEEPGROK = str(Path(sys.executable).parent / "sweepgrok")
PLUGIN = {
    "task.name": "plugin_parity", "task.options": {"bits": 6, "relevant": 2, "samples": 64},
    "task.train_fraction": 0.75, "model.arch": "small_mlp", "model.options": {"width": 32},
    "geometry.sample": 32, "geometry.knn_k": 3, "optim.lr": 1e-2, "optim.weight_decay": 0.1,
    "train.max_steps": 300, "train.eval_every": 50, "train.threads": 1,
}  # fmt: skip


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([SWEEPGROK, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=500)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


@pytest.mark.timeout(600)
def test_the_example_plugins_train_launch_and_analyze(tmp_path: Path, ray_env: dict[str, str]):
    trial = tmp_path / "trial.yaml"
    trial.write_text(yaml.safe_dump(tiny_tree(PLUGIN)))
    log = _run(["train", str(trial), "--out", "one", "--quiet"], tmp_path)
    assert "not measured: per-group and per-layer weight norms" in log
    assert "not measured: Fourier measures" in log
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({
        "name": "plug", "base": tiny_tree(PLUGIN), "resources": {"cpu": 1},
        "grid": {"model.options": [{"width": 16}, {"width": 32}]}, "seeds": [1, 2],
    }))  # fmt: skip
    _run(["launch", str(grid), "--storage", "st"], tmp_path, ray_env)
    runs = read_runs(tmp_path / "st" / "plug")
    assert len(runs) == 4
    assert sorted(set(runs["model.options"])) == ['{"width": 16}', '{"width": 32}']
    assert runs["run_id"].nunique() == 4  # the options are in the run ids
    metrics = read_metrics(tmp_path / "st" / "plug")
    assert metrics["deff"].notna().all()  # geometry reads the plugin's hidden layer
    assert metrics["weight_norm_embed"].isna().all() and metrics["weight_norm"].notna().all()
    out = _run(["analyze", str(tmp_path / "st" / "plug"), "--by", "model.options",
                "--format", "csv"], tmp_path)
    assert '{""width"": 16}' in out or '{"width": 16}' in out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("arch", ["mlp", "transformer"])
def test_built_in_models_train_sparse_parity(arch: str, tmp_path: Path):
    trial = tmp_path / "trial.yaml"
    trial.write_text(yaml.safe_dump(tiny_tree({
        "task.name": "sparse_parity", "task.bits": 8, "task.relevant_bits": 2,
        "task.samples": 128, "model.arch": arch, "geometry.sample": 32, "geometry.knn_k": 3,
        "train.max_steps": 100, "train.threads": 1,
    })))  # fmt: skip
    _run(["train", str(trial), "--out", "out", "--quiet"], tmp_path)
    runs = read_runs(tmp_path / "out")
    assert len(runs) == 1 and math.isfinite(runs["final_train_acc"].iloc[0])
