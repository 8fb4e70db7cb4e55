"""A trainer for Ray tests whose trials each crash once, mid-run, after their first checkpoint.

Handed to ``launch_grid(train_fn=...)`` (the seam the search has too): it wraps the real
trainer's ``on_eval`` hook, so production code holds no failure injection. Ray workers cannot
import this module (tests/ is not a package on their path), so ``ship_by_value`` makes
cloudpickle send it with the function.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PLANNED = "planned failure"
"""In the error of every injected crash (what a failed run's row shows)."""


def ship_by_value() -> None:
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def fail_once(marks: Path) -> Callable[..., Any]:
    """sweepgrok.train.trainer.train, except each trial raises once (a marker file per trial in
    `marks`), right after reporting the evaluation that follows its first checkpoint: its
    retry resumes from that checkpoint and re-emits the evaluation's rows."""
    ship_by_value()
    return functools.partial(_train_failing_once, marks=marks)


def _train_failing_once(cfg: Any, sink: Any = None, *, marks: Path, on_eval: Any, **kw: Any) -> Any:
    from sweepgrok.train.trainer import train

    def report_then_crash(report: Any) -> None:
        on_eval(report)
        _maybe_crash(on_eval, marks)

    return train(cfg, sink, on_eval=report_then_crash, **kw)


def _maybe_crash(reporter: Any, marks: Path) -> None:
    # The Reporter checkpoints at every `every`-th evaluation while runs are active, so the
    # evaluation after its first checkpoint is number every + 1 (if any run is still active).
    if reporter.evals != reporter.every + 1 or reporter.active <= 0:
        return
    marker = marks / f"failed-{reporter.trial_id}"
    if marker.exists():
        return
    marks.mkdir(parents=True, exist_ok=True)
    marker.write_text("1")
    raise RuntimeError(f"{PLANNED} of trial {reporter.trial_id}")
