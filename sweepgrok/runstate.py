"""Per-run bookkeeping at evaluations: fit step, grok steps, collapse onset, final status.

Definitions: fit step = first evaluation with train accuracy >= train.fit_threshold;
grok step at theta = first evaluation with test accuracy >= theta (recorded at 0.95, 0.99 and
train.grok_threshold); collapse onset = first evaluation where D_eff (of the last hidden
representation) falls below geometry.collapse_fraction times its running maximum.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from sweepgrok.config import Config, flatten


@dataclass
class RunTracker:
    """What one run has reached so far; updated at every evaluation."""

    run_id: str
    grok_threshold: float
    fit_threshold: float
    collapse_fraction: float
    fit_step: int | None = None
    grok_step: int | None = None
    grok_step_95: int | None = None
    grok_step_99: int | None = None
    collapse_step: int | None = None
    peak_test_acc: float = 0.0
    deff_max: float = 0.0
    last: dict[str, Any] = field(default_factory=dict)

    def update(self, step: int, train_acc: float, test_acc: float, deff: float | None) -> None:
        """Record one evaluation."""
        if self.fit_step is None and train_acc >= self.fit_threshold:
            self.fit_step = step
        if self.grok_step_95 is None and test_acc >= 0.95:
            self.grok_step_95 = step
        if self.grok_step_99 is None and test_acc >= 0.99:
            self.grok_step_99 = step
        if self.grok_step is None and test_acc >= self.grok_threshold:
            self.grok_step = step
        self.peak_test_acc = max(self.peak_test_acc, test_acc)
        if deff is not None and math.isfinite(deff):
            self.deff_max = max(self.deff_max, deff)
            if self.collapse_step is None and deff < self.collapse_fraction * self.deff_max:
                self.collapse_step = step
        self.last = {"step": step, "train_acc": train_acc, "test_acc": test_acc}

    @property
    def grokked(self) -> bool:
        return self.grok_step is not None

    def state(self) -> dict[str, Any]:
        """Plain dict for checkpoints."""
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RunTracker:
        return cls(**state)


def end_status(
    tracker: RunTracker, step: int, max_steps: int, diverged: bool, stop_after_grok: bool
) -> str | None:
    """The status a run ends with after the evaluation at `step`, or None if it goes on."""
    if diverged:
        return "diverged"
    if tracker.grokked and stop_after_grok:
        return "grokked"
    if step >= max_steps:
        return "completed" if tracker.grokked else "censored"
    return None


def run_row(
    cfg: Config,
    tracker: RunTracker,
    status: str,
    steps_run: int,
    wall_time: float,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The runs/ row: config keys by dotted path, outcome, provenance (in `extra`)."""
    censored = status in ("censored", "diverged", "failed") and not tracker.grokked
    gap = None
    if tracker.grok_step is not None and tracker.collapse_step is not None:
        gap = tracker.grok_step - tracker.collapse_step
    return {
        **flatten(cfg),
        "run_id": tracker.run_id,
        "status": status,
        "fit_step": tracker.fit_step,
        "grok_step": tracker.grok_step,
        "grok_step_95": tracker.grok_step_95,
        "grok_step_99": tracker.grok_step_99,
        "censored": censored,
        "steps_run": steps_run,
        "final_train_acc": tracker.last.get("train_acc"),
        "final_test_acc": tracker.last.get("test_acc"),
        "peak_test_acc": tracker.peak_test_acc,
        "collapse_step": tracker.collapse_step,
        "collapse_to_grok": gap,
        "wall_time": wall_time,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        **extra,
    }
