"""`sweepgrok search` end to end on real local Ray, at toy scale.

Most tests use a synthetic trainer with the real trainer's signature and rows (the events module's
RunTracker and run_row, EvalReport's stop) whose grok step is a known function of the config:
no torch, so the search itself is what is measured. The last test runs the real CLI on
search_spaces/searches/quick_optuna.yaml, then the optuna-dashboard command it printed, read back
over the dashboard's HTTP API. Ray processes are tagged and stopped by PID (conftest.ray_env).

Timeouts: about 3x the durations measured on 2 cores shared with other work (load ~10); the
tests without a mark took under 40 s there.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from conftest import wait_until
from ray_cluster import free_ports
from typer.testing import CliRunner

from sweepgrok.config.search_file import load_search
from sweepgrok.config.trial import load_config
from sweepgrok.search import objective
from sweepgrok.search import study as S
from sweepgrok.store.sink import read_metrics, read_runs
from sweepgrok.train.events import RunTracker, end_status, run_row

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


# ---- a synthetic trainer ---------------------------------------------------------------------


def synthetic_grok_step(cfg: Any, seed_index: int = 0) -> float:
    """Known optimum: lambda_max = 0.1, start_step = 1000 -> 100 steps."""
    lam, start = cfg.geomdr.lambda_max, cfg.geomdr.start_step
    return (100 + 4000 * (math.log10(lam) + 1) ** 2 + abs(start - 1000)) * (1 + 0.1 * seed_index)


@dataclass
class _Report:
    step: int
    metrics: list[dict[str, Any]]
    geometry: list[dict[str, Any]]
    finished: list[dict[str, Any]]
    _stop: Any = field(repr=False, default=None)

    def save_checkpoint(self, path: str | Path) -> None:
        (Path(path) / "synthetic.json").write_text(json.dumps({"step": self.step}))

    def stop(self, run_id: str) -> None:
        self._stop(run_id, self)


def synthetic_train(
    cfg,
    sink=None,
    *,
    run_ids,
    sweep="",
    on_eval=None,
    resume_from=None,
    run_extra=None,
    progress=None,
    delay=0.0,
):
    """Test accuracy rises linearly to 0.5 and jumps to 1 at the known grok step."""
    t = cfg.train
    members = [cfg.member(s) for s in t.seed_list]
    trackers = [RunTracker(r, t.grok_threshold, t.fit_threshold, 0.5) for r in run_ids]
    grok = [synthetic_grok_step(cfg, i) for i in range(len(members))]
    active, done = list(range(len(members))), []
    extra = {"sweep": sweep, **(run_extra or {})}
    for step in range(0, t.max_steps + 1, t.eval_every):
        time.sleep(delay)
        ended: set[int] = set()

        def end(i, status, report, step=step, ended=ended):
            ended.add(i)
            done.append(run_row(members[i], trackers[i], status, step, 0.0, extra))
            report.finished.append(done[-1])

        def stop(run_id, report, end=end, ended=ended, active=active):
            for i in active:
                if run_ids[i] == run_id and i not in ended:
                    end(i, "censored", report)

        report = _Report(step, [], [], [], stop)
        for i in active:
            acc = 1.0 if step >= grok[i] else 0.5 * step / grok[i]
            trackers[i].update(step, 1.0, acc, None)
            report.metrics.append(
                {
                    "run_id": run_ids[i],
                    "step": step,
                    "train_acc": 1.0,
                    "test_acc": acc,
                    "train_loss": 0.0,
                    "test_loss": 1 - acc,
                }
            )
            status = end_status(trackers[i], step, t.max_steps, False, t.stop_after_grok)
            if status:
                end(i, status, report)
        if on_eval:
            on_eval(report)
        active = [i for i in active if i not in ended]
        if not active:
            break
    return done


def _ship_by_value() -> None:
    # Ray workers cannot import this test module: send its functions by value.
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def search_file(tmp_path: Path, **search: Any) -> Path:
    doc = {
        "name": "syn",
        "storage": str(tmp_path / "out"),
        "base": {
            "geomdr": {"enabled": True},
            "train": {"max_steps": 3000, "eval_every": 50, "early_evals": False},
        },
        "resources": {"cpu": 1},
        "search": {
            "num_samples": 4,
            "max_concurrent": 1,
            "seed": 0,
            "space": {
                "geomdr.lambda_max": {"loguniform": [0.001, 1.0]},
                "geomdr.start_step": {"int": [0, 4000]},
            },
            **search,
        },
    }
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_synthetic(path: Path, delay: float = 0.0, enqueue: list[dict] | None = None) -> Any:
    """One session of the search file's study, on the synthetic trainer."""
    from sweepgrok.tune.search import run_search

    _ship_by_value()
    spec = load_search(path)
    sweep_dir = spec.sweep_dir()
    record = S.read_study_record(sweep_dir) or S.new_study_record(spec, sweep_dir)
    S.write_study_record(sweep_dir, record)
    if enqueue:
        study = optuna.create_study(
            storage=S.open_storage(record),
            direction="minimize",
            study_name=record["study_name"],
            load_if_exists=True,
        )
        for params in enqueue:
            study.enqueue_trial(params)
    train = functools.partial(synthetic_train, delay=delay)
    out = run_search(spec, sweep_dir, record, num_cpus=2, live=False, train_fn=train)
    return spec, sweep_dir, record, out


# ---- the tests -----------------------------------------------------------------------------


def test_search_gets_close_to_the_known_optimum(tmp_path, ray_env):
    path = search_file(tmp_path, num_samples=16)
    t0 = time.perf_counter()
    _, sweep_dir, record, _ = run_synthetic(path)
    print(f"16 synthetic trials: {time.perf_counter() - t0:.1f} s")
    study = S.load_study(record)
    assert S.count_states(study) == {"COMPLETE": 16}
    best = study.best_trial
    print("best", best.value, best.params)
    # The optimum is 100 steps; a random point of the space averages ~6,000 (mostly censored).
    assert best.value <= 600
    assert abs(math.log10(best.params["geomdr.lambda_max"]) + 1) < 0.35
    assert abs(best.params["geomdr.start_step"] - 1000) < 500
    runs = read_runs(sweep_dir)
    assert len(runs) == 16 and runs["run_id"].is_unique


def test_time_cap_stops_a_slow_trial_at_the_best_time(tmp_path, ray_env):
    path = search_file(tmp_path, num_samples=2)
    fast = {"geomdr.lambda_max": 0.1, "geomdr.start_step": 1000}  # groks at step 100
    slow = {"geomdr.lambda_max": 0.001, "geomdr.start_step": 1000}  # never within 3000
    spec, sweep_dir, record, _ = run_synthetic(path, enqueue=[fast, slow])
    runs = read_runs(sweep_dir).set_index("run_id")
    assert runs.loc["syn-t0000", "status"] == "grokked"
    assert runs.loc["syn-t0000", "grok_step"] == 100
    capped = runs.loc["syn-t0001"]
    assert capped["status"] == "censored" and capped["steps_run"] == 100
    assert capped["censored"] and math.isnan(capped["grok_step"])
    metrics = read_metrics(sweep_dir)
    assert metrics.loc[metrics["run_id"] == "syn-t0001", "step"].max() == 100
    study = S.load_study(record)
    t1 = study.trials[1]
    # Censored at the cap: 100 + budget * (theta - peak), finite, above the best it lost to.
    peak, theta = capped["peak_test_acc"], spec.threshold
    assert t1.user_attrs["capped_at"] == 100
    assert t1.value == pytest.approx(100 + spec.budget * (theta - peak)) and t1.value > 100
    saved = objective.compute_saved(read_runs(sweep_dir).to_dict("records"))
    assert (saved["steps_run"], saved["steps_without_cap"], saved["capped_runs"]) == (200, 3100, 1)


DRIVER = """
import sys
sys.path[:0] = [{here!r}, {tests!r}]
import test_search_e2e as t
from pathlib import Path
t.run_synthetic(Path({path!r}), delay=0.05)
"""


def _states(sweep_dir: Path) -> dict[str, int]:
    record = S.read_study_record(sweep_dir)
    try:
        return S.count_states(S.load_study(record)) if record else {}
    except KeyError:  # the storage exists, the study not yet
        return {}


@pytest.mark.timeout(360)  # 107 s measured
def test_interrupted_search_resumes_to_exactly_num_samples(tmp_path, ray_env):
    path = search_file(tmp_path, num_samples=5, max_concurrent=2, time_cap_margin=None)
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(
        here=str(Path(__file__).resolve().parent), tests=str(ROOT / "tests"), path=str(path)
    ))
    sweep_dir = load_search(path).sweep_dir()
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        env=ray_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def mid_search() -> bool:
        assert proc.poll() is None, "the search ended before it was interrupted"
        states = _states(sweep_dir)
        return states.get("COMPLETE", 0) >= 2 and bool(states.get("RUNNING"))

    try:
        wait_until(mid_search, 120, "2 complete trials and a running one")
        proc.send_signal(signal.SIGINT)  # the first Ctrl-C: Tune stops and saves
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = S.count_states(S.load_study(S.read_study_record(sweep_dir)))
    assert before.get("COMPLETE", 0) < 5, before  # it was interrupted
    _, _, record, _ = run_synthetic(path)
    study = S.load_study(record)
    assert S.count_states(study) == {"COMPLETE": 5}
    assert [t.number for t in study.trials] == list(range(5))
    params = [tuple(sorted(t.params.items())) for t in study.trials]
    assert len(set(params)) == 5  # no schedule sampled twice
    runs = read_runs(sweep_dir)
    assert sorted(runs["run_id"]) == [f"syn-t{n:04d}" for n in range(5)]
    metrics = read_metrics(sweep_dir)
    assert not metrics.duplicated(["run_id", "step"]).any()


def printed_dashboard_commands(output: str) -> list[list[str]]:
    """The optuna-dashboard commands `sweepgrok search` printed, as argument lists."""
    prefix = "study dashboard: "
    lines = output.splitlines()
    return [shlex.split(line.removeprefix(prefix)) for line in lines if line.startswith(prefix)]


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@contextlib.contextmanager
def dashboard_serving(command: list[str], env: dict[str, str], log: Path) -> Iterator[str]:
    """Run an optuna-dashboard command line until it answers; yield its URL; stop it by PID."""
    port = command[command.index("--port") + 1]
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(command, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)

    def answers() -> bool:
        assert proc.poll() is None, f"optuna-dashboard exited: {log.read_text()}"
        try:
            return "study_summaries" in get_json(f"{url}/api/studies")
        except (OSError, ValueError):  # not listening yet (URLError is an OSError)
            return False

    try:
        wait_until(answers, 60, f"optuna-dashboard on {url}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def check_dashboard_shows_the_study(output: str, sweep_dir: Path, tmp_path: Path) -> None:
    """The command printed at the start and at the end serves the study sweepgrok recorded."""
    record = S.read_study_record(sweep_dir)
    assert record is not None
    printed = printed_dashboard_commands(output)
    assert printed == [S.dashboard_command(record)] * 2, output
    assert printed[0][1] == f"sqlite:///{sweep_dir.resolve() / 'optuna.db'}"
    assert printed[0][-2:] == ["--port", "8080"]
    # The printed command as typed, on a free port (8080 may be taken on this machine).
    command = [*printed[0][:-1], str(free_ports(1)[0])]
    command[0] = str(Path(sys.executable).parent / command[0])  # the venv's entry point
    summary = json.loads((sweep_dir / "search_summary.json").read_text())
    with dashboard_serving(command, dict(os.environ), tmp_path / "dashboard.log") as url:
        studies = get_json(f"{url}/api/studies")["study_summaries"]
        assert [s["study_name"] for s in studies] == [summary["study_name"]]
        detail = get_json(f"{url}/api/studies/{studies[0]['study_id']}")
    trials = {t["number"]: t for t in detail["trials"]}
    assert len(trials) == sum(summary["trials"].values()) == len(read_runs(sweep_dir))
    recorded = {t.number: t.value for t in S.load_study(record).trials}
    assert {n: t["values"][0] for n, t in trials.items()} == recorded
    assert all(t["state"] == "Complete" for t in trials.values())
    (best,) = detail["best_trials"]
    assert (best["number"], best["values"][0]) == (summary["best_trial"], summary["best_value"])


@pytest.mark.timeout(480)  # 67 s measured for the search (load ~10), 261 s in all at load ~27
def test_cli_quick_optuna_prints_and_writes_the_best_schedule(tmp_path, ray_env):
    from sweepgrok.cli import app

    res = CliRunner().invoke(
        app,
        [
            "search",
            str(ROOT / "search_spaces/searches/quick_optuna.yaml"),
            "--storage",
            str(tmp_path),
            "--num-samples",
            "3",
        ],
    )
    print(res.output)
    assert res.exit_code == 0, res.output
    assert "best schedule" in res.output and "time cap" in res.output
    sweep_dir = tmp_path / "quick_optuna"
    cfg = load_config(sweep_dir / "best_trial.yaml")
    assert cfg.geomdr.enabled and cfg.task.p == 47
    summary = json.loads((sweep_dir / "search_summary.json").read_text())
    assert summary["trials"] == {"COMPLETE": 3} and summary["best_value"] <= 1000
    assert (sweep_dir / "objective.png").exists() and (sweep_dir / "optuna.db").exists()
    assert len(read_runs(sweep_dir)) == 3
    check_dashboard_shows_the_study(res.output, sweep_dir, tmp_path)
