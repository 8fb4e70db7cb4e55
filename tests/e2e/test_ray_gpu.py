"""Ray trials on GPUs, on a CPU machine: a real local Ray with logical GPUs
(``ray.init(num_gpus=2)``) schedules, packs and isolates trials exactly as on GPUs; only CUDA
itself is missing (torch finds none), so a trial given a logical GPU trains on the CPU.

What is checked: the device a trial resolves to (by hand, every case), the file rules
(cuda needs resources.gpu; fractions above 1 are not GPUs Ray can give), the cluster check that
refuses a grid no node can hold before anything is written (exit 2), validate's hint, and, with
real Ray, how many trials run at once, which CUDA_VISIBLE_DEVICES each sees and how many share a
GPU, down to the run rows.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import tiny_tree, write_grid
from typer.testing import CliRunner

from sweepgrok.cli import app
from sweepgrok.config.grid_file import Resources, load_grid
from sweepgrok.store.sink import read_runs
from sweepgrok.tune.cluster import Node, capacity_problem
from sweepgrok.tune.devices import NoCudaInTrial, TrialDevice, resolve

runner = CliRunner()
SWEEPGROK = str(Path(sys.executable).parent / "sweepgrok")
AUTO_BASE = tiny_tree({"train.device": "auto", "train.max_steps": 20, "train.eval_every": 10})
"""The tiny trial with train.device: auto and two evaluations after step 0."""

# ---- the device of a trial ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "gpu_ids", "cuda", "want"),
    [
        # no GPU from Ray: auto is the CPU even where torch sees CUDA (the node's GPUs are not
        # this trial's)
        ("auto", [], True, TrialDevice("cpu", None)),
        ("auto", [], False, TrialDevice("cpu", None)),
        ("auto", [1], True, TrialDevice("cuda", "1")),
        ("auto", [0, 1], True, TrialDevice("cuda", "0,1")),
        ("cuda", [0], True, TrialDevice("cuda", "0")),
        ("cpu", [0], True, TrialDevice("cpu", "0")),
        ("cpu", [], False, TrialDevice("cpu", None)),
    ],
)
def test_trial_device(requested: str, gpu_ids: list[int], cuda: bool, want: TrialDevice) -> None:
    assert resolve(requested, gpu_ids, cuda, "x") == want


def test_a_logical_gpu_without_cuda_trains_on_the_cpu_and_says_why() -> None:
    got = resolve("auto", [1], False, "1")
    assert (got.device, got.gpu_ids) == ("cpu", "1")
    assert got.note is not None
    assert "Ray assigned GPU 1" in got.note and "CUDA_VISIBLE_DEVICES=1" in got.note
    assert got.note.endswith("training on the CPU")


def test_cuda_without_cuda_in_the_trial_is_an_error_naming_the_gpu() -> None:
    with pytest.raises(NoCudaInTrial, match=r"Ray GPU ids: 0, CUDA_VISIBLE_DEVICES=0\)"):
        resolve("cuda", [0], False, "0")


def test_the_note_is_logged_once_per_trial(monkeypatch, caplog) -> None:
    import ray
    import torch

    from sweepgrok.tune.devices import trial_device

    monkeypatch.setattr(ray, "get_gpu_ids", lambda: [0])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with caplog.at_level(logging.WARNING, logger="sweepgrok.tune.devices"):
        assert trial_device("auto").device == "cpu"
    notes = [r.getMessage() for r in caplog.records if "Ray assigned GPU 0" in r.getMessage()]
    assert len(notes) == 1


# ---- the file rules -------------------------------------------------------------------------


def test_cuda_trials_must_ask_for_a_gpu(tmp_path: Path) -> None:
    base = tiny_tree({"train.device": "cuda"})
    grid = write_grid(tmp_path / "g.yaml", "g", base=base, seeds=[1, 2])
    result = runner.invoke(app, ["validate", str(grid)])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert f"{grid}: resources.gpu: 0, but trials ask for train.device: cuda" in result.output
    assert "resources: {gpu: 1}" in result.output
    write_grid(grid, "g", base=base, seeds=[1, 2], resources={"gpu": 1})
    assert len(load_grid(grid).trials) == 2


def test_a_search_over_cuda_must_ask_for_a_gpu(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    doc = {"name": "s", "base": AUTO_BASE,
           "search": {"space": {"train.device": {"choice": ["cpu", "cuda"]}}}}
    path.write_text(yaml.safe_dump(doc))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "resources.gpu: 0, but trials ask for train.device: cuda" in result.output


@pytest.mark.parametrize("gpu", [1.5, 2.25])
def test_more_than_one_gpu_must_be_whole(tmp_path: Path, gpu: float) -> None:
    grid = write_grid(tmp_path / "g.yaml", "g", resources={"gpu": gpu})
    result = runner.invoke(app, ["validate", str(grid)])
    assert result.exit_code == 2, result.output
    assert "resources" in result.output and "a fraction below 1 or a whole number" in result.output
    assert f"got {gpu:g}" in result.output
    assert Resources(gpu=2.0).gpu == 2.0 and Resources(gpu=0.25).gpu == 0.25


def test_validate_hints_to_pack_seeds_rather_than_share_a_gpu(tmp_path: Path) -> None:
    grid = write_grid(tmp_path / "g.yaml", "g", seeds=[1, 2], resources={"gpu": 0.25})
    result = runner.invoke(app, ["validate", str(grid)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "grid g: 2 trials over train.seed\n"
    assert result.stderr.startswith(f"hint: {grid}: resources.gpu: 0.25 runs up to 4 trials")
    assert "seeds_per_trial" in result.stderr and "1/2.8" in result.stderr
    write_grid(grid, "g", seeds=[1, 2], seeds_per_trial=2, resources={"gpu": 1})
    result = runner.invoke(app, ["validate", str(grid)])
    assert (result.exit_code, result.stderr) == (0, "")


# ---- what the cluster can hold ----------------------------------------------------------------


def test_a_gpu_trial_on_a_cluster_without_gpus() -> None:
    problem = capacity_problem(Resources(gpu=0.5), [Node(2, 0), Node(4, 0)], "g.yaml")
    assert problem is not None
    assert problem.startswith(
        "g.yaml: resources.gpu: 0.5 per trial, but the Ray cluster has no GPU: "
    )
    assert "set resources.gpu: 0" in problem


def test_more_gpus_per_trial_than_any_node_has() -> None:
    problem = capacity_problem(Resources(gpu=2), [Node(8, 1), Node(8, 1)], "g.yaml")
    assert problem is not None
    assert "the Ray cluster has 2 GPUs, at most 1 GPU on one node" in problem
    assert "ask for at most 1" in problem
    # a node type the autoscaler may add counts: 2 GPUs on one node would fit
    assert capacity_problem(Resources(gpu=2), [Node(8, 1), Node(8, 2)], "g.yaml") is None


def test_cpus_and_gpus_must_fit_on_one_node() -> None:
    cpu = capacity_problem(Resources(cpu=4), [Node(2, 2), Node(3, 0)], "g.yaml")
    assert cpu == (
        "g.yaml: resources.cpu: 4 per trial, but no node of the Ray cluster has more than 3 "
        "CPUs (a trial runs on one node): ask for at most 3"
    )
    both = capacity_problem(Resources(cpu=2, gpu=1), [Node(8, 0), Node(1, 1)], "g.yaml")
    assert both is not None and "no node of the Ray cluster has both" in both
    assert capacity_problem(Resources(cpu=1, gpu=0.5), [Node(8, 0), Node(1, 1)], "g") is None


@pytest.mark.slow  # 24 s on 2 busy cores: the CLI's imports and Ray's start
def test_launch_refuses_a_gpu_grid_on_a_machine_without_gpus(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    """The real CLI and an embedded Ray: exit 2 before any trial, nothing written."""
    grid = write_grid(tmp_path / "g.yaml", "gpu", base=AUTO_BASE, resources={"gpu": 0.5})
    # Hide any real GPU, so that Ray detects none wherever this runs.
    env = {**ray_env, "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run(
        [SWEEPGROK, "launch", str(grid), "--storage", str(tmp_path / "runs")],
        env=env, capture_output=True, text=True, timeout=180,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]
    assert lines == [
        f"error: {grid}: resources.gpu: 0.5 per trial, but the Ray cluster has no GPU: set "
        "resources.gpu: 0 with train.device: auto (trials train on the CPU), or launch on a "
        "cluster with GPUs (--address)"
    ]
    assert not (tmp_path / "runs" / "gpu").exists()


def test_search_refuses_a_gpu_search_on_a_machine_without_gpus(
    tmp_path: Path, ray_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No study record, no folder left: the corrected file starts a fresh study."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # Ray detects no GPU wherever this runs
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "s.yaml"
    doc = {"name": "s", "base": AUTO_BASE, "resources": {"gpu": 1},
           "search": {"space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}}, "num_samples": 2}}
    path.write_text(yaml.safe_dump(doc))
    result = runner.invoke(app, ["search", str(path)])
    assert result.exit_code == 2, result.output
    assert f"error: {path}: resources.gpu: 1 per trial, but the Ray cluster has no GPU" in (
        result.stderr
    )
    assert not (tmp_path / "runs" / "s").exists()


def test_launch_refuses_more_gpus_per_trial_than_the_node_has(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    from sweepgrok.tune.cluster import ClusterTooSmall
    from sweepgrok.tune.grid import launch_grid

    grid = write_grid(tmp_path / "g.yaml", "gpu", base=AUTO_BASE, resources={"gpu": 3})
    with pytest.raises(ClusterTooSmall, match="has 2 GPUs, at most 2 GPUs on one node"):
        launch_grid(load_grid(grid), tmp_path / "gpu", num_cpus=1, num_gpus=2, live=False)
    assert not (tmp_path / "gpu").exists()  # no trial ran: Tune never made its folder


# ---- scheduling on logical GPUs -------------------------------------------------------------


def run_gauged(tmp_path: Path, gpu: float, trials: int) -> tuple[list[Any], Any]:
    """`trials` one-seed trials asking for `gpu` on 2 logical GPUs and 8 CPUs (the GPUs are
    the limit); what each trial saw beside it, and the run rows."""
    from gpu_trials import gauged

    from sweepgrok.tune.grid import launch_grid

    cap = int(2 // gpu)
    grid = write_grid(tmp_path / "g.yaml", "gpu", base=AUTO_BASE,
                      seeds=list(range(trials)), resources={"cpu": 1, "gpu": gpu})
    folder = tmp_path / "gauge"
    outcome = launch_grid(load_grid(grid), tmp_path / "gpu", num_cpus=8, num_gpus=2, live=False,
                          train_fn=gauged(folder, trials, cap))
    assert (outcome.terminated, outcome.errored) == (trials, 0)
    seen = [json.loads(p.read_text()) for p in sorted((folder / "seen").iterdir())]
    return seen, read_runs(tmp_path / "gpu")


def per_gpu(running: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for trial in running:
        counts[trial["visible"]] = counts.get(trial["visible"], 0) + 1
    return counts


def check_trials(seen: list[Any], runs: Any, trials: int, cap: int, share: int) -> None:
    assert len(seen) == trials and len(runs) == trials
    # cap trials ran at once (each waited for that many), never more, `share` per GPU
    assert max(len(running) for running in seen) == cap
    assert max(max(per_gpu(running).values()) for running in seen) == share
    everyone = {t["run"]: t for running in seen for t in running}
    assert len(everyone) == trials
    # each trial saw exactly its Ray GPU in CUDA_VISIBLE_DEVICES, and both GPUs were used
    assert all(t["visible"] == t["gpu_ids"] for t in everyone.values())
    assert {t["visible"] for t in everyone.values()} == {"0", "1"}
    # no CUDA behind the logical GPUs: auto trained on the CPU
    assert {t["device"] for t in everyone.values()} == {"cpu"}
    rows = runs.set_index("run_id")
    assert rows.loc[list(everyone), "gpu_ids"].tolist() == [
        t["gpu_ids"] for t in everyone.values()
    ]
    assert set(rows["device"]) == {"cpu"} and set(rows["train.device"]) == {"auto"}
    assert set(rows["status"]) <= {"grokked", "completed", "censored"}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_half_a_gpu_each_runs_four_trials_two_per_gpu(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    seen, runs = run_gauged(tmp_path, 0.5, 8)
    check_trials(seen, runs, trials=8, cap=4, share=2)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_whole_gpu_each_runs_two_trials_one_per_gpu(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    seen, runs = run_gauged(tmp_path, 1, 4)
    check_trials(seen, runs, trials=4, cap=2, share=1)
