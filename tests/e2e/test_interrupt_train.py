"""`sweepgrok train` interrupted by real signals to a real process, and `--resume`.

The command runs in its own process group and the signal goes to the group, as a terminal's
Ctrl-C does. Every test compares the resumed folder with one uninterrupted run of the same file:
every metrics, geometry and run row equal but for wall time (1 thread, deterministic kernels).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import assert_plain_readers_read_one_row_per_key, tiny_config, tiny_tree
from typer.testing import CliRunner

from sweepgrok.cli import app
from sweepgrok.store.sink import read_runs

ROOT = Path(__file__).parents[2]
SWEEPGROK = str(Path(sys.executable).parent / "sweepgrok")
runner = CliRunner()

TRIAL = tiny_tree({
    "task.p": 11, "geometry.sample": 32, "geometry.knn_k": 3, "train.max_steps": 900,
    "train.eval_every": 300,  # evaluations at 0, 300, 600, 900: a signal has 300 steps to land
    "train.seeds": [0, 1], "train.stop_after_grok": False,
    "train.checkpoint_every": 1,  # a checkpoint at 300 and 600 (never at step 0 or the last)
    "train.threads": 1,
})


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """1 torch thread, as the trial file says (the in-process runs set it; put back after)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def trial(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("trial") / "tiny.yaml"
    path.write_text(yaml.safe_dump(TRIAL))
    return path


@pytest.fixture(scope="module")
def whole(trial, tmp_path_factory) -> Path:
    """The uninterrupted run (same folder name as the others: the sweep column is equal)."""
    out = tmp_path_factory.mktemp("whole") / "t"
    res = runner.invoke(app, ["train", str(trial), "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    assert not (out / "checkpoint").exists()  # every run ended: nothing resumes from it
    return out


def _start(trial: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [SWEEPGROK, "train", str(trial), "--out", str(out), "--quiet"], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _poll(path: Path, proc: subprocess.Popen[str]) -> None:
    """Until `path` exists (the command must still run)."""
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)


def _signal_group(proc: subprocess.Popen[str], signum: int) -> None:
    os.killpg(proc.pid, signum)


def _rows(out: Path, kind: str, keys: list[str]) -> pd.DataFrame:
    """Every row on disk (no reader's dedupe), wall time left out, sorted by key."""
    frame = pd.read_parquet(out / kind).drop(columns=["wall_time"], errors="ignore")
    return frame.sort_values(keys).reset_index(drop=True)


def _assert_same_rows(resumed: Path, whole: Path) -> None:
    for kind, keys in (("metrics", ["run_id", "step"]), ("geometry", ["run_id", "step", "layer"])):
        got = _rows(resumed, kind, keys)
        assert not got.duplicated(keys).any()  # each evaluation written once
        pd.testing.assert_frame_equal(got, _rows(whole, kind, keys))
    drop = ["wall_time", "finished_at"]
    pd.testing.assert_frame_equal(read_runs(resumed).drop(columns=drop),
                                  read_runs(whole).drop(columns=drop))
    assert not (resumed / "checkpoint").exists()
    # The run rows `interrupted`, then final, compacted as the resume ended: plain pandas,
    # DuckDB and Polars read one row per run, as of the uninterrupted folder.
    assert_plain_readers_read_one_row_per_key(resumed)


def _continue_command(stderr: str, signame: str) -> list[str]:
    """The one line that says what was kept; the command it names, as arguments."""
    lines = [line for line in stderr.splitlines() if line.startswith("interrupted (")]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"interrupted ({signame}): ")
    _, _, command = lines[0].partition("; continue with: ")
    args = shlex.split(command)
    assert args[:2] == ["sweepgrok", "train"] and args[-1] == "--resume"
    return args[1:]


def test_sigint_keeps_every_row_and_resume_writes_the_uninterrupted_rows(trial, whole,
                                                                         tmp_path):
    out = tmp_path / "t"
    proc = _start(trial, out)
    _poll(out / "checkpoint" / "trainer.pt", proc)  # the checkpoint at step 300
    _signal_group(proc, signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    args = _continue_command(stderr, "Ctrl-C")
    # The first signal stops at the next evaluation (600), with a checkpoint there.
    assert f"{out} holds every evaluation to step 600, 2 run(s) marked interrupted and a " \
        "checkpoint at step 600" in stderr
    runs = read_runs(out)
    assert runs["status"].tolist() == ["interrupted"] * 2
    assert runs["steps_run"].tolist() == [600, 600]
    assert sorted(pd.read_parquet(out / "metrics")["step"].unique()) == [0, 300, 600]
    assert not list(out.rglob(".tmp*")) and not list(out.rglob("*.tmp"))

    again = runner.invoke(app, ["train", str(trial), "--out", str(out), "--quiet"])
    assert again.exit_code == 2 and "holds an interrupted run" in again.output
    assert "pass --resume to continue it" in again.output
    # Nothing has ended: analyze says so and how to go on (no empty table, no traceback).
    analyzed = runner.invoke(app, ["analyze", str(out)])
    assert analyzed.exit_code == 2, analyzed.output
    assert "no run has ended yet (2 interrupted" in analyzed.output
    assert "--resume" in analyzed.output and "--censor-interrupted" in analyzed.output

    resumed = runner.invoke(app, args)  # the printed command, as printed
    assert resumed.exit_code == 0, resumed.output
    _assert_same_rows(out, whole)


def test_sigterm_exits_143_and_rows_ahead_of_any_checkpoint_are_written_once(trial, whole,
                                                                             tmp_path):
    out = tmp_path / "t"
    proc = _start(trial, out)
    _poll(out / "checkpoint" / "trainer.pt", proc)
    _signal_group(proc, signal.SIGTERM)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 143, stderr
    args = _continue_command(stderr, "SIGTERM")
    # As if the command had been killed before its first checkpoint: rows on disk to step
    # 600, nothing to resume from. --resume starts over and writes only what is not there.
    shutil.rmtree(out / "checkpoint")
    before = {p.name for p in (out / "metrics").iterdir()}
    resumed = runner.invoke(app, args)
    assert resumed.exit_code == 0, resumed.output
    new = [p for p in (out / "metrics").iterdir() if p.name not in before]
    assert sorted(pd.concat(pd.read_parquet(p) for p in new)["step"].unique()) == [900]
    _assert_same_rows(out, whole)


def test_a_second_sigint_stops_at_once_and_resume_still_matches(trial, whole, tmp_path):
    out = tmp_path / "t"
    proc = _start(trial, out)
    _poll(out / "checkpoint" / "trainer.pt", proc)
    _signal_group(proc, signal.SIGINT)
    assert proc.stderr is not None
    note = ""
    while not note.startswith("Ctrl-C: "):  # the first signal is handled: send the second
        note = proc.stderr.readline()
        assert note, "the command ended before it handled the first Ctrl-C"
    assert "Ctrl-C again: stop at once" in note
    _signal_group(proc, signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    args = _continue_command(stderr, "Ctrl-C")
    # Stopped between 300 and 600: the rows and the checkpoint of 300 are what is kept.
    assert "holds every evaluation to step 300" in stderr and "checkpoint at step 300" in stderr
    assert read_runs(out)["steps_run"].tolist() == [300, 300]
    assert not list(out.rglob(".tmp*"))
    resumed = runner.invoke(app, args)
    assert resumed.exit_code == 0, resumed.output
    _assert_same_rows(out, whole)


def test_resume_refuses_another_trial_and_leaves_an_ended_one_alone(trial, whole, tmp_path):
    out = tmp_path / "t"
    shutil.copytree(whole, out)
    other = runner.invoke(app, ["train", str(trial), "--out", str(out), "--quiet",
                                "--set", "optim.lr=0.002", "--resume"])
    assert other.exit_code == 2 and "holds runs of another trial" in other.output
    ended = runner.invoke(app, ["train", str(trial), "--out", str(out), "--quiet", "--resume"])
    assert ended.exit_code == 0 and "every run has ended already" in ended.output
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(
        p.name for p in (whole / "runs").iterdir())
    plain = runner.invoke(app, ["train", str(trial), "--out", str(out), "--quiet"])
    assert plain.exit_code == 2 and "already holds runs" in plain.output
    both = runner.invoke(app, ["train", str(trial), "--out", str(out), "--resume", "--fresh"])
    assert both.exit_code == 2 and "exclude each other" in both.output


# ---- the pieces: the signal helper, the trainer's resume, the live counter ----------------------


def test_handling_with_cleanup_records_then_raises_then_exits_at_once():
    from sweepgrok.core.interrupt import Interrupted, handling

    before = signal.getsignal(signal.SIGINT)
    with handling("stopping soon", cleanup=True) as intr:
        intr.check()  # nothing yet
        signal.raise_signal(signal.SIGTERM)  # Python runs the handler before the next line
        assert intr.requested and intr.exit_code == 143 and intr.name == "SIGTERM"
        with pytest.raises(Interrupted):
            intr.check()
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        assert intr.exit_code == 143  # the first signal's
    assert signal.getsignal(signal.SIGINT) is before  # the previous handlers are back
    # A third ends the process at once, inside any cleanup, with the first signal's status.
    code = (
        "import signal\n"
        "from sweepgrok.core.interrupt import handling\n"
        "with handling('x', cleanup=True):\n"
        "    signal.raise_signal(signal.SIGINT)\n"
        "    try:\n"
        "        signal.raise_signal(signal.SIGINT)\n"
        "    except KeyboardInterrupt:\n"
        "        signal.raise_signal(signal.SIGTERM)\n"
        "        print('cleanup went on')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 130 and "cleanup went on" not in proc.stdout
    assert "Ctrl-C: x (Ctrl-C again: stop at once)" in proc.stderr


def test_a_checkpoint_where_a_run_ended_does_not_train_it_again(tmp_path):
    # on_eval runs before the trainer drops the runs that ended at that evaluation, so the
    # checkpoint holds them as active: resumed, they must stay ended (no second run row).
    from sweepgrok.config.trial import from_flat
    from sweepgrok.store.sink import ListSink
    from sweepgrok.train.trainer import train

    cfg = from_flat(tiny_config({"task.p": 11, "geometry.sample": 32, "train.max_steps": 60,
                                 "train.eval_every": 10, "train.seeds": [0, 1],
                                 "train.stop_after_grok": False},
                                defaults=["task.train_fraction"]))

    def stop_first_at_30(report, crash=False):
        if report.step == 30:
            report.stop(report.metrics[0]["run_id"])
            if crash:
                report.save_checkpoint(tmp_path / "ckpt")
                raise KeyboardInterrupt

    whole = ListSink()
    train(cfg, whole, on_eval=stop_first_at_30)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, ListSink(), on_eval=lambda r: stop_first_at_30(r, crash=True))
    resumed = ListSink()
    rows = train(cfg, resumed, resume_from=tmp_path / "ckpt")
    stopped = whole.runs[0]["run_id"]
    assert whole.runs[0]["steps_run"] == 30 and whole.runs[0]["status"] == "censored"
    assert [r["run_id"] for r in resumed.runs] == [whole.runs[1]["run_id"]]
    assert {m["run_id"] for m in resumed.metrics} == {whole.runs[1]["run_id"]}
    assert [r["run_id"] for r in rows].count(stopped) == 1

    def steady(rows):
        return [{k: v for k, v in r.items() if k != "wall_time"} for r in rows]

    assert steady(resumed.metrics) == steady(m for m in whole.metrics if m["step"] > 30)


def test_the_bar_counts_runs_that_reached_the_threshold_without_stop_after_grok():
    # stop_after_grok false: no run ends before the budget, so a count of ended runs that
    # grokked says 0 all along. The bar counts every run whose test accuracy reached
    # train.grok_threshold at an evaluation so far.
    from sweepgrok.cli.train import _Progress
    from sweepgrok.config.trial import from_flat
    from sweepgrok.store.sink import ListSink
    from sweepgrok.train.events import reached
    from sweepgrok.train.trainer import train

    theta = 0.1  # above chance (1/11) for some seeds of this tiny model from step 0 on
    cfg = from_flat(tiny_config({"task.p": 11, "geometry.sample": 32, "train.max_steps": 40,
                                 "train.eval_every": 10, "train.seeds": [3, 4, 5, 6, 7],
                                 "train.stop_after_grok": False, "train.grok_threshold": theta},
                                defaults=["task.train_fraction", "train.early_evals"]))
    sink, shown = ListSink(), []
    with _Progress(40, 5, True, theta) as prog:
        def on_eval(report):
            assert report.finished == [] or report.step == 40
            prog.update(report)
            shown.append((report.step, prog.description))
        train(cfg, sink, on_eval=on_eval)
    m = pd.DataFrame(sink.metrics)
    for step, desc in shown:  # by hand: runs with test_acc >= theta at some step <= this one
        upto = m[m["step"] <= step]
        k = upto.loc[reached(upto["test_acc"], theta), "run_id"].nunique()
        assert desc.endswith(f"grokked {k}/5")
    assert int(shown[0][1].split("grokked ")[1].split("/")[0]) > 0  # before any run ended
