"""What `sweepgrok status` shows (sweepgrok.analysis.sweepstatus): trial states, groups and time
left from a hand-built sweep folder (every state at once), the driver's heartbeat, and a real
launched sweep. The command itself (its JSON keys, table, refusals, --watch):
tests/cli/test_status.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_row, tiny_tree, tune_entry, write_grid, write_midsweep
from typer.testing import CliRunner

from sweepgrok.analysis.sweepstatus import read_status
from sweepgrok.cli import app
from sweepgrok.store.sink import RUNS_SCHEMA, to_table, write_part

runner = CliRunner()
SWEEPGROK = str(Path(sys.executable).parent / "sweepgrok")


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    """conftest.write_midsweep: a grid of 6 trials caught mid-sweep."""
    return write_midsweep(tmp_path / "st")


def test_every_state_from_the_folder(sweep: Path) -> None:
    s = read_status(sweep)
    assert (s.kind, s.total) == ("grid", 6)
    assert s.counts == {"done": 2, "running": 1, "pending": 2, "failed": 1, "interrupted": 0}
    assert s.driver is None  # no heartbeat (an older version's folder): read as before
    assert (s.runs, s.grokked, s.threshold) == (3, 1, 0.99)
    groups = {g["label"]: g for g in s.groups}
    assert set(groups) == {"norm=none", "norm=sphere"}
    none, sphere = groups["norm=none"], groups["norm=sphere"]
    assert (none["runs"], none["grokked"], none["grok_median"]) == (2, 1, 100.0)
    # Kaplan-Meier: S = 0.5 from step 100 to the censored run's 200: R's midpoint, 150.
    assert none["km_median"] == 150.0
    assert (sphere["runs"], sphere["grokked"], sphere["grok_median"], sphere["km_median"]) == (
        1, 0, None, None)
    # Only t0 was seen ending by Tune (100 s): 100 x (2 pending + 1 running / 2) / 1 running.
    assert s.mean_trial_s == 100.0 and s.time_left_s == 250.0
    assert s.last_write is not None


def test_an_interrupted_run_row_is_not_an_ended_trial(sweep: Path) -> None:
    # t3 (running in Tune's snapshot) gets an `interrupted` run row: its run has not ended.
    write_part(sweep / "runs", to_table([run_row("t3", "sphere", "interrupted", None, 60)],
                                        RUNS_SCHEMA))
    s = read_status(sweep)
    assert s.counts == {"done": 2, "running": 1, "pending": 2, "failed": 1, "interrupted": 0}


def test_no_estimate_before_a_trial_is_done(sweep: Path) -> None:
    snapshot = {"trial_data": [tune_entry("t3", "RUNNING", 10.0)]}
    for path in (sweep / "tune").glob("*.json"):
        path.write_text(json.dumps(snapshot))
    for part in (sweep / "runs").iterdir():
        part.unlink()
    s = read_status(sweep)
    assert s.counts == {"done": 0, "running": 1, "pending": 5, "failed": 0, "interrupted": 0}
    assert s.time_left_s is None and s.mean_trial_s is None and s.groups == []


def test_status_reads_no_ray(sweep: Path) -> None:
    code = (
        "import sys; from pathlib import Path; "
        "from sweepgrok.analysis.sweepstatus import read_status; "
        f"read_status(Path({str(sweep)!r})); sys.exit('ray' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ})
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)  # a 4-trial grid on a real embedded Ray, as a user types it
def test_a_launched_sweep_logs_each_trial_and_status_matches_its_runs(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    import pandas as pd

    grid = write_grid(tmp_path / "g.yaml", "live", grid={"model.norm": ["none", "sphere"]},
                      seeds=[1, 2], max_concurrent=2)
    env = {k: v for k, v in ray_env.items() if k != "RAY_AUTH_MODE"}  # Ray greets when unset
    launched = subprocess.run([SWEEPGROK, "launch", str(grid), "--storage", str(tmp_path)],
                              env=env, capture_output=True, text=True, timeout=560)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    assert "Token authentication" not in launched.stderr, launched.stderr
    sweep = tmp_path / "live"
    runs = pd.read_parquet(sweep / "runs")  # nothing was retried: one row per run
    assert len(runs) == 4 and runs["run_id"].is_unique
    # stdout is a pipe (a log): one line per trial that ended, naming its run and steps.
    ended = [line for line in launched.stdout.splitlines() if line.startswith("trial ")]
    assert len(ended) == 4, launched.stdout
    for _, run in runs.iterrows():
        (line,) = [x for x in ended if f" {run['run_id']} " in x]
        assert f"{run['run_id']} {run['status']} " in line and f"steps={run['steps_run']}" in line

    shown = subprocess.run([SWEEPGROK, "status", str(sweep), "--format", "json"], env=env,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["trials"] == {"total": 4, "done": 4, "running": 0, "pending": 0, "failed": 0,
                             "interrupted": 0}
    assert doc["driver"]["state"] == "ended"
    assert doc["time_left_s"] == 0.0 and doc["mean_trial_s"] > 0
    column = f"grok_step_{round(doc['runs']['threshold'] * 100)}"
    assert doc["runs"]["recorded"] == 4
    assert doc["runs"]["grokked"] == int(runs[column].notna().sum())
    groups = {g["group"]["model.norm"]: g for g in doc["groups"]}
    for norm, rows in runs.groupby("model.norm"):
        grok = rows[column].dropna()
        group = groups[norm]
        assert (group["runs"], group["grokked"]) == (len(rows), len(grok))
        assert group["grok_median"] == (float(grok.median()) if len(grok) else None)
        if 2 * len(grok) < len(rows):  # under half grokked: no Kaplan-Meier median
            assert group["km_median"] is None


# ---- the driver's heartbeat ------------------------------------------------------------------


def heartbeat_doc(pid: int, *, state: str = "running", age: float = 0.0, host: str | None = None,
                  trials: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "pid": pid, "host": host or socket.gethostname(), "command": "launch", "state": state,
        "started": time.time() - 100, "updated": time.time() - age, "total": 6,
        "done_before": 0,
        "trials": trials or {"done": 1, "running": 3, "pending": 2, "failed": 0,
                             "interrupted": 0},
        "resume": "sweepgrok launch /abs/g.yaml --storage /abs/runs --resume",
    }


def gone_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def put_heartbeat(sweep: Path, doc: dict[str, Any]) -> None:
    (sweep / "driver.json").write_text(json.dumps(doc))


def test_a_live_driver_gives_the_counts_it_holds(sweep: Path) -> None:
    # The snapshot says 1 running (it lags); the live driver holds 3 running: the driver wins.
    put_heartbeat(sweep, heartbeat_doc(os.getpid()))
    s = read_status(sweep)
    assert s.counts == {"done": 1, "running": 3, "pending": 2, "failed": 0, "interrupted": 0}
    assert s.driver is not None and s.driver["state"] == "running"
    # 100 s per done trial x (2 pending + 3 running / 2) / 3 running
    assert s.time_left_s == pytest.approx(100 * 3.5 / 3)
    res = runner.invoke(app, ["status", str(sweep)])
    assert f"({'grid'}): running (driver pid {os.getpid()} on " in res.stdout


def test_a_driver_on_another_host_is_alive_while_its_heartbeat_is_fresh(sweep: Path) -> None:
    put_heartbeat(sweep, heartbeat_doc(gone_pid(), host="elsewhere.example"))
    assert read_status(sweep).driver["state"] == "running"  # type: ignore[index]
    put_heartbeat(sweep, heartbeat_doc(os.getpid(), host="elsewhere.example", age=120))
    assert read_status(sweep).driver["state"] == "interrupted"  # type: ignore[index]


@pytest.mark.parametrize("how", ["pid gone", "stale", "stopped"])
def test_a_sweep_whose_driver_is_gone_is_interrupted(sweep: Path, how: str) -> None:
    doc = {
        "pid gone": heartbeat_doc(gone_pid()),
        "stale": heartbeat_doc(os.getpid(), age=120),  # our pid, but no refresh for 2 minutes
        "stopped": heartbeat_doc(os.getpid(), state="interrupted"),
    }[how]
    put_heartbeat(sweep, doc)
    s = read_status(sweep)
    # The folder's record: t3 was running when the driver stopped: interrupted, nothing runs.
    assert s.counts == {"done": 2, "running": 0, "pending": 2, "failed": 1, "interrupted": 1}
    assert s.time_left_s is None
    res = runner.invoke(app, ["status", str(sweep)])
    since = datetime.fromtimestamp(doc["updated"]).strftime("%H:%M")
    assert f"st (grid): interrupted (driver not running since {since})" in res.stdout
    assert "2/6 done, 0 running, 2 pending, 1 failed, 1 interrupted" in res.stdout
    assert "time left: none (nothing runs)" in res.stdout and "~" not in res.stdout
    assert f"continue with: {doc['resume']}" in res.stdout
    js = json.loads(runner.invoke(app, ["status", str(sweep), "--format", "json"]).stdout)
    assert js["driver"]["state"] == "interrupted" and js["time_left_s"] is None
    assert js["driver"]["resume"] == doc["resume"] and js["driver"]["since"].endswith("Z")


def test_a_driver_that_ended_every_trial_says_nothing_more(tmp_path: Path) -> None:
    d = tmp_path / "st"
    d.mkdir()
    write_grid(d / "sweep.yaml", "st", seeds=[1])
    write_part(d / "runs", to_table([run_row("t0", "none", "grokked", 100, 100)], RUNS_SCHEMA))
    put_heartbeat(d, heartbeat_doc(gone_pid(), state="ended"))
    s = read_status(d)
    assert s.counts == {"done": 1, "running": 0, "pending": 0, "failed": 0, "interrupted": 0}
    res = runner.invoke(app, ["status", str(d)])
    assert res.stdout.splitlines()[0] == f"{d} (grid)"
    assert "none (every trial ended)" in res.stdout


@pytest.mark.parametrize("threshold", [0.95, 0.99])
def test_a_sweep_with_no_run_yet_names_its_own_grok_threshold(
    tmp_path: Path, threshold: float
) -> None:
    d = tmp_path / "st"
    d.mkdir()
    base = tiny_tree()
    base["train"]["grok_threshold"] = threshold
    write_grid(d / "sweep.yaml", "st", base=base, seeds=[1, 2])
    status = read_status(d)
    assert status.runs == 0 and status.threshold == threshold
    res = runner.invoke(app, ["status", str(d)])
    assert f"0 recorded, 0 grokked (test acc >= {threshold:g})" in res.stdout


# ---- the folder's copy of its sweep file reads from anywhere ---------------------------------


def test_the_sweep_file_copy_reads_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sweepgrok.config.grid_file import load_grid
    from sweepgrok.store.sweepdir import keep_sweep_file

    project = tmp_path / "project"
    project.mkdir()
    (project / "trial.yaml").write_text(yaml.safe_dump(tiny_tree()))
    (project / "norms.yaml").write_text(
        "# my grid\nbase: trial.yaml\ngrid:\n  model.norm: [none, sphere]\nseeds: [1, 2]\n")
    monkeypatch.chdir(project)  # a README-style sweep: relative base, default storage (runs)
    spec = load_grid("norms.yaml")
    sweep_dir = spec.settings.sweep_dir()
    copy = keep_sweep_file(spec.settings, sweep_dir).resolve()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    status = read_status(project / "runs" / "norms")
    assert status.notes == [] and status.total == 4
    again = load_grid(copy)  # what `launch <sweep>/sweep.yaml --resume` reads
    assert again.settings.sweep_dir() == project / "runs" / "norms"
    assert [t.flat for t in again.trials] == [t.flat for t in spec.trials]
    assert copy.read_text().startswith(f"# sweepgrok's copy of {project / 'norms.yaml'} (")


# ---- a search stopped with a sampled trial still waiting for resources ----------------------


def test_a_stopped_search_counts_a_sampled_trial_tune_never_started_as_pending(
    tmp_path: Path,
) -> None:
    """Optuna holds trial 1 RUNNING from the moment it is sampled; Tune's snapshot says it
    waited for resources (PENDING): not interrupted, not started (issue 41). Trial 0 ran."""
    import optuna

    from sweepgrok.config.search_file import load_search
    from sweepgrok.search import study as S

    d = tmp_path / "st"
    d.mkdir()
    doc = {"name": "st", "base": tiny_tree(),
           "search": {"num_samples": 4, "space": {"optim.lr": {"loguniform": [0.001, 0.01]}}}}
    (d / "sweep.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    record = S.new_study_record(load_search(d / "sweep.yaml"), d)
    S.write_study_record(d, record)
    study = optuna.create_study(storage=S.open_storage(record), study_name=record["study_name"])
    study.ask(), study.ask()  # trials 0 and 1: RUNNING in Optuna
    (d / "tune").mkdir()
    entries = [tune_entry("a", "RUNNING"), tune_entry("b", "PENDING")]
    for number, entry in enumerate(entries):
        meta = json.loads(entry[0])
        meta["config"]["sweep"] = {"optuna_trial": number}
        entry[0] = json.dumps(meta)
    (d / "tune" / "experiment_state-2026-01-01_00-00-00.json").write_text(
        json.dumps({"trial_data": entries}))
    put_heartbeat(d, {**heartbeat_doc(os.getpid(), state="interrupted"), "total": 4})
    assert read_status(d).counts == {
        "done": 0, "running": 0, "pending": 3, "failed": 0, "interrupted": 1}
