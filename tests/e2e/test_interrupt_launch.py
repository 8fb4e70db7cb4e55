"""Ctrl-C and SIGTERM on `sweepgrok launch` and `sweepgrok search` (sweepgrok.core.interrupt).

Real signals to real processes: the signal module's contract in a small script (fast), the
driver callback's bookkeeping with stand-in trials (fast), then a grid and a search on a real
embedded Ray (slow): exit 130 / 143, one line with what was kept and the command that
continues, `status` before and after, nothing half-written, and `--resume` finishing the sweep
with every run exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from conftest import stop_pids, tagged_pids, tiny_tree, wait_until, write_grid

from sweepgrok.cli.interrupted import continue_command, kept
from sweepgrok.store.sink import read_metrics, read_runs

SWEEPGROK = str(Path(sys.executable).parent / "sweepgrok")
PART_FOLDERS = ("runs", "metrics", "geometry")

# ---- the signal contract, in a small real process ---------------------------------------------

SCRIPT = """
import sys, threading, time
from pathlib import Path
from sweepgrok.core import interrupt

mode, out = sys.argv[1], Path(sys.argv[2])
with interrupt.handling(cleanup=mode in ("thread", "flush", "run")):
    (out / "ready").write_text("")
    while interrupt.requested() is None:
        time.sleep(0.01)  # the work: polls the request, as Tune's loop does
    if mode == "graceful":
        (out / "kept").write_text("rows")  # what a command keeps before it exits
        sys.exit(interrupt.exit_code())
    if mode == "critical":
        with interrupt.critical():
            (out / "writing").write_text("")
            while interrupt._state["pending_exit"] is None:  # the second signal came
                time.sleep(0.01)
            (out / "part").write_text("whole")  # finished although the second signal came
        (out / "after").write_text("")  # never reached: ended right after the write
    if mode in ("part", "flush", "run"):  # sweepgrok's writers, held inside a part's write
        import pyarrow as pa
        from sweepgrok.store import sink

        def held(table, where):  # the temporary file is written; the rename is to come
            real_write(table, where)
            (out / "writing").write_text("")
            state = interrupt._state
            while state["pending_exit"] is None and not state["pending_raise"]:
                time.sleep(0.01)  # until the second signal came

        real_write, sink.pq.write_table = sink.pq.write_table, held
    if mode == "part":  # no cleanup: the second signal ends the process after the rename
        sink.write_part(out / "runs", pa.table({"run_id": ["r"]}))
        (out / "after").write_text("")
    if mode in ("flush", "run"):  # cleanup: the second signal raises after the rename
        rows = sink.FirstWriteSink(sink.ParquetSink(out), {})
        try:
            if mode == "flush":
                rows.write_metrics([{"run_id": "r", "step": 1, "test_acc": 0.5}])
                rows.flush()
            else:
                rows.write_run({"run_id": "r"})
        except KeyboardInterrupt:  # after the part is in place; the cleanup writes again
            sink.pq.write_table = real_write
            rows.flush()
            rows.write_run({"run_id": "r"})
            (out / "cleanup").write_text("")
            sys.exit(interrupt.exit_code())
    if mode == "thread":  # another thread writes while the second signal comes (cleanup)
        raised = threading.Event()

        def writer():
            with interrupt.critical():
                (out / "writing").write_text("")
                raised.wait(30)
                (out / "part").write_text("whole" if raised.is_set() else "late")

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            while True:
                time.sleep(0.01)
        except KeyboardInterrupt:  # the second signal, in the main thread, at once
            raised.set()
            thread.join()
            (out / "cleanup").write_text("")
            sys.exit(interrupt.exit_code())
    while True:  # "hang": only a second signal ends it
        time.sleep(0.01)
"""


def start_script(tmp_path: Path, mode: str) -> subprocess.Popen:
    script = tmp_path / "work.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), mode, str(tmp_path)],
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_until(lambda: (tmp_path / "ready").exists(), 60, "the script's handlers")
    return proc


@pytest.mark.parametrize(("sig", "code", "name"), [(signal.SIGINT, 130, "Ctrl-C"),
                                                   (signal.SIGTERM, 143, "SIGTERM")])
def test_first_signal_stops_the_work_which_exits_128_plus_signal(
    tmp_path: Path, sig: int, code: int, name: str
) -> None:
    proc = start_script(tmp_path, "graceful")
    os.killpg(proc.pid, sig)  # to the process group, as a terminal sends Ctrl-C
    assert proc.wait(timeout=60) == code
    assert (tmp_path / "kept").read_text() == "rows"
    assert proc.stderr is not None
    assert proc.stderr.read().splitlines()[-1].startswith(f"{name}: stopping and keeping")


def test_second_signal_ends_at_once(tmp_path: Path) -> None:
    proc = start_script(tmp_path, "hang")
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.stderr is not None
    first = proc.stderr.readline()  # blocks until the handler printed: no sleep
    assert first.startswith("Ctrl-C: stopping")
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert "Ctrl-C again: ended at once" in proc.stderr.read()


def second_signal_during_a_write(tmp_path: Path, mode: str, sig: int) -> int:
    """Run the script in `mode`, send `sig`, and again once its write began: its exit code."""
    proc = start_script(tmp_path, mode)
    os.killpg(proc.pid, sig)
    wait_until(lambda: (tmp_path / "writing").exists(), 60, f"the {mode} write to begin")
    os.killpg(proc.pid, sig)
    return proc.wait(timeout=60)


def test_second_signal_inside_a_write_ends_right_after_it(tmp_path: Path) -> None:
    assert second_signal_during_a_write(tmp_path, "critical", signal.SIGTERM) == 143
    assert (tmp_path / "part").read_text() == "whole"
    assert not (tmp_path / "after").exists()


def test_second_signal_inside_a_part_write_leaves_the_part_and_no_temporary_file(
    tmp_path: Path,
) -> None:
    assert second_signal_during_a_write(tmp_path, "part", signal.SIGTERM) == 143
    (part,) = (tmp_path / "runs").iterdir()  # renamed into place; no .tmp-part-* left
    assert part.name.startswith("part-")
    assert read_runs(tmp_path)["run_id"].tolist() == ["r"]
    assert not (tmp_path / "after").exists()


def test_second_signal_with_cleanup_raises_in_the_main_thread_while_another_writes(
    tmp_path: Path,
) -> None:
    assert second_signal_during_a_write(tmp_path, "thread", signal.SIGINT) == 130
    assert (tmp_path / "cleanup").exists()
    assert (tmp_path / "part").read_text() == "whole"  # the write finished, after the raise


@pytest.mark.parametrize(("mode", "kind", "read"), [("flush", "metrics", read_metrics),
                                                     ("run", "runs", read_runs)])
def test_second_signal_with_cleanup_during_a_sink_write_writes_each_row_once(
    tmp_path: Path, mode: str, kind: str, read: Any
) -> None:
    assert second_signal_during_a_write(tmp_path, mode, signal.SIGINT) == 130
    assert (tmp_path / "cleanup").exists()
    # One part: the cleanup's flush and run row had nothing left to write.
    assert len(list((tmp_path / kind).iterdir())) == 1
    assert read(tmp_path)["run_id"].tolist() == ["r"]


def test_continue_command_keeps_the_options_that_matter(tmp_path: Path) -> None:
    cmd = continue_command("launch", Path("my grid.yaml"), storage=Path("st"),
                           address="127.0.0.1:6379", tracker=["mlflow"], umask="027")
    assert cmd == ("sweepgrok launch 'my grid.yaml' --storage st --address 127.0.0.1:6379 "
                   "--umask 027 --tracker mlflow --resume")
    anywhere = continue_command("search", Path("s.yaml"), extra=["--num-samples", "8"],
                                absolute=True)
    assert anywhere == f"sweepgrok search {Path('s.yaml').resolve()} --num-samples 8 --resume"
    assert kept({"done": 1, "running": 0, "pending": 2, "failed": 0, "interrupted": 1}) == (
        "1 of 4 trials finished, 1 interrupted, 2 not started")
    assert kept({"done": 1, "pending": 1, "failed": 1, "interrupted": 1}) == (
        "2 of 4 trials finished, 1 of them failed, 1 interrupted, 1 not started")


def test_the_line_falls_back_on_the_drivers_heartbeat_when_the_folder_cannot_be_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The folder's counts cannot be read (here: no sweep in it): the driver's last heartbeat
    gives them, and the stopped command still says its line."""
    from sweepgrok.cli.interrupted import interrupted_exit
    from sweepgrok.store.heartbeat import Heartbeat

    beat = Heartbeat(tmp_path, "launch", 3)
    beat.update({"done": 1, "running": 1, "pending": 1})
    beat.stop("interrupted", {"done": 1, "interrupted": 1, "pending": 1})
    assert interrupted_exit(tmp_path, "sweepgrok launch g.yaml --resume").exit_code == 130
    assert capsys.readouterr().err.startswith(
        "interrupted (nothing): 1 of 3 trials finished, 1 interrupted, 1 not started; ")


# ---- the driver callback: a trial Tune stops is interrupted, not done ------------------------


def test_a_stopped_trial_is_interrupted_in_the_outcome_the_view_and_the_heartbeat(
    tmp_path: Path,
) -> None:
    from sweepgrok.store.heartbeat import Heartbeat
    from sweepgrok.store.heartbeat import read as read_heartbeat
    from sweepgrok.tune.callback import ParquetCallback
    from sweepgrok.tune.progress import LiveView, progress_table

    beat = Heartbeat(tmp_path, "launch", 5)
    cb = ParquetCallback(tmp_path, "g", 5, live=False, heartbeat=beat)
    view = cb._view = LiveView(5, "g", table=False, lines=False)
    # t4 ended in an earlier session (a --resume restores it TERMINATED).
    trials = [SimpleNamespace(trial_id=f"t{i}", status="PENDING", config={}) for i in range(5)]
    trials[4].status = "TERMINATED"
    cb.on_step_begin(0, trials)
    for t in trials[:2]:
        t.status = "RUNNING"
        cb.on_trial_start(0, trials, t)
    trials[0].status = "TERMINATED"
    cb.on_trial_complete(0, trials, trials[0])
    # What Tune's cleanup does to a trial it stops, and to a pending one that holds a worker
    # waiting for resources: never started, it is not finished.
    trials[1].status = trials[2].status = "TERMINATED"
    cb.on_experiment_end(trials)
    assert cb.ended == {"TERMINATED": 2, "INTERRUPTED": 1, "PENDING": 2}
    assert not cb.all_ended(5)
    assert (view.state.done, view.state.running, view.state.interrupted) == (2, 0, 1)
    text = "".join(str(r) for r in progress_table(view.state, 1.0).renderables[:1])
    assert "g: 2/5 trials done, 0 running, 0 failed, 1 interrupted" in text
    doc = read_heartbeat(tmp_path)
    assert doc is not None and doc["trials"] == {
        "done": 2, "running": 0, "pending": 2, "failed": 0, "interrupted": 1}


# ---- real sweeps on a real embedded Ray (slow) -----------------------------------------------


def status_json(sweep: Path, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    shown = subprocess.run([SWEEPGROK, "status", str(sweep), "--format", "json"], env=env,
                           cwd=cwd, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def no_half_written_files(sweep: Path) -> None:
    """No temporary part or heartbeat file left; every part reads back."""
    for kind in PART_FOLDERS:
        assert [p.name for p in (sweep / kind).glob(".*")] == [], kind
    assert [p.name for p in sweep.glob(".driver.json*")] == []
    json.loads((sweep / "driver.json").read_text())
    read_runs(sweep), read_metrics(sweep)


def heartbeat_trials(sweep: Path) -> dict[str, int]:
    from sweepgrok.store.heartbeat import read

    doc = read(sweep)
    return (doc or {}).get("trials") or {}


LONG_BASE = tiny_tree(
    {"train.max_steps": 1500, "train.eval_every": 50, "train.stop_after_grok": False}
)
"""Trials of a few seconds each, so a signal lands mid-sweep."""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ctrl_c_on_launch_keeps_the_rows_says_how_to_continue_and_resume_finishes(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    from conftest import assert_exactly_once, assert_plain_readers_read_one_row_per_key

    write_grid(tmp_path / "g.yaml", "cc", base=LONG_BASE, seeds=[1, 2, 3, 4], max_concurrent=1,
               checkpoint_every=3)
    sweep, elsewhere = tmp_path / "st" / "cc", tmp_path / "elsewhere"
    elsewhere.mkdir()
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    # --verbose: even then no Ray restore advice. A new session: Ctrl-C goes to its group.
    proc = subprocess.Popen([SWEEPGROK, "launch", "g.yaml", "--storage", "st", "--verbose"],
                            cwd=tmp_path, env=ray_env, stdout=out.open("w"),
                            stderr=err.open("w"), start_new_session=True)
    try:
        def mid_sweep() -> dict[str, Any] | None:
            assert proc.poll() is None, err.read_text()
            if heartbeat_trials(sweep).get("done", 0) < 1:
                return None
            doc = status_json(sweep, ray_env, elsewhere)  # while it runs: the driver's counts
            running = doc["trials"]["running"] == 1 and doc["driver"]["state"] == "running"
            return doc if running else None

        live = wait_until(mid_sweep, 300, "a done trial and a running one, per `status`")
        assert live["trials"]["total"] == 4 and live["time_left_s"] is not None
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=180) == 130, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    said = out.read_text() + err.read_text()
    assert "Tuner.restore" not in said and "Stop signal received" not in said
    assert " runs" not in out.read_text()  # no closing table as if the sweep were complete
    (line,) = [x for x in err.read_text().splitlines() if x.startswith("interrupted (")]
    runs = read_runs(sweep)
    done = int((runs["status"] != "interrupted").sum())
    # The stopped trial's run has an `interrupted` row at its last evaluated step.
    (stopped,) = runs[runs["status"] == "interrupted"].itertuples()
    steps = read_metrics(sweep).groupby("run_id")["step"].max()
    assert stopped.steps_run == steps[stopped.run_id] and stopped.git_commit
    assert line.startswith(f"interrupted (Ctrl-C): {done} of 4 trials finished, 1 interrupted, "
                           f"{3 - done} not started; the rows measured so far are in {sweep}")
    assert line.endswith("continue with: sweepgrok launch g.yaml --storage st --resume")
    no_half_written_files(sweep)

    after = status_json(sweep, ray_env, elsewhere)
    assert after["driver"]["state"] == "interrupted" and after["time_left_s"] is None
    assert after["trials"] == {"total": 4, "done": done, "running": 0, "pending": 3 - done,
                               "failed": 0, "interrupted": 1}

    # From another directory, through the folder's own copy of the grid file.
    resumed = subprocess.run([SWEEPGROK, "launch", str(sweep / "sweep.yaml"), "--resume"],
                             cwd=elsewhere, env=ray_env, capture_output=True, text=True,
                             timeout=400)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert_exactly_once(sweep, 4)
    # The interrupted run's two rows and its re-emitted evaluations, compacted as the resume
    # ended: plain pandas, DuckDB and Polars read one row per run and per run and step.
    assert_plain_readers_read_one_row_per_key(sweep)
    final = status_json(sweep, ray_env, elsewhere)
    assert final["driver"]["state"] == "ended" and final["trials"]["done"] == 4


MOMENTS = {
    # moment: (the heartbeat's counts when the signal is sent, the sweep's counts after it,
    # the first trial's steps: short where it must end before the signal, else long)
    "before any trial started": (lambda t: t is not None,
                                 {"done": 0, "interrupted": 0, "pending": 3}, 1500),
    "mid-trial": (lambda t: t and t["running"] == 1 and t["done"] == 0,
                  {"done": 0, "interrupted": 1, "pending": 2}, 1500),
    "after one finished": (lambda t: t and t["running"] == 1 and t["done"] == 1,
                           {"done": 1, "interrupted": 1, "pending": 1}, 100),
}


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize(("moment", "sig"), [("before any trial started", signal.SIGINT),
                                             ("mid-trial", signal.SIGINT),
                                             ("after one finished", signal.SIGTERM)])
def test_the_interrupted_line_driver_json_and_status_count_the_trials_alike_and_truly(
    tmp_path: Path, ray_env: dict[str, str], moment: str, sig: int
) -> None:
    """Issue 41: a trial waiting for resources (Tune gives it a worker, then marks it
    TERMINATED when it stops) was counted as finished, in the line and in driver.json."""
    from sweepgrok.store.heartbeat import counts, read

    reached, expected, first_steps = MOMENTS[moment]
    # One trial at a time, the others waiting with a worker: each takes every CPU Ray sees.
    # The signal comes as a trial starts (the heartbeat says so at once): a long one is stopped
    # long before its end, so the test waits only for Ray and a short first trial.
    env = {**ray_env, "RAY_USE_MULTIPROCESSING_CPU_COUNT": "1"}
    write_grid(tmp_path / "g.yaml", "n", base=LONG_BASE, resources={"cpu": os.cpu_count()},
               zip=[{"train.seed": [1, 2, 3], "train.max_steps": [first_steps, 1500, 1500]}])
    sweep, err = tmp_path / "st" / "n", tmp_path / "err.txt"
    proc = subprocess.Popen([SWEEPGROK, "launch", "g.yaml", "--storage", "st"], cwd=tmp_path,
                            env=env, stdout=subprocess.DEVNULL, stderr=err.open("w"),
                            start_new_session=True)
    try:
        def at_moment() -> bool:
            assert proc.poll() is None, err.read_text()
            doc = read(sweep)
            return bool(reached(None if doc is None else counts(doc)))

        wait_until(at_moment, 300, moment)
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)  # Ctrl-C: the terminal signals the whole group
        else:
            proc.send_signal(sig)  # `kill PID`, a scheduler's preemption
        assert proc.wait(timeout=120) == 128 + sig, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    name = "Ctrl-C" if sig == signal.SIGINT else "SIGTERM"
    full = {"running": 0, "failed": 0, **expected}
    (line,) = [x for x in err.read_text().splitlines() if x.startswith("interrupted (")]
    assert line.startswith(f"interrupted ({name}): {kept(full)}; "), line
    doc = read(sweep)
    assert doc is not None and doc["state"] == "interrupted" and counts(doc) == full
    assert status_json(sweep, ray_env, tmp_path)["trials"] == {"total": 3, **full}
    runs = read_runs(sweep)  # the truth on disk: a run row per finished trial (one seed each)
    assert int((runs["status"] != "interrupted").sum()) == expected["done"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigterm_twice_on_search_ends_at_once_and_resume_finishes_the_study(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    from sweepgrok.search import study as S

    doc = {
        "name": "term",
        "base": LONG_BASE,
        "search": {"num_samples": 3, "max_concurrent": 1, "seed": 0,
                   "space": {"optim.lr": {"loguniform": [0.001, 0.01]}}},
    }
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    sweep = tmp_path / "st" / "term"
    err = tmp_path / "err.txt"
    cmd = [SWEEPGROK, "search", str(path), "--storage", str(tmp_path / "st")]
    proc = subprocess.Popen(cmd, env=ray_env, stdout=subprocess.DEVNULL, stderr=err.open("w"))
    try:
        def mid_search() -> bool:
            assert proc.poll() is None, err.read_text()
            trials = heartbeat_trials(sweep)
            return trials.get("done", 0) >= 1 and trials.get("running", 0) == 1

        wait_until(mid_search, 300, "a done trial and a running one")
        proc.send_signal(signal.SIGTERM)  # `kill PID`, a scheduler's preemption
        wait_until(lambda: "SIGTERM: stopping" in err.read_text() or proc.poll() is not None,
                   60, "the first SIGTERM to be taken")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 143, err.read_text()
    except ProcessLookupError:  # it had already stopped on the first one
        assert proc.wait(timeout=120) == 143, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    stop_pids(tagged_pids(ray_env["SWEEPGROK_TEST_TAG"]))  # what an abrupt end left of its Ray
    said = err.read_text()
    assert "Tuner.restore" not in said
    ended_at_once = "SIGTERM again: ended at once" in said
    if not ended_at_once:  # the first stop had finished: it said what it kept
        assert "interrupted (SIGTERM): " in said and "continue with: sweepgrok search " in said
    no_half_written_files(sweep)
    after = status_json(sweep, ray_env, tmp_path)
    assert after["driver"]["state"] == "interrupted" and after["trials"]["running"] == 0

    resumed = subprocess.run([*cmd, "--resume"], env=ray_env, capture_output=True, text=True,
                             timeout=400)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    study = S.load_study(S.read_study_record(sweep))
    assert S.count_states(study) == {"COMPLETE": 3}
    runs = read_runs(sweep)
    assert sorted(runs["run_id"]) == [f"term-t{n:04d}" for n in range(3)]
    assert not read_metrics(sweep).duplicated(["run_id", "step"]).any()
