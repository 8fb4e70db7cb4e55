"""The events of a run, defined once: fit step, grok steps, collapse onset, final status.

Definitions (the README and docs/statistics.md repeat them):

- fit step: first evaluation with train accuracy >= ``train.fit_threshold`` (default 0.99).
- grok step at theta: first evaluation with test accuracy >= theta; recorded at 0.95, 0.99 and
  ``train.grok_threshold`` (the one that may stop a run).
- collapse onset: first evaluation, from the fit step on, where D_eff (of the last hidden
  representation) falls below ``geometry.collapse_fraction`` times its running maximum, the
  running maximum also starting at the fit step. Early evaluations are start-up transients
  (D_eff of a freshly initialised network jumps around): counting from step 0 made the onset
  fire at the first evaluations of every run.

Accuracies are k / n computed in float32, so 19/20 arrives as 0.94999999: every comparison with
a threshold goes through :func:`reached`, which allows ``ACC_EPS`` (a real accuracy difference is
at least 1 / n_test, above 1e-5 for every table sweepgrok builds, far above 1e-6).

Two implementations share those comparisons: :class:`RunTracker`, updated at each evaluation by
the trainer and the search's progress, and :func:`run_events`, the vectorised version over a
whole metrics/ table that the statistics use. A test runs random curves through both.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from sweepgrok.config.thresholds import GROK_STEP_COLUMNS, GROK_THRESHOLDS, tag
from sweepgrok.config.trial import Config, GeometryConfig, TrainConfig, flatten

FIT_THRESHOLD: float = TrainConfig.model_fields["fit_threshold"].default
"""Train accuracy that defines the fit step (the config's default)."""
COLLAPSE_FRACTION: float = GeometryConfig.model_fields["collapse_fraction"].default
"""Collapse onset: D_eff below this fraction of its running maximum (the config's default)."""
ACC_EPS = 1e-6
"""Tolerance of an accuracy comparison (float32 rounding of k / n)."""

A = TypeVar("A", float, np.ndarray, pd.Series)


def reached(accuracy: A, threshold: float) -> A:
    """accuracy >= threshold, allowing float32 rounding (NaN never reaches)."""
    return accuracy >= threshold - ACC_EPS  # type: ignore[return-value]


def collapsed(deff: A, running_max: A, fraction: float) -> A:
    """D_eff below `fraction` of its running maximum (NaN never collapses)."""
    return deff < fraction * running_max  # type: ignore[return-value]


# ---------------------------------------------------------------- incremental (one run)


@dataclass
class RunTracker:
    """What one run has reached so far; updated at every evaluation."""

    run_id: str
    grok_threshold: float
    fit_threshold: float
    collapse_fraction: float
    fit_step: int | None = None
    grok_step: int | None = None
    # One field per GROK_STEP_COLUMNS entry (checkpoints store these names; a test checks them).
    grok_step_95: int | None = None
    grok_step_99: int | None = None
    collapse_step: int | None = None
    peak_test_acc: float = 0.0
    deff_max: float = 0.0
    last: dict[str, Any] = field(default_factory=dict)

    def update(self, step: int, train_acc: float, test_acc: float, deff: float | None) -> None:
        """Record one evaluation."""
        if self.fit_step is None and reached(train_acc, self.fit_threshold):
            self.fit_step = step
        for column, theta in GROK_STEP_COLUMNS.items():
            if getattr(self, column) is None and reached(test_acc, theta):
                setattr(self, column, step)
        if self.grok_step is None and reached(test_acc, self.grok_threshold):
            self.grok_step = step
        self.peak_test_acc = max(self.peak_test_acc, test_acc)
        if self.fit_step is not None and deff is not None and math.isfinite(deff):
            self.deff_max = max(self.deff_max, deff)
            fraction = self.collapse_fraction
            if self.collapse_step is None and collapsed(deff, self.deff_max, fraction):
                self.collapse_step = step
        self.last = {"step": step, "train_acc": train_acc, "test_acc": test_acc}

    @classmethod
    def for_config(cls, run_id: str, cfg: Config) -> RunTracker:
        """The tracker of a run of `cfg`: its thresholds and collapse fraction."""
        t = cfg.train
        return cls(run_id, t.grok_threshold, t.fit_threshold, cfg.geometry.collapse_fraction)

    @property
    def grokked(self) -> bool:
        return self.grok_step is not None

    def state(self) -> dict[str, Any]:
        """Plain dict for checkpoints."""
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RunTracker:
        return cls(**state)


NEVER_GROKS = ("diverged", "failed")
"""Statuses of a run that stopped and can never grok: censored at its budget, never where it
stopped (the statistics and the search's objective read them so)."""
GROKKED_STATUSES = ("grokked", "completed")
"""Statuses of a run that ended having grokked (at train.grok_threshold)."""


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
    censored = status in ("censored", *NEVER_GROKS) and not tracker.grokked
    gap = None
    if tracker.grok_step is not None and tracker.collapse_step is not None:
        gap = tracker.grok_step - tracker.collapse_step
    return {
        **flatten(cfg),
        "run_id": tracker.run_id,
        "status": status,
        "fit_step": tracker.fit_step,
        "grok_step": tracker.grok_step,
        **{column: getattr(tracker, column) for column in GROK_STEP_COLUMNS},
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


# ---------------------------------------------------------------- vectorised (a metrics table)


def _first_step(steps: np.ndarray, codes: np.ndarray, mask: pd.Series, n: int) -> pd.Series:
    """Per run code 0..n-1, the smallest step where `mask` holds (NA where it never does)."""
    hit = mask.fillna(False).to_numpy(bool)
    first = pd.Series(steps[hit]).groupby(codes[hit]).min()
    return first.reindex(range(n)).astype("Int64")


def _in_step_order(metrics: pd.DataFrame, codes: np.ndarray) -> pd.DataFrame:
    # The running maximum of D_eff needs each run's rows in step order. The readers sort by
    # (run_id, step); other frames (pd.read_parquet of a folder) are sorted here, once.
    steps = metrics["step"].to_numpy()
    dc, ds = np.diff(codes), np.diff(steps)
    if bool(np.all((dc > 0) | ((dc == 0) & (ds >= 0)))):
        return metrics
    return metrics.iloc[np.lexsort((steps, codes))]


def _collapse_steps(
    metrics: pd.DataFrame, codes: np.ndarray, fit: pd.Series, fraction: float
) -> pd.Series:
    """Collapse onset per run code, looked for from the run's fit step on."""
    n, steps = len(fit), metrics["step"].to_numpy()
    deff = metrics.get("deff")
    if deff is None or not deff.notna().any():
        return pd.Series(pd.NA, index=range(n), dtype="Int64")
    fit_of_row = fit.to_numpy(dtype=float, na_value=np.inf)[codes]
    # Before the fit step D_eff is NaN here: it neither seeds the running max nor collapses.
    deff = deff.where(steps >= fit_of_row)
    running = deff.groupby(codes).cummax()  # cummax skips NaN; NaN < x is False
    return _first_step(steps, codes, collapsed(deff, running, fraction), n)


def run_events(
    metrics: pd.DataFrame,
    *,
    fit_threshold: float = FIT_THRESHOLD,
    grok_thresholds: tuple[float, ...] | list[float] = GROK_THRESHOLDS,
    collapse_fraction: float = COLLAPSE_FRACTION,
) -> pd.DataFrame:
    """Per-run events from metrics/ rows, indexed by run_id (vectorised groupbys, no row loop).

    Columns: steps_run, peak_test_acc, fit_step, grok_step_<t> per theta, collapse_step.
    Exact duplicate (run_id, step) rows cannot change a result (every column is a min or max
    over a run); conflicting ones are resolved by the readers, which keep the last write.
    """
    # Group by integer codes: one factorize instead of hashing the run_id strings per groupby.
    codes, ids = pd.factorize(metrics["run_id"], sort=True)
    ordered = _in_step_order(metrics, codes)
    if ordered is not metrics:
        metrics = ordered
        codes, ids = pd.factorize(metrics["run_id"], sort=True)
    n, steps = len(ids), metrics["step"].to_numpy()
    out = pd.DataFrame(
        {
            "steps_run": metrics["step"].groupby(codes).max().astype("Int64"),
            "peak_test_acc": metrics["test_acc"].groupby(codes).max(),
        }
    )
    out["fit_step"] = _first_step(steps, codes, reached(metrics["train_acc"], fit_threshold), n)
    for theta in grok_thresholds:
        mask = reached(metrics["test_acc"], theta)
        out[f"grok_step_{tag(theta)}"] = _first_step(steps, codes, mask, n)
    out["collapse_step"] = _collapse_steps(metrics, codes, out["fit_step"], collapse_fraction)
    out.index = pd.Index(ids, name="run_id")
    return out
