"""Tune reuses a finished trial's worker for the next trial; a worker that dies meanwhile must
cost that next trial a retry, not the trial.

Ray Tune 2.60 (pinned: pyproject.toml) starts a trial on a reused worker by resetting it. When
the worker died after its previous trial ended (killed, out of memory, its node lost), Tune
hears of it twice: the worker's death (``_actor_failed``: the pending trial is marked RUNNING
and retried, going back to PENDING) and the failed reset (``_trial_task_failure``). The second
finds the trial PENDING, and ``_process_trial_failure`` retries only RUNNING trials: the trial
errors at once, whatever ``max_failures`` says, and the sweep ends with a failed trial for
``--resume`` to run again. (Were the reset's failure heard first, the trial would also error,
and stay marked as resetting.) ``retry_failed_resets`` counts one death once: a failed reset
of a trial already retried is dropped; one heard first is handled as ``_actor_failed`` does.

A fresh worker per trial would avoid the reset; why sweepgrok reuses them instead:
``sweepgrok.tune.grid.REUSE_ACTORS``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ray.tune.execution import tune_controller
from ray.tune.experiment import Trial

_PATCHED = "_sweepgrok_retries_failed_resets"


def counting_each_death_once(original: Callable[..., Any]) -> Callable[..., None]:
    """``TuneController._process_trial_failure`` wrapped: a failed reset of a PENDING trial is
    dropped when the worker's death already retried the trial (it no longer holds that
    worker), else handled as ``_actor_failed`` handles a pending trial's failure."""

    def process_trial_failure(self: Any, trial: Trial, exception: Exception) -> None:
        if trial.status == Trial.PENDING and trial in self._resetting_trials:
            self._resetting_trials.discard(trial)  # the reset ended (its callback never runs)
            if trial not in self._trial_to_actor:
                return  # the worker's death was heard first: the trial is already retried
            self._set_trial_status(trial, Trial.RUNNING)
            if trial in self._staged_trials:
                self._unstage_trial_with_resources(trial)
        original(self, trial, exception)

    return process_trial_failure


def retry_failed_resets() -> None:
    """Patch Tune's controller in this driver process with counting_each_death_once
    (idempotent)."""
    controller = tune_controller.TuneController
    if not getattr(controller, _PATCHED, False):
        wrapped = counting_each_death_once(controller._process_trial_failure)
        setattr(controller, "_process_trial_failure", wrapped)  # noqa: B010 (mypy: a method)
        setattr(controller, _PATCHED, True)
