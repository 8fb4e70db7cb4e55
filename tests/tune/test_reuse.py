"""sweepgrok.tune.reuse: a reused worker's death costs the next trial one retry, whichever of
Tune's two reports of it comes first. A stand-in controller holds the state Tune's own keeps;
tests/e2e/test_tune_e2e.py kills a real worker."""

from __future__ import annotations

from typing import Any

from ray.tune.execution.tune_controller import TuneController
from ray.tune.experiment import Trial

from sweepgrok.tune.reuse import counting_each_death_once, retry_failed_resets


class Controller:
    """What the wrapper reads and changes of a TuneController; the wrapped method records the
    status it sees."""

    def __init__(self, trial: Any, resetting: bool, holds_worker: bool, staged: bool) -> None:
        self._resetting_trials = {trial} if resetting else set()
        self._trial_to_actor = {trial: "worker"} if holds_worker else {}
        self._staged_trials = {trial} if staged else set()
        self.failures: list[str] = []
        self.unstaged: list[Any] = []

    def _set_trial_status(self, trial: Any, status: str) -> None:
        trial.status = status

    def _unstage_trial_with_resources(self, trial: Any) -> None:
        self._staged_trials.discard(trial)
        self.unstaged.append(trial)


class StandIn:
    def __init__(self, status: str) -> None:
        self.status = status


def process(ctl: Controller, trial: StandIn) -> None:
    def original(self: Controller, t: Any, exc: Exception) -> None:
        self.failures.append(t.status)

    counting_each_death_once(original)(ctl, trial, RuntimeError("worker died"))  # type: ignore[arg-type]


def test_a_failed_reset_after_the_death_was_retried_is_dropped() -> None:
    trial = StandIn(Trial.PENDING)  # retried: back in the queue, its dead worker let go
    ctl = Controller(trial, resetting=True, holds_worker=False, staged=False)
    process(ctl, trial)
    assert ctl.failures == [] and trial.status == Trial.PENDING
    assert ctl._resetting_trials == set()  # else Tune would wait for that reset forever


def test_a_failed_reset_heard_first_is_a_failure_of_a_running_trial() -> None:
    trial = StandIn(Trial.PENDING)
    ctl = Controller(trial, resetting=True, holds_worker=True, staged=True)
    process(ctl, trial)
    assert ctl.failures == [Trial.RUNNING]  # Tune retries a RUNNING trial up to max_failures
    assert ctl._resetting_trials == set() and ctl.unstaged == [trial]


def test_other_failures_reach_tune_unchanged() -> None:
    for status, resetting in ((Trial.RUNNING, False), (Trial.PENDING, False),
                              (Trial.RUNNING, True)):
        trial = StandIn(status)
        ctl = Controller(trial, resetting=resetting, holds_worker=True, staged=True)
        process(ctl, trial)
        assert ctl.failures == [status] and ctl.unstaged == []


def test_the_patch_is_installed_once() -> None:
    retry_failed_resets()
    patched = TuneController._process_trial_failure
    retry_failed_resets()
    assert TuneController._process_trial_failure is patched
    assert patched.__qualname__.startswith("counting_each_death_once")
