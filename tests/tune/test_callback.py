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
