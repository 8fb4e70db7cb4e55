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


USAGE_TAG_SCRIPT = """
import sys
from ray.air._internal import usage
from sweepgrok.tune.callback import ParquetCallback
from sweepgrok.tune.grid import skip_callback_usage_tag

skip_callback_usage_tag()
usage.tag_callbacks([ParquetCallback(sys.argv[1], "s", 1, live=False)])  # as Tune's fit does
print(sorted(m for m in ("mlflow", "wandb") if m in sys.modules))
"""


@pytest.mark.parametrize(("stats", "imported"), [("0", "[]"), ("1", "['mlflow', 'wandb']")])
def test_the_callback_usage_tag_imports_no_tracker_library_while_usage_stats_are_off(
    tmp_path: Path, stats: str, imported: str
) -> None:
    """Tune's fit tags its callbacks for Ray's usage statistics, importing mlflow and wandb
    (issue 41: ~1.4 s of CPU before the first trial); with the statistics off, skipped. A
    fresh process: this one may hold them already."""
    import subprocess
    import sys

    pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": stats}
    done = subprocess.run([sys.executable, "-c", USAGE_TAG_SCRIPT, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == imported
