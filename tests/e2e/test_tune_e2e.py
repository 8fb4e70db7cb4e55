"""Ray Tune end to end, at toy scale: every evaluation lands in Parquet exactly once.

Real local Ray (embedded, num_cpus=2), real `sweepgrok launch` subprocesses killed mid-sweep,
and a real two-node cluster on this machine. Every Ray process a test starts carries a tag in
its environment and is stopped by PID afterwards (conftest.ray_env).

Timeouts: about 3x the durations measured on 2 cores shared with other work (load ~10).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    assert_exactly_once,
    assert_plain_readers_read_one_row_per_key,
    raw_rows,
    stop_pids,
    tagged_pids,
    tiny_tree,
    wait_until,
    write_grid,
)
from failing_trainer import PLANNED, fail_once
from ray import tune
from ray_cluster import ONE_CLUSTER_AT_A_TIME, two_node_cluster

from sweepgrok.config.grid_file import load_grid
from sweepgrok.store.sink import read_metrics, read_runs
from sweepgrok.tune.callback import TUNE_DIR, ParquetCallback

pytestmark = pytest.mark.slow

SWEEPGROK = str(Path(sys.executable).parent / "sweepgrok")


def launch_in_process(grid: Path, sweep_dir: Path, **kw: Any) -> Any:
    from sweepgrok.tune.grid import launch_grid

    return launch_grid(load_grid(grid), sweep_dir, num_cpus=2, live=False, **kw)


@pytest.mark.timeout(180)  # 57 s measured
def test_grid_of_four_trials(tmp_path: Path, ray_env: dict[str, str]) -> None:
    grid = write_grid(
        tmp_path / "g.yaml",
        "four",
        grid={"model.norm": ["none", "sphere"]},
        seeds=[1, 2],
        max_concurrent=2,
    )
    t0 = time.perf_counter()
    outcome = launch_in_process(grid, tmp_path / "four")
    print(f"4 tiny trials: {time.perf_counter() - t0:.1f} s")
    assert (outcome.terminated, outcome.errored, outcome.unfinished) == (4, 0, 0)
    runs = assert_exactly_once(tmp_path / "four", 4)
    assert sorted(runs["train.seed"]) == [1, 1, 2, 2]
    # Nothing was retried, so nothing was written twice either.
    assert len(raw_rows(tmp_path / "four", "metrics")) == len(read_metrics(tmp_path / "four"))


@pytest.mark.timeout(240)  # 77 s measured
def test_trial_that_crashes_once_is_retried_from_its_checkpoint(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    marks = tmp_path / "fail-marks"
    grid = write_grid(
        tmp_path / "g.yaml",
        "retry",
        grid={"model.norm": ["none", "sphere"]},
        seeds=[1, 2],
        seeds_per_trial=2,
        checkpoint_every=2,
        max_failures=1,
    )
    outcome = launch_in_process(grid, tmp_path / "retry", train_fn=fail_once(marks))
    assert (outcome.terminated, outcome.errored) == (2, 0)
    assert len(list(marks.iterdir())) == 2  # both trials did crash once
    runs = assert_exactly_once(tmp_path / "retry", 4)
    assert all(r.endswith(("-s1", "-s2")) for r in runs["run_id"])  # packed seeds
    # The retries re-emitted the evaluations after the checkpoint (the same keys twice); the
    # sweep's end compacted them: a plain reader of the folder reads each (run_id, step) once.
    assert len(raw_rows(tmp_path / "retry", "metrics")) == len(read_metrics(tmp_path / "retry"))
    assert_plain_readers_read_one_row_per_key(tmp_path / "retry")


class KillFirstFinished(tune.Callback):
    """SIGKILLs the worker process of the first trial Tune completes, as Tune completes it:
    before Tune could hand that worker to the next trial."""

    def __init__(self) -> None:
        self.killed: int | None = None

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        if self.killed is None:
            self.killed = int(trial.last_result["pid"])
            os.kill(self.killed, signal.SIGKILL)


@pytest.mark.timeout(180)  # 21 s measured
def test_a_worker_killed_as_its_trial_ends_fails_no_other_trial(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    """The chaos soak's 'run row written twice' on CI: Tune reuses a finished trial's worker,
    and one that died first failed the next trial as Tune reset it (still PENDING: no retry,
    whatever max_failures), so that run got a `failed` row, then a second row from --resume
    (sweepgrok.tune.reuse)."""
    from sweepgrok.tune.grid import build_tuner, run_tuner, start_ray

    spec = load_grid(write_grid(tmp_path / "g.yaml", "dies", seeds=[1, 2, 3], max_failures=1))
    sweep_dir = tmp_path / "dies"
    callback = ParquetCallback(sweep_dir, "dies", 3, live=False)
    start_ray(None, num_cpus=1)  # one trial at a time: the next one waits for a worker
    tuner = build_tuner([t.flat for t in spec.trials], sweep="dies", sweep_dir=sweep_dir,
                        resources=spec.settings.resources, max_concurrent=1, max_failures=1,
                        checkpoint_every=None, callback=callback)
    killer = KillFirstFinished()
    tuner._local_tuner.get_run_config().callbacks.append(killer)  # no public setter
    outcome = run_tuner(tuner, 3, callback)
    assert killer.killed is not None
    assert (outcome.terminated, outcome.errored) == (3, 0)
    runs = assert_exactly_once(sweep_dir, 3)
    raw = raw_rows(sweep_dir, "runs")  # one row per run: no `failed` row before it
    assert sorted(raw["run_id"]) == sorted(runs["run_id"]), raw[["run_id", "status"]]


@pytest.mark.timeout(400)  # 123 s measured
def test_failed_trial_gets_a_failed_row_then_resume_supersedes_it(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    grid = write_grid(
        tmp_path / "g.yaml", "errored", seeds=[1, 2], checkpoint_every=2, max_failures=0
    )
    sweep = tmp_path / "errored"
    first = launch_in_process(grid, sweep, train_fn=fail_once(tmp_path / "fail-marks"))
    assert first.errored == 2
    failed = read_runs(sweep)
    assert list(failed["status"]) == ["failed", "failed"]
    assert failed["error"].str.contains(PLANNED).all()
    second = launch_in_process(grid, sweep, resume=True)  # the real trainer: no crash
    assert second.errored == 0
    assert_exactly_once(sweep, 2)  # the success row is the last written


@pytest.mark.timeout(400)
def test_a_full_disk_stops_the_sweep_and_resume_finishes_it(
    tmp_path: Path, ray_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from sweepgrok.cli import app

    grid = write_grid(tmp_path / "g.yaml", "full", seeds=[1, 2], checkpoint_every=2)
    sweep = tmp_path / "full"
    real, writes = pq.write_table, []

    def fills_up(table: Any, where: Any, *args: Any, **kwargs: Any) -> None:
        # The driver writes every part: after two, its disk is full (and stays full).
        writes.append(where)
        if len(writes) <= 2:
            return real(table, where, *args, **kwargs)
        Path(where).write_bytes(b"PAR1 half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", fills_up)
    launch = ["launch", str(grid), "--storage", str(tmp_path)]
    first = CliRunner().invoke(app, launch)
    assert isinstance(first.exception, SystemExit), first.exception  # not a crash
    assert first.exit_code == 1, first.output
    assert "Traceback" not in first.output
    line = first.output.strip().splitlines()[-1]
    assert line.startswith(f"error: {sweep.resolve()}/") or line.startswith(f"error: {sweep}/")
    assert "No space left on device" in line
    # The continue line repeats the flags the sweep needs (its storage) so it can be pasted.
    assert f"`sweepgrok launch {grid} --storage {tmp_path} --resume`" in line
    assert not [p for p in sweep.rglob(".tmp-*")]  # no partial part file
    assert len(read_runs(sweep)) < 2, "the sweep finished before the disk filled up"
    monkeypatch.setattr(pq, "write_table", real)  # space again
    second = CliRunner().invoke(app, [*launch, "--resume"])
    assert second.exit_code == 0, second.output
    assert_exactly_once(sweep, 2)


def _launch_cmd(grid: Path, storage: Path, *extra: str) -> list[str]:
    return [SWEEPGROK, "launch", str(grid), "--storage", str(storage), *extra]


def _wait_for_run_rows(sweep_dir: Path, proc: subprocess.Popen, timeout: float = 240) -> None:
    def run_rows_written() -> bool:
        assert proc.poll() is None, proc.communicate()
        return bool(list((sweep_dir / "runs").glob("part-*.parquet")))

    wait_until(run_rows_written, timeout, f"a run row in {sweep_dir}")


def tune_snapshot(sweep_dir: Path) -> dict[str, str]:
    """{trial_id: status} in Tune's latest experiment snapshot (what --resume restores)."""
    files = sorted((sweep_dir / TUNE_DIR).glob("experiment_state-*.json"))
    try:
        trial_data = json.loads(files[-1].read_text())["trial_data"]
    except (IndexError, OSError, ValueError):  # not written yet, or being written
        return {}
    trials = [json.loads(state) for state, _runtime in trial_data]
    return {t["trial_id"]: t["status"] for t in trials}


def _wait_until_snapshot_has_finished(sweep_dir: Path, trial_ids: set[str]) -> None:
    def finished_in_snapshot() -> bool:
        snapshot = tune_snapshot(sweep_dir)
        return all(snapshot.get(t) == "TERMINATED" for t in trial_ids)

    wait_until(finished_in_snapshot, 60, f"trials {sorted(trial_ids)} in Tune's snapshot")


@pytest.mark.timeout(400)  # 133 s measured
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
def test_killed_driver_resumes_without_rerunning_or_duplicates(
    tmp_path: Path, ray_env: dict[str, str], sig: signal.Signals
) -> None:
    # Trials of a few seconds each, one at a time, so the kill lands mid-sweep.
    base = tiny_tree(
        {"train.max_steps": 1500, "train.eval_every": 50, "train.stop_after_grok": False}
    )
    grid = write_grid(
        tmp_path / "g.yaml", "killed", base=base, seeds=[1, 2, 3, 4], checkpoint_every=3
    )
    sweep = tmp_path / "killed"
    proc = subprocess.Popen(
        _launch_cmd(grid, tmp_path, "--max-concurrent", "1"),
        env=ray_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    _wait_for_run_rows(sweep, proc)
    finished = read_runs(sweep)
    done_before = set(finished["run_id"])
    # Tune snapshots every TUNE_GLOBAL_CHECKPOINT_S: kill once the finished trials are in it.
    _wait_until_snapshot_has_finished(sweep, set(finished["trial_id"]))
    proc.send_signal(sig)
    _out, _ = proc.communicate(timeout=120)
    if sig == signal.SIGKILL:  # its embedded Ray outlives it: stop what it started, by PID
        stop_pids(tagged_pids(ray_env["SWEEPGROK_TEST_TAG"]))
    assert len(read_runs(sweep)) < 4, "the sweep finished before it was interrupted"
    refused = subprocess.run(
        _launch_cmd(grid, tmp_path), env=ray_env, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2 and "--resume" in refused.stderr
    resumed = subprocess.run(
        _launch_cmd(grid, tmp_path, "--resume"),
        env=ray_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert_exactly_once(sweep, 4)
    raw_runs = raw_rows(sweep, "runs")
    for run_id in done_before:  # finished before the kill: not re-run
        assert (raw_runs["run_id"] == run_id).sum() == 1, run_id


@ONE_CLUSTER_AT_A_TIME
@pytest.mark.timeout(180)  # 51 s measured
def test_two_node_cluster_runs_trials_on_both_nodes(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    with two_node_cluster(ray_env, tmp_path) as cluster:
        grid = write_grid(tmp_path / "g.yaml", "cluster", seeds=[1, 2, 3, 4])
        run = subprocess.run(
            _launch_cmd(grid, tmp_path, "--address", cluster.address),
            env=cluster.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        runs = assert_exactly_once(tmp_path / "cluster", 4)
        assert runs["node_id"].nunique() == 2, runs[["run_id", "node_id"]]
