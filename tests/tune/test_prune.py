"""tune/prune.py without Ray: a checkpoint goes only once a saved snapshot no longer needs it,
and what was deleted is logged (INFO summary, DEBUG per scan)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from sweepgrok.tune.prune import CheckpointPruner


def checkpoint(trial: Path, n: int) -> Path:
    path = trial / f"checkpoint_{n:06d}"
    path.mkdir(parents=True)
    return path


def snapshot(tune_dir: Path, ns: int) -> None:
    """An experiment-state file written at `ns` (set explicitly: no waiting on the clock)."""
    state = tune_dir / "experiment_state-x.json"
    state.write_text("{}")
    os.utime(state, ns=(ns, ns))


@pytest.fixture
def log(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> pytest.LogCaptureFixture:
    """caplog for the sweepgrok logger (the CLI stops it propagating once it installs its own)."""
    monkeypatch.setattr(logging.getLogger("sweepgrok"), "propagate", True)
    return caplog


def test_prunes_only_what_no_saved_snapshot_refers_to(
    tmp_path: Path, log: pytest.LogCaptureFixture
) -> None:
    tune_dir, trial = tmp_path / "tune", tmp_path / "tune" / "t1"
    pruner = CheckpointPruner(tune_dir)
    first, second = checkpoint(trial, 0), checkpoint(trial, 1)
    pruner.on_checkpoint(first)
    pruner.on_checkpoint(second)
    snapshot(tune_dir, time.time_ns() - 10**9)  # older than both: both may still be needed
    pruner.prune(force=True)
    assert first.exists() and second.exists() and pruner.pruned == 0
    snapshot(tune_dir, time.time_ns() + 10**9)  # newer than both: only the newest is needed
    with log.at_level(logging.DEBUG, logger="sweepgrok"):
        pruner.prune(force=True)
        pruner.report()
    assert not first.exists() and second.exists()
    debug = [r for r in log.records if r.levelno == logging.DEBUG]
    info = [r for r in log.records if r.levelno == logging.INFO]
    assert len(debug) == 1 and "t1" in debug[0].getMessage()
    assert len(info) == 1 and "pruned 1 trial checkpoint" in info[0].getMessage()
    assert pruner.pruned == 0  # reported once
    log.clear()
    pruner.report()
    assert log.records == []


def test_a_completed_trial_loses_its_checkpoints_after_the_next_snapshot(tmp_path: Path) -> None:
    tune_dir, trial = tmp_path / "tune", tmp_path / "tune" / "t2"
    pruner = CheckpointPruner(tune_dir)
    ckpt = checkpoint(trial, 0)
    pruner.on_checkpoint(ckpt)
    pruner.on_complete(trial)
    snapshot(tune_dir, time.time_ns() + 10**9)
    pruner.prune(force=True)
    assert not ckpt.exists() and pruner.pruned == 1
