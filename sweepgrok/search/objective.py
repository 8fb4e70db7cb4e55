"""The objective of an Optuna search, as pure functions: run values, a running trial's lower
bound (the exact time cap), compute saved. No optuna or ray import: this runs inside Ray trials
as well as in the driver (the study itself lives in ``sweepgrok.search.study``).

Objective of one run (at threshold theta of ``search.metric``, budget B = train.max_steps)::

    grokked            ->  its grok step g                         (g <= steps_run <= B)
    censored at step c ->  c + B * (theta - peak_test_acc)          (> c; c = B, or the cap)
    diverged / failed  ->  B * (1 + theta)                          (the worst finite value)

A run censored at its budget scores ``B * (1 + theta - peak)``: above every grokked run, and a
run that came closer to grokking (higher peak test accuracy) ranks better. A run stopped by the
time cap at step c scores above c, hence above the best value it could not beat, but it is not
pushed to the budget: TPE / GP still see that it was a near miss. Never NaN or inf (Optuna
drops such trials as failed). With ``seeds_per_trial`` k, a trial's objective is the median
over its k runs (``statistics.median``: the mean of the two middle values when k is even), or
with ``search.objective: km_median`` the Kaplan-Meier median of their grok steps: a grokked run
is an event at its grok step, a censored run censored at its last step, a diverged or failed
one censored at the budget (it never groks); where fewer than half grokked (no KM median) the
trial scores ``B + median(run values)``, past every trial that has one. A censored run never
scores better than had it grokked at the step where it was censored, and it keeps its place in
the risk set instead of being dropped (a median over the grokked runs only would let a trial
with one lucky seed win).

Exact time cap (minimizing): while a trial runs, every run's value is bounded below: a finished
run's value is known, an unfinished one will be > the current step s (it groks later than s, or
is censored at c >= s with value > c). The median is monotone in each value, so
``median(lower bounds)`` bounds the trial's objective. Once it reaches ``best * margin`` (best =
the lowest objective of any finished trial) the trial cannot win: its unfinished runs are
stopped at s and recorded censored there (``EvalReport.stop``). No trial that could still win is
ever stopped; ASHA / median stopping are not used (they rank on accuracy, which sits at chance
until a run groks, and would kill the runs that grok late but fastest in the end).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sweepgrok.train.events import NEVER_GROKS, reached

MEDIAN, KM_MEDIAN = "median", "km_median"
"""The two ways a trial's runs make its objective (SearchSection.objective)."""

OBJECTIVE = "objective"
"""Result key Tune and Optuna optimize (min or max of the objective defined above)."""
FINAL = "objective_final"
"""Result key: true once every run of the trial has ended (the objective is exact)."""


# ---- the censored objective -------------------------------------------------------------------


def worst_value(budget: int, theta: float) -> float:
    """The value of a diverged or failed run: worse than any censored one."""
    return float(budget) * (1.0 + theta)


def _finite(x: Any, default: float) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return default
    return v if math.isfinite(v) else default


def censored_value(steps: int, peak_test_acc: Any, budget: int, theta: float) -> float:
    """A run censored at `steps`: steps + B * (theta - peak), peak clipped to [0, theta]."""
    peak = min(max(_finite(peak_test_acc, 0.0), 0.0), theta)
    return float(steps) + float(budget) * (theta - peak)


def run_time(row: Mapping[str, Any], metric: str, budget: int) -> tuple[float, bool]:
    """(time, censored) of one finished run: its grok step, else censored at its last step (a
    diverged or failed run at the budget: it can never grok)."""
    if row.get("status") in NEVER_GROKS:
        return float(budget), True
    grok = row.get(metric)
    if grok is not None and math.isfinite(float(grok)):
        return float(grok), False
    return _finite(row.get("steps_run"), float(budget)), True


def run_value(row: Mapping[str, Any], metric: str, theta: float, budget: int) -> float:
    """The objective of one finished run from its runs/ row (see the module docstring)."""
    status = row.get("status")
    if status in NEVER_GROKS:
        return worst_value(budget, theta)
    grok = row.get(metric)
    if grok is not None and math.isfinite(float(grok)):
        return float(grok)
    steps = int(_finite(row.get("steps_run"), float(budget)))
    return censored_value(steps, row.get("peak_test_acc"), budget, theta)


def trial_value(values: Sequence[float]) -> float:
    """A trial's objective: the median over its runs (one value per init seed)."""
    return float(statistics.median(values))


KMMedian = Callable[[Any, Any], float]
"""sweepgrok.analysis.survival.km_median (passed in: analysis sits above this layer)."""


def km_trial_value(
    km: KMMedian,
    times: Sequence[float],
    censored: Sequence[bool],
    values: Sequence[float],
    budget: int,
) -> float:
    """A trial's objective under ``km_median``: the KM median of its runs' (time, censored),
    else (under half grokked) the budget plus the median of their run values."""
    import numpy as np

    median = km(np.asarray(times, float), np.asarray(censored, bool))
    return median if math.isfinite(median) else float(budget) + trial_value(values)


@dataclass
class _Run:
    first_at_theta: int | None = None
    peak: float = 0.0
    value: float | None = None  # set when the run has ended
    time: float | None = None  # its grok step, or the step it was censored at (once ended)
    censored: bool = False


@dataclass
class TrialProgress:
    """The objective of one running trial, evaluation by evaluation (runs inside the trial).

    Fed with each EvalReport's metric rows (active runs) and finished rows (runs that ended).
    """

    run_ids: list[str]
    metric: str
    theta: float
    budget: int
    runs: dict[str, _Run] = field(default_factory=dict)
    capped_at: int | None = None
    objective: str = MEDIAN
    """MEDIAN or KM_MEDIAN (see the module docstring)."""
    km: KMMedian | None = None
    """The KM median function KM_MEDIAN needs (sweepgrok.analysis.survival.km_median)."""

    def __post_init__(self) -> None:
        for rid in self.run_ids:
            self.runs.setdefault(rid, _Run())

    def observe(self, metrics: Iterable[Mapping[str, Any]]) -> None:
        """One evaluation's metric rows: first step at theta and peak test accuracy."""
        for row in metrics:
            run = self.runs.get(str(row["run_id"]))
            if run is None:
                continue
            acc = _finite(row.get("test_acc"), 0.0)
            run.peak = max(run.peak, acc)
            if run.first_at_theta is None and reached(acc, self.theta):
                run.first_at_theta = int(row["step"])

    def finish(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Run rows of runs that ended: their values are final."""
        for row in rows:
            run = self.runs.get(str(row["run_id"]))
            if run is not None:
                run.value = run_value(row, self.metric, self.theta, self.budget)
                run.time, run.censored = run_time(row, self.metric, self.budget)

    @property
    def done(self) -> bool:
        return all(r.value is not None for r in self.runs.values())

    def _bound(self, run: _Run, step: int) -> float:
        if run.value is not None:
            return run.value
        if run.first_at_theta is not None:  # grokked at the metric's theta, still training
            return float(run.first_at_theta)
        return float(step)  # it will grok after `step`, or be censored at c >= step

    def lower_bound(self, step: int) -> float:
        """A lower bound on the trial's objective; exact once every run has ended. Under
        km_median an open run counts as an event at its bound: its real outcome (an event at or
        after it, or a censoring) can only move the KM median later or leave it undefined."""
        runs = list(self.runs.values())
        bounds = [self._bound(r, step) for r in runs]
        if self.objective != KM_MEDIAN:
            return trial_value(bounds)
        times = [r.time if r.time is not None else b for r, b in zip(runs, bounds, strict=True)]
        censored = [r.censored if r.value is not None else False for r in runs]
        if self.km is None:
            raise ValueError("objective km_median needs its km function")
        return km_trial_value(self.km, times, censored, bounds, self.budget)

    def to_cap(self, step: int, best: float | None, margin: float) -> list[str]:
        """Runs to stop now: those still open, if the trial can no longer beat best * margin."""
        if best is None or not math.isfinite(best) or self.done:
            return []
        if self.lower_bound(step) < best * margin:
            return []
        self.capped_at = step
        return [rid for rid, r in self.runs.items() if r.value is None and r.first_at_theta is None]

    def state(self) -> dict[str, Any]:
        """Plain dict for the trial checkpoint (a retried trial resumes its bookkeeping)."""
        return {
            "runs": {k: vars(v) for k, v in self.runs.items()},
            "capped_at": self.capped_at,
        }

    def load(self, state: Mapping[str, Any]) -> None:
        self.runs = {k: _Run(**v) for k, v in state["runs"].items()}
        self.capped_at = state.get("capped_at")


# ---- compute accounting ------------------------------------------------------------------------


def is_capped(row: Mapping[str, Any]) -> bool:
    """A run the time cap stopped: censored before its budget."""
    steps, budget = row.get("steps_run"), row.get("train.max_steps")
    if row.get("status") != "censored" or steps is None or budget is None:
        return False
    return int(steps) < int(budget)


def compute_saved(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Steps run vs steps the runs would have run without the time cap.

    A capped run counts its whole budget in the counterfactual (an upper bound: it might have
    grokked earlier and stopped); every other run counts what it ran. One run = one init seed.
    """
    run = without = capped = n = 0
    for row in rows:
        n += 1
        steps = int(_finite(row.get("steps_run"), 0.0))
        run += steps
        if is_capped(row):
            capped += 1
            without += int(row["train.max_steps"])
        else:
            without += steps
    saved = 1.0 - run / without if without else 0.0
    return {
        "runs": n,
        "capped_runs": capped,
        "steps_run": run,
        "steps_without_cap": without,
        "saved_fraction": round(saved, 4),
    }
