"""The sweep driver around Tune's fit: it works in its sweep folder (its own working directory
may vanish: a Ray job's unpacked working_dir) and counts trials from its callback, so Tune
failing after every trial ended does not make a finished sweep fail."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sweepgrok.tune.callback import ParquetCallback
from sweepgrok.tune.grid import Outcome, run_tuner, working_in


class EndsThenFails:
    """A stand-in Tuner: the experiment ends with the given trial statuses, then fit raises
    (as Tune's ExperimentAnalysis did once the driver's working directory was gone)."""

    def __init__(self, callback: ParquetCallback, statuses: list[str]) -> None:
        self.callback, self.statuses = callback, statuses
        self.cwd = ""

    def fit(self) -> Any:
        self.cwd = os.getcwd()
        self.callback.on_experiment_end([SimpleNamespace(status=s) for s in self.statuses])
        raise FileNotFoundError(2, "No such file or directory")


def test_failure_after_every_trial_ended_is_not_a_failed_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    callback = ParquetCallback("sweep", "s", total=2, live=False)  # relative: resolved now
    tuner = EndsThenFails(callback, ["TERMINATED", "ERROR"])
    outcome = run_tuner(tuner, 2, callback)  # type: ignore[arg-type]
    assert outcome == Outcome(total=2, terminated=1, errored=1)
    assert tuner.cwd == str(tmp_path / "sweep")  # the fit ran in the sweep folder
    assert os.getcwd() == str(tmp_path)  # and the driver went back afterwards


def test_failure_before_the_trials_ended_is_raised(tmp_path: Path) -> None:
    callback = ParquetCallback(tmp_path / "sweep", "s", total=2, live=False)
    tuner = EndsThenFails(callback, ["TERMINATED", "RUNNING"])
    with pytest.raises(FileNotFoundError):
        run_tuner(tuner, 2, callback)  # type: ignore[arg-type]


def test_working_in_survives_a_vanished_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # restored after the test
    gone = Path(tempfile.mkdtemp(dir=tmp_path))
    os.chdir(gone)
    gone.rmdir()  # what Ray's re-unpacking of a job's working_dir does to its driver
    with pytest.raises(FileNotFoundError):  # how Tune's path listing failed after the fit
        os.path.relpath("a/b", start="a")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    with working_in(sweep):
        assert os.path.relpath("a/b", start="a") == "b"
    assert os.getcwd() == str(sweep)  # nowhere to go back to: stays in the sweep folder
