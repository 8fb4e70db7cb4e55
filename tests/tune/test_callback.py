"""The driver's Parquet callback across driver sessions: a run whose row said it ended when the
session began keeps that row (a --resume that runs its trial again from a checkpoint, because
Tune's snapshot still called it unfinished, does not write a second one)."""

from __future__ import annotations

from pathlib import Path

from conftest import GROKS, raw_rows, write_sweep

from sweepgrok.config.trial import Config, flatten
from sweepgrok.tune.callback import ParquetCallback


def run_row(run_id: str, status: str) -> dict:
    return {**flatten(Config()), "run_id": run_id, "status": status, "steps_run": 1000}


def test_a_run_ended_in_an_earlier_session_keeps_its_one_row(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "s", GROKS)  # six runs that ended (completed, censored)
    before = raw_rows(sweep, "runs")
    again = str(before["run_id"].iloc[0])
    callback = ParquetCallback(sweep, "s", total=7, live=False)
    rows = {"finished": [run_row(again, "completed"), run_row("s-new-0", "censored")]}
    callback.write_rows("t0", rows)
    callback.close()
    after = raw_rows(sweep, "runs")
    assert sorted(after["run_id"]) == sorted([*before["run_id"], "s-new-0"])
    kept = after[after["run_id"] == again]
    assert kept["finished_at"].equals(before.loc[before["run_id"] == again, "finished_at"])


def test_a_failed_run_is_superseded_by_its_later_end(tmp_path: Path) -> None:
    sweep = tmp_path / "s"
    first = ParquetCallback(sweep, "s", total=1, live=False)
    first.write_rows("t0", {"finished": [run_row("s-a-0", "failed")]})
    first.close()
    second = ParquetCallback(sweep, "s", total=1, live=False)  # the --resume session
    second.write_rows("t0", {"finished": [run_row("s-a-0", "completed")]})
    second.close()
    assert list(raw_rows(sweep, "runs")["status"]) == ["failed", "completed"]


def test_a_retried_trial_reaching_the_same_end_again_writes_one_row(tmp_path: Path) -> None:
    # The worker died after the trial reported its run's end and before Tune saw the trial end:
    # Tune retries it from its last checkpoint and the run ends again, in this same session.
    sweep = tmp_path / "s"
    callback = ParquetCallback(sweep, "s", total=1, live=False)
    end = {"finished": [{**run_row("s-a-0", "grokked"), "grok_step": 300}]}
    callback.write_rows("t0", end)
    callback.write_rows("t0", end)
    callback.close()
    assert list(raw_rows(sweep, "runs")["run_id"]) == ["s-a-0"]
    assert callback.grokked == 1


# ---- a trial a signal stopped: interrupted rows --------------------------------------------


def metric_row(run_id: str, step: int, test_acc: float) -> dict:
    return {"run_id": run_id, "step": step, "train_loss": 0.1, "train_acc": 1.0,
            "test_loss": 1.0, "test_acc": test_acc}


def test_a_stopped_trial_gets_an_interrupted_row_per_unended_run_that_resume_supersedes(
    tmp_path: Path,
) -> None:
    from types import SimpleNamespace

    from sweepgrok.store.provenance import git_commit
    from sweepgrok.store.sink import read_runs

    sweep = tmp_path / "s"
    cfg = {**flatten(Config()), "train.seeds": [1, 2, 3], "train.grok_threshold": 0.95}
    stopped = SimpleNamespace(trial_id="t0", status="RUNNING", config={"cfg": cfg})
    quiet = SimpleNamespace(trial_id="t1", status="RUNNING", config={"cfg": cfg})
    first = ParquetCallback(sweep, "s", total=2, live=False)
    for trial in (stopped, quiet):
        first.on_trial_start(0, [stopped, quiet], trial)
    # s1 grokked and ended at 200; s2 passed 0.95 at 300 and went on; s3 did not reach it.
    first.write_rows("t0", {"metrics": [metric_row(f"s-t0-s{s}", 100, 0.5) for s in (1, 2, 3)]})
    first.write_rows("t0", {"metrics": [metric_row("s-t0-s1", 200, 0.99)],
                            "finished": [{**run_row("s-t0-s1", "grokked"), "steps_run": 200}]})
    first.write_rows("t0", {"metrics": [metric_row("s-t0-s2", 300, 0.96),
                                        metric_row("s-t0-s3", 300, 0.6)]})
    stopped.status = quiet.status = "TERMINATED"  # what Tune's cleanup does to stopped trials
    first.on_experiment_end([stopped, quiet])
    runs = read_runs(sweep).set_index("run_id")
    # t1 wrote no step in this session: no row. The ended run keeps its own.
    assert sorted(runs.index) == ["s-t0-s1", "s-t0-s2", "s-t0-s3"]
    assert list(runs["status"]) == ["grokked", "interrupted", "interrupted"]
    assert list(runs["steps_run"]) == [200, 300, 300]
    assert runs.loc["s-t0-s2", "train.seed"] == 2 and runs.loc["s-t0-s3", "trial_id"] == "t0"
    assert runs.loc["s-t0-s2", "git_commit"] == git_commit()
    second = ParquetCallback(sweep, "s", total=2, live=False)  # the --resume session
    second.write_rows("t0", {"finished": [{**run_row("s-t0-s2", "grokked"), "steps_run": 400}]})
    second.close()
    assert read_runs(sweep).set_index("run_id").loc["s-t0-s2", "status"] == "grokked"
