"""sweepgrok.search.objective's km_median objective: hand-computed values, the rule that a
censored run never scores better than had it grokked where it was censored, and the time cap's
lower bound under it."""

from __future__ import annotations

import itertools
import random

import pytest

from sweepgrok.analysis.survival import km_median
from sweepgrok.search.objective import KM_MEDIAN, TrialProgress, km_trial_value, run_time

B = 2000


def km(times: list[float], censored: list[bool], values: list[float] | None = None) -> float:
    return km_trial_value(km_median, times, censored, values or times, B)


def test_km_objective_by_hand() -> None:
    # Two events: S = 0.5 from the first to the second, the median their midpoint (R survfit).
    assert km([400, 600], [False, False]) == 500.0
    # An event at 400 and a run censored at 450: S = 0.5 to the last time seen, 450.
    assert km([400, 450], [False, True]) == 425.0
    # 3 runs, one censored at 300 before both events: S drops 1 -> 1/2 at 500 -> 0 at 700.
    assert km([300, 500, 700], [True, False, False]) == 600.0
    # Under half grokked: past the budget, by the median of the run values.
    assert km([400, 900, 900], [False, True, True], [400, 2500, 2600]) == B + 2500


def test_a_censored_run_never_scores_better_than_grokking_where_it_was_censored() -> None:
    rng = random.Random(0)
    for _ in range(300):
        k = rng.randint(2, 5)
        times = [float(rng.randrange(100, 2000, 100)) for _ in range(k)]
        censored = [rng.random() < 0.4 for _ in range(k)]
        for i in range(k):
            if censored[i]:
                grokked = [*censored[:i], False, *censored[i + 1 :]]
                assert km(times, censored) >= km(times, grokked), (times, censored, i)
    # A median over the grokked runs alone would have said 400 here.
    assert km([400, 450, 450], [False, True, True], [400, 470, 470]) > 400


def test_finished_runs_give_time_and_censoring() -> None:
    assert run_time({"status": "grokked", "grok_step": 700.0}, "grok_step", B) == (700.0, False)
    assert run_time({"status": "censored", "steps_run": 350}, "grok_step", B) == (350.0, True)
    assert run_time({"status": "diverged", "steps_run": 50}, "grok_step", B) == (B, True)


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_the_lower_bound_never_exceeds_the_final_km_objective(order: tuple[int, ...]) -> None:
    """Runs end in every order; at each step the bound is <= the final value."""
    ends = {"a": ("grokked", 500), "b": ("censored", 800), "c": ("grokked", 1200)}
    progress = TrialProgress(list(ends), "grok_step", 0.95, B, objective=KM_MEDIAN, km=km_median)
    names = [list(ends)[i] for i in order]
    bounds = []
    for step in range(100, 1300, 100):
        for name in names:
            status, at = ends[name]
            if at == step:
                row = {"run_id": name, "status": status, "steps_run": at, "peak_test_acc": 0.5,
                       "grok_step": float(at) if status == "grokked" else None}  # fmt: skip
                progress.finish([row])
        bounds.append(progress.lower_bound(step))
    final = km([500, 800, 1200], [False, True, False])
    assert final == 1200.0 and progress.done
    assert all(b <= final for b in bounds) and bounds[-1] == final
