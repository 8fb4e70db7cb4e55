"""Training numerics pinned: every logged value of a few short configs equals its committed
reference (tests/data/golden/, made by tests/golden.py), and measurements never draw from the
training's random streams.

Equality: on the CPU with 1 thread, deterministic kernels and torch's kernels held at
AVX2 (golden.ENV), two runs on one machine give the same bits (checked when the references
were written). Across CPU models the evaluation-time measurements (rho, the Fourier and
attention-entropy columns) still differed by up to 4e-6 relative (2026-12-05: the same code
and pin on another Xeon), so a float matches within REL_TOL; everything else is exact.
A change of training numerics is a deliberate commit: `python tests/golden.py --write`, and a
CHANGELOG.md entry saying what changed and why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from golden import CONFIGS, ENV, REFERENCES, TINY, first_difference, same

HERE = Path(__file__).parents[1]  # tests/
REGENERATE = (
    "if the change is deliberate: python tests/golden.py --write, and say why in CHANGELOG.md"
)


def in_fresh_process(code: str) -> Any:
    """Run `code` (which prints JSON) in a Python of its own, golden.ENV set before torch."""
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, **ENV, "PYTHONPATH": path}
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def current() -> dict[str, Any]:
    """Every golden config trained by this code, in one fresh process."""
    return in_fresh_process("import golden; golden.main([])")


def pinned_torch() -> str:
    """The torch version constraints.txt pins (what `make` installs and the references use)."""
    text = (HERE.parent / "constraints.txt").read_text()
    return next(line.split("==")[1].strip() for line in text.splitlines()
                if line.startswith("torch=="))


def test_same_allows_floats_within_rel_tol_only() -> None:
    assert same(100.0, 100.0009) and not same(100.0, 100.0011)  # REL_TOL = 1e-5
    assert same([float("nan"), 1.0], [float("nan"), 1.0]) and not same(float("nan"), 1.0)
    assert not same([1.0], [1.0, 2.0]) and not same("3,2,1", "3,1,2") and not same(1, 2)
    assert first_difference([{"step": 10, "rho": 0.5}], [{"step": 10, "rho": 0.6}]) == \
        "{'step': 10} rho: 0.5 != 0.6"


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_logged_value_equals_the_reference(name: str, current: dict[str, Any]) -> None:
    want = json.loads((REFERENCES / f"{name}.json").read_text())
    if current["machine"]["cpu_capability"] != want["machine"]["cpu_capability"]:
        pytest.skip(f"the references need {want['machine']['cpu_capability']} kernels (x86-64)")
    if current["machine"]["torch"].split("+")[0] != pinned_torch():
        pytest.skip(f"torch {current['machine']['torch']} is not constraints.txt's pin "
                    f"{pinned_torch()} (an environment `make` did not build)")
    assert want["machine"]["torch"] == current["machine"]["torch"], (
        f"the references were made with torch {want['machine']['torch']}: a torch upgrade "
        f"changes numerics; {REGENERATE}"
    )
    assert want["config"] == {**TINY, **CONFIGS[name]}, f"the config changed; {REGENERATE}"
    for kind in ("runs", "metrics", "geometry"):
        diff = first_difference(current["rows"][name][kind], want[kind])
        assert not diff, f"{name} {kind}: {diff}; {REGENERATE}"


# ---- measurements draw from streams of their own --------------------------------------------

TRAINING = ("train_loss", "train_acc", "test_loss", "test_acc", "weight_norm", "geomdr_loss")
"""What training alone decides (the measurements are the other columns)."""


def training_values(overrides: dict[str, Any], before: str = "") -> Any:
    """The TRAINING columns and run outcomes of the GeomDR config (minibatches and a
    subsampled penalty: the trainer's two random streams) with `overrides`; `before` runs
    first in the same process."""
    base = {**CONFIGS["mlp_geomdr_subspace"], **overrides}
    metrics = ("step", *TRAINING)
    outcome = ("status", "fit_step", "grok_step", "steps_run", "final_train_acc", "final_test_acc")
    code = (
        f"import json, torch, golden\n{before}\nrows = golden.run({base!r})\n"
        f"print(json.dumps({{'metrics': [{{k: r.get(k) for k in {metrics!r}}} "
        f"for r in rows['metrics']], 'runs': [{{k: r[k] for k in {outcome!r}}} "
        "for r in rows['runs']]}))"
    )
    return in_fresh_process(code)


@pytest.mark.slow
def test_geometry_measurements_leave_training_unchanged() -> None:
    measured = training_values({})
    assert len(measured["metrics"]) == 16
    assert training_values({"geometry.enabled": False}) == measured
    assert training_values({"geometry.sample": 32, "geometry.knn_k": 3}) == measured


@pytest.mark.slow
def test_torch_global_random_state_leaves_training_unchanged() -> None:
    # Training and measurements use generators of their own, never torch's global one.
    measured = training_values({})
    assert training_values({}, "torch.manual_seed(12345); torch.rand(1000)") == measured
