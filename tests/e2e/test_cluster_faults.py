"""Node loss on a real two-node cluster (this machine, loopback, token auth).

A grid of two trials at one CPU each on two one-CPU nodes puts one trial on each node. Once the
worker's trial has checkpointed, the worker node is killed (its raylet and everything below it,
by PID). Tune must retry that trial from its checkpoint on the head (`max_failures`), the
sweep must end well, every run must be in runs/ exactly once with every evaluation in
metrics/, and the retried run must equal an uninterrupted `sweepgrok train` of its config.

Both ways of launching a sweep are covered: `sweepgrok launch --address` from outside, and a
Ray job (`ray job submit --working-dir . -- python -m sweepgrok launch ...`) whose entrypoint
finds sweepgrok although the nodes' PATH has no virtualenv on it (docs/cluster.md).

Timeouts: about 2.5x the durations measured on 2 cores shared with other work (load ~10); the
measured times to detect the loss, to finish and the work redone are printed (-s) and quoted
in docs/cluster.md.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from conftest import assert_exactly_once, raw_rows, tiny_tree, wait_until, write_grid
from ray_cluster import (
    ONE_CLUSTER_AT_A_TIME,
    RAY,
    Cluster,
    descendants,
    failures,
    kill_node,
    raylet_of,
    snapshot_of,
    two_node_cluster,
)

from sweepgrok.config.grid_file import load_grid
from sweepgrok.config.trial import nest
from sweepgrok.store.sink import read_metrics, read_runs

pytestmark = [pytest.mark.slow, ONE_CLUSTER_AT_A_TIME]

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
SWEEP = "faults"
EVAL_EVERY = 50
CHECKPOINT_EVERY = 8
"""Evaluations between trial checkpoints: one every 400 steps."""
# Long enough (several seconds per trial here) that the worker's trial is surely mid-run
# after its first checkpoint, with a dozen checkpoint intervals in which to catch it between
# two (3,000 steps once let a quick machine finish the sweep before the test saw one).
BASE = tiny_tree(
    {"train.max_steps": 5000, "train.eval_every": EVAL_EVERY, "train.stop_after_grok": False}
)
LATEST_KILL_STEP = 3 * CHECKPOINT_EVERY * EVAL_EVERY
"""Kill at the third checkpoint on disk if no snapshot showed the trial between two before."""
TRIAL_CWD = re.compile(r"/working_dirs/([0-9a-f_]+)$")
"""A Tune trial process works in <...>/working_dirs/<trial folder>; ours are named by trial id."""


def fault_grid(tmp_path: Path) -> Path:
    return write_grid(
        tmp_path / "g.yaml",
        SWEEP,
        base=BASE,
        seeds=[1, 2],
        max_concurrent=2,
        checkpoint_every=CHECKPOINT_EVERY,
        max_failures=2,
    )


def trial_on(start_proc: subprocess.Popen) -> str | None:
    """The id of a trial whose process runs under the node of `start_proc` (else None)."""
    for pid in descendants(raylet_of(start_proc)):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        hit = TRIAL_CWD.search(cwd)
        if hit:
            return hit.group(1)
    return None


def step_on_disk(sweep_dir: Path, run_id: str) -> int | None:
    """The run's latest evaluation in metrics/ (the driver flushes them at each checkpoint);
    None while the run has none there or has ended."""
    if not list((sweep_dir / "metrics").glob("part-*.parquet")):
        return None
    metrics = read_metrics(sweep_dir, columns=["run_id", "step"])
    steps = metrics.loc[metrics["run_id"] == run_id, "step"]
    if steps.empty:
        return None
    runs = list((sweep_dir / "runs").glob("part-*.parquet"))
    if runs and run_id in set(read_runs(sweep_dir, columns=["run_id"])["run_id"]):
        return None
    return int(steps.max())


def reported_step(sweep_dir: Path, trial_id: str) -> int:
    """The trial's latest reported step in Tune's latest snapshot (-1 if none yet)."""
    last = snapshot_of(sweep_dir, trial_id).get("last_result") or {}
    return int(last.get("step", -1))


@dataclass
class NodeLoss:
    """What the test measured around the kill (seconds since the kill)."""

    trial_id: str
    detected_s: float
    finished_s: float = 0.0


def kill_worker_mid_trial(cluster: Cluster, sweep_dir: Path, driver: subprocess.Popen) -> NodeLoss:
    """Wait for a checkpointed trial on the worker, kill the worker node, wait for Tune to see."""

    def driver_alive() -> None:
        assert driver.poll() is None, driver.communicate()

    def worker_trial() -> str | None:
        driver_alive()
        return trial_on(cluster.worker)

    trial_id = wait_until(worker_trial, 240, "a trial on the worker node")

    # Kill between two checkpoints: the driver has rows of two evaluations past the last one.
    # Tune's snapshot (reported_step) lags by up to a second; where 400 steps take less than
    # that (a fast machine: CI once saw the sweep end first), kill once LATEST_KILL_STEP is on
    # disk, with most of the run still to go (the checks below hold either way).
    run_id = f"{SWEEP}-{trial_id}"

    def between_checkpoints() -> bool:
        driver_alive()
        on_disk = step_on_disk(sweep_dir, run_id)
        if on_disk is None:
            return False
        reported = reported_step(sweep_dir, trial_id)
        return reported >= on_disk + 2 * EVAL_EVERY or on_disk >= LATEST_KILL_STEP

    wait_until(between_checkpoints, 120, f"trial {trial_id} between checkpoints on the worker")
    kill_node(cluster.worker)
    killed = time.monotonic()

    def failure_seen() -> bool:
        driver_alive()
        return failures(sweep_dir, trial_id) >= 1

    wait_until(failure_seen, 180, f"Tune to count the failure of trial {trial_id}")
    return NodeLoss(trial_id, detected_s=time.monotonic() - killed)


def reference_metrics(grid: Path, seed: int, tmp_path: Path) -> pd.DataFrame:
    """metrics of an uninterrupted `sweepgrok train` of the trial config at one thread."""
    (trial,) = [t for t in load_grid(grid).trials if t.flat["train.seed"] == seed]
    config = tmp_path / f"trial-s{seed}.yaml"
    # A trial at one CPU trains with one torch thread (sweepgrok.tune.trainable).
    config.write_text(yaml.safe_dump(nest({**trial.flat, "train.threads": 1})))
    out = tmp_path / "reference"
    done = subprocess.run(
        [PYTHON, "-m", "sweepgrok", "train", str(config), "--out", str(out), "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return read_metrics(out)


def comparable(metrics: pd.DataFrame) -> pd.DataFrame:
    """Metrics rows without what differs between two equal runs (run id, wall time)."""
    rows = metrics.drop(columns=["run_id", "wall_time"]).sort_values("step")
    return rows.reset_index(drop=True)


def check_sweep_after_node_loss(
    grid: Path, sweep_dir: Path, loss: NodeLoss, tmp_path: Path
) -> dict[str, Any]:
    """Both runs exactly once; the retried one equals an uninterrupted run of its config."""
    runs = assert_exactly_once(sweep_dir, 2)
    assert failures(sweep_dir, loss.trial_id) == 1
    # Both ended on the surviving node: the worker's trial was retried there.
    assert runs["node_id"].nunique() == 1, runs[["run_id", "node_id"]]
    run_id = f"{SWEEP}-{loss.trial_id}"
    (seed,) = runs.loc[runs["run_id"] == run_id, "train.seed"]
    metrics = read_metrics(sweep_dir)
    retried = metrics[metrics["run_id"] == run_id]
    pd.testing.assert_frame_equal(
        comparable(retried), comparable(reference_metrics(grid, int(seed), tmp_path))
    )
    raw = raw_rows(sweep_dir, "metrics")
    redone = int((raw["run_id"] == run_id).sum()) - len(retried)
    # From its last checkpoint, not from scratch: it re-emitted at most the evaluations between
    # two checkpoints (from scratch: every evaluation up to the first checkpoint and more).
    assert 0 <= redone <= CHECKPOINT_EVERY, redone
    measured = {
        "detect_s": round(loss.detected_s, 1),
        "finish_s": round(loss.finished_s, 1),
        "evals_redone": redone,
        "steps_redone": redone * EVAL_EVERY,
    }
    print(f"node loss: {measured}")
    return measured


def run_through_node_loss(
    command: list[str], cluster: Cluster, sweep_dir: Path, cwd: Path | None = None
) -> tuple[NodeLoss, int, str]:
    """Run `command`, kill the worker node while a trial runs there, and wait for the command:
    (the loss with its timings, the exit code, the output)."""
    proc = subprocess.Popen(
        command, cwd=cwd, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    loss = kill_worker_mid_trial(cluster, sweep_dir, proc)
    killed = time.monotonic() - loss.detected_s
    out, _ = proc.communicate(timeout=300)
    loss.finished_s = time.monotonic() - killed
    return loss, proc.returncode, out


@pytest.mark.timeout(600)  # 234 s measured (detected 2 s, finished 59 s after the kill)
def test_worker_node_lost_mid_trial(tmp_path: Path, ray_env: dict[str, str]) -> None:
    grid = fault_grid(tmp_path)
    sweep = tmp_path / SWEEP
    with two_node_cluster(ray_env, tmp_path) as cluster:
        launch = [PYTHON, "-m", "sweepgrok", "launch", str(grid), "--storage", str(tmp_path)]
        launch += ["--address", cluster.address]
        loss, code, out = run_through_node_loss(launch, cluster, sweep)
        assert code == 0, out
    check_sweep_after_node_loss(grid, sweep, loss, tmp_path)


def path_without_venv() -> str:
    """This PATH minus the test's virtualenv: a head started outside the environment."""
    venv_bin = str(Path(sys.executable).parent)
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin)


@pytest.mark.timeout(600)  # 219 s measured (detected 2 s, finished 53 s after the kill)
def test_worker_node_lost_during_a_ray_job(tmp_path: Path, ray_env: dict[str, str]) -> None:
    grid = fault_grid(tmp_path)
    sweep = tmp_path / SWEEP
    env = {k: v for k, v in ray_env.items() if k != "VIRTUAL_ENV"}
    with two_node_cluster(env, tmp_path, dashboard=True, path=path_without_venv()) as cluster:
        submit = [RAY, "job", "submit", "--address", str(cluster.dashboard_url)]
        submit += ["--working-dir", "."]
        bare = subprocess.run(
            [*submit, "--", "sweepgrok", "--help"],
            cwd=REPO,
            env=cluster.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        # What docs/cluster.md warns about: the entrypoint runs with the nodes' PATH.
        assert bare.returncode != 0 and "not found" in bare.stdout + bare.stderr, bare
        entry = [PYTHON, "-m", "sweepgrok", "launch", str(grid), "--storage", str(tmp_path)]
        loss, code, out = run_through_node_loss([*submit, "--", *entry], cluster, sweep, cwd=REPO)
        assert code == 0 and "succeeded" in out, out
        assert "FileNotFoundError" not in out, out  # the reported failure after the fit
    check_sweep_after_node_loss(grid, sweep, loss, tmp_path)
