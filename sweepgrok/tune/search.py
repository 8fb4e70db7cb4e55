"""Ray side of `sweepgrok search`: OptunaSearch on a persistent study, with an exact time cap.

Pieces (the objective and cap rules are pure functions in ``sweepgrok.search.objective``, the
study's storage and sampler in ``sweepgrok.search.study``):

- ``StudySearch``: Ray's ``OptunaSearch`` on the sweep's study. It nests the sampled dotted keys
  under the trial's ``cfg`` (the grid trainable's layout), numbers trials by their Optuna trial
  number, tells Optuna only exact objectives, and on --resume adopts the study's trials that an
  interrupted session left RUNNING (so the study ends with exactly num_samples trials);
- ``Board``: a tiny Ray actor holding the best objective so far; trials read it at each
  evaluation and stop the runs that can no longer win. An actor (not a ``tune.Stopper``)
  because stopping must happen inside the trainer, which then records the run censored at
  that step with its own run row; an actor is reachable from every node of a cluster;
- ``search_trainable``: the grid trainable's body (same helpers, rows, checkpoints), with a
  reporter that applies the cap and adds the objective to every result;
- ``SearchCallback``: the grid ParquetCallback keyed by Optuna trial number.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ray
from ray import tune
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.optuna import OptunaSearch

from sweepgrok.config.search_file import SearchSpec
from sweepgrok.config.trial import ConfigError, from_flat
from sweepgrok.search.objective import FINAL, MEDIAN, OBJECTIVE, TrialProgress, worst_value
from sweepgrok.search.study import (
    best_value,
    finished_count,
    make_sampler,
    open_storage,
    optuna_space,
    trials_in,
)
from sweepgrok.store.compact import compact_sweep
from sweepgrok.store.heartbeat import Heartbeat
from sweepgrok.trackers import TrackerSpec
from sweepgrok.tune.callback import ParquetCallback
from sweepgrok.tune.cluster import check_cluster
from sweepgrok.tune.grid import (
    REUSE_ACTORS,
    TUNE_DIR,
    run_tuner,
    start_ray,
    stop_heartbeat,
    trial_dirname,
)
from sweepgrok.tune.trainable import (
    Reporter,
    configure_trial_process,
    run_ids_for,
    run_trial,
    trial_extra,
)

log = logging.getLogger(__name__)

PROGRESS_FILE = "search_progress.json"
"""Written into each trial checkpoint beside the trainer state: the objective bookkeeping."""


def trial_stem(number: int) -> str:
    """Trial key of a search run: its Optuna trial number (stable across --resume)."""
    return f"t{number:04d}"


# ---- the best-so-far board -------------------------------------------------------------------


@ray.remote(num_cpus=0)
class Board:
    """The best finished objective (minimizing); trials offer theirs and read the best."""

    def __init__(self, best: float | None = None) -> None:
        self.value = best

    def offer(self, value: float) -> float | None:
        if math.isfinite(value) and (self.value is None or value < self.value):
            self.value = value
        return self.value

    def best(self) -> float | None:
        return self.value


# ---- the trainable ---------------------------------------------------------------------------


class _SearchReporter(Reporter):
    """The grid reporter, plus the time cap and the objective in every result."""

    def __init__(
        self,
        every: int,
        trial_id: str,
        run_ids: Sequence[str],
        progress: TrialProgress,
        board: Any,
        margin: float,
    ) -> None:
        super().__init__(every, trial_id, run_ids)
        self.progress = progress
        self.board = board
        self.margin = margin

    def _cap(self, report: Any) -> None:
        if self.board is None or self.progress.done:
            return
        best = ray.get(self.board.best.remote())  # one round trip per evaluation (~1 ms)
        # stop() before forwarding `finished`: the trainer appends each stopped run's row.
        for run_id in self.progress.to_cap(report.step, best, self.margin):
            report.stop(run_id)
        self.progress.finish(report.finished)

    def observe(self, report: Any) -> None:
        self.progress.observe(report.metrics)
        self.progress.finish(report.finished)
        self._cap(report)

    def result(self, report: Any) -> dict[str, Any]:
        value = self.progress.lower_bound(report.step)
        final = self.progress.done
        if final and self.board is not None:
            ray.get(self.board.offer.remote(value))  # lands before any later trial's check
        return {
            **super().result(report),
            OBJECTIVE: value,
            FINAL: final,
            "capped_at": self.progress.capped_at if self.progress.capped_at is not None else -1,
        }

    def save_extras(self, directory: Path) -> None:
        (directory / PROGRESS_FILE).write_text(json.dumps(self.progress.state()))


def search_trainable(config: Mapping[str, Any], board: Any = None, train_fn: Any = None) -> None:
    """One search trial: the grid trainable's flow with the search reporter.

    ``config["sweep"]`` carries the search settings (metric, theta, budget, margin) and the
    Optuna trial number; ``board`` is the Board actor (None: no time cap); ``train_fn`` stands
    in for ``sweepgrok.train.trainer.train`` (tests pass a synthetic trainer with its signature).
    """
    if train_fn is None:
        from sweepgrok.train.trainer import train as train_fn
    train = train_fn

    meta = dict(config.get("sweep") or {})
    sweep = str(meta.get("name", ""))
    budget, theta = int(meta["budget"]), float(meta["theta"])
    try:
        cfg = from_flat(config["cfg"], f"trial of search {sweep}")
    except ConfigError as err:
        # A combination of values that is invalid together: the worst value steers the sampler
        # away from it (single values were all checked before the search started).
        tune.report({OBJECTIVE: worst_value(budget, theta), FINAL: True, "invalid": str(err)})
        return
    configure_trial_process(cfg, float(meta.get("cpu", 1.0)))
    stem = trial_stem(int(meta["optuna_trial"]))
    run_ids = run_ids_for(sweep, stem, cfg)
    from sweepgrok.analysis.survival import km_median

    objective = str(meta.get("objective", MEDIAN))
    progress = TrialProgress(list(run_ids), str(meta["metric"]), theta, budget,
                             objective=objective, km=km_median)  # fmt: skip
    every = int(meta.get("checkpoint_every") or cfg.train.checkpoint_every)
    reporter = _SearchReporter(every, stem, run_ids, progress, board, float(meta["margin"]))

    def restore_progress(resume_dir: Path) -> None:
        saved = resume_dir / PROGRESS_FILE
        if saved.exists():
            progress.load(json.loads(saved.read_text()))

    run_trial(train, cfg, run_ids, sweep, reporter, trial_extra(stem), restore_progress)


# ---- the searcher ----------------------------------------------------------------------------


class StudySearch(OptunaSearch):
    """OptunaSearch on a persistent study: nested configs, adoption on resume, exact tells."""

    def __init__(self, *args: Any, adopt: Sequence[int] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._adopt = list(adopt)  # Optuna trial ids left RUNNING by an interrupted session
        self._last_step: dict[str, int] = {}

    def suggest(self, trial_id: str) -> dict | None:
        import optuna

        if trial_id not in self._ot_trials and self._adopt:
            adopted = self._adopt.pop(0)
            study: Any = self._ot_study
            self._ot_trials[trial_id] = optuna.Trial(study, adopted)
            before = study._storage.get_trial(adopted).intermediate_values
            self._last_step[trial_id] = max(before, default=0)
        params = super().suggest(trial_id)
        if params is None or not isinstance(params, dict):
            return params
        number = self._ot_trials[trial_id].number
        # Params are dotted config keys; nest them under the trainable's "cfg".
        return {"cfg": params, "sweep": {"optuna_trial": number}}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        step = int(result.get("training_iteration", 0))
        if step <= self._last_step.get(trial_id, 0) or trial_id not in self._ot_trials:
            return  # already reported in an interrupted session of this trial
        self._last_step[trial_id] = step
        super().on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        if trial_id not in self._ot_trials:
            return
        if not error and not (result or {}).get(FINAL):
            # Stopped before its objective was exact (an interrupted driver): leave the Optuna
            # trial RUNNING; the next --resume adopts and re-runs it.
            return
        ot_trial = self._ot_trials[trial_id]
        for key in ("capped_at", "invalid"):
            value = (result or {}).get(key)
            if value is not None and value != -1:
                ot_trial.set_user_attr(key, value)
        super().on_trial_complete(trial_id, result, error)


class _Keyed:
    """A Tune trial seen through its Optuna trial number (for the Parquet callback's keys)."""

    def __init__(self, trial: Any) -> None:
        self._trial = trial

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trial, name)

    @property
    def trial_id(self) -> str:
        number = (self._trial.config.get("sweep") or {}).get("optuna_trial")
        return trial_stem(int(number)) if number is not None else str(self._trial.trial_id)


class SearchCallback(ParquetCallback):
    """ParquetCallback whose run ids (failed rows included) follow the Optuna trial number."""

    def on_trial_result(
        self, iteration: int, trials: list[Any], trial: Any, result: dict, **info: Any
    ) -> None:
        super().on_trial_result(iteration, trials, _Keyed(trial), result, **info)

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        super().on_trial_error(iteration, trials, _Keyed(trial), **info)

    def row_key(self, trial: Any) -> str:
        return _Keyed(trial).trial_id


# ---- the run ---------------------------------------------------------------------------------


def zombie_trials(study: Any) -> list[int]:
    """Optuna trial ids an interrupted session left RUNNING (in trial order)."""
    from optuna.trial import TrialState

    return [t._trial_id for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))]


def settle_interrupted(study: Any, num_samples: int) -> tuple[list[int], int]:
    """Trials an interrupted session left RUNNING: re-run them, or mark the surplus failed.

    Returns (Optuna trial ids to adopt, trials still to run). WAITING (enqueued) trials are asked
    first by the sampler: they count as to be run. More orphans than trials left happens when
    --num-samples was lowered: those are marked FAIL, so the study ends at num_samples.
    """
    from optuna.trial import TrialState

    orphans = zombie_trials(study)
    remaining = max(0, num_samples - finished_count(study))
    adopt, surplus = orphans[:remaining], orphans[remaining:]
    if adopt:
        log.info("re-running %d trial(s) an interrupted session left running", len(adopt))
    for trial_id in surplus:
        study._storage.set_trial_state_values(trial_id, TrialState.FAIL)
    if surplus:
        log.info(
            "marked %d trial(s) an interrupted session left running as failed: the study "
            "reaches num_samples=%d without them",
            len(surplus),
            num_samples,
        )
    return adopt, remaining


def _meta(spec: SearchSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "cpu": spec.settings.resources.cpu,
        "checkpoint_every": spec.settings.checkpoint_every,
        "metric": spec.metric,
        "theta": spec.threshold,
        "budget": spec.budget,
        "margin": spec.time_cap_margin or 1.0,
        "objective": spec.objective,
    }


def build_searcher(spec: SearchSpec, record: Mapping[str, Any]) -> Any:
    """StudySearch on the sweep's study, limited to max_concurrent trials at once."""
    searcher = StudySearch(
        space=optuna_space(spec),
        metric=OBJECTIVE,
        mode=spec.mode,
        sampler=make_sampler(spec, trials_in(record)),
        study_name=record["study_name"],
        storage=open_storage(record),
    )
    return ConcurrencyLimiter(searcher, max_concurrent=spec.max_concurrent)


def run_search(
    spec: SearchSpec,
    sweep_dir: Path,
    record: Mapping[str, Any],
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    live: bool = True,
    train_fn: Any = None,
    verbose: bool = False,
    trackers: Sequence[TrackerSpec] = (),
    num_gpus: int | None = None,
    resume_command: str = "",
) -> dict[str, int]:
    """Run the study up to spec.num_samples trials; returns {"started": n, "errored": n,
    "interrupted": n} (interrupted: trials a Ctrl-C / SIGTERM stopped before they ended).

    Raises ClusterTooSmall, before any trial, when no node of the cluster can hold one.

    `train_fn` replaces sweepgrok.train.trainer.train inside the trials (tests: a synthetic
    trainer); `verbose` lets Ray's worker output and Optuna's per-trial log lines through; the
    driver mirrors the rows to `trackers` (sweepgrok.trackers) and keeps a heartbeat in the sweep
    folder (sweepgrok.store.heartbeat; `resume_command` is the command it shows for going on).
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.INFO if verbose else optuna.logging.WARNING)
    heartbeat = Heartbeat(sweep_dir, "search", spec.num_samples, resume=resume_command).start()
    callback: SearchCallback | None = None
    remaining = spec.num_samples
    try:
        start_ray(address, num_cpus, verbose=verbose, num_gpus=num_gpus)
    except BaseException:
        heartbeat.stop("interrupted")
        raise
    try:
        check_cluster(spec.settings.resources, spec.settings.source)
        searcher = build_searcher(spec, record)
        study = searcher.searcher._ot_study
        searcher.searcher._adopt, remaining = settle_interrupted(study, spec.num_samples)
        heartbeat.done_before(spec.num_samples - remaining)
        if remaining == 0:
            compact_sweep(sweep_dir)  # a compaction a crash cut short is finished here
            return {"started": 0, "errored": 0, "interrupted": 0}
        best = best_value(study)
        board = Board.remote(best) if spec.time_cap else None  # type: ignore[attr-defined]
        callback = SearchCallback(
            sweep_dir, spec.name, remaining, live=live, trackers=trackers, heartbeat=heartbeat
        )
        fn = tune.with_parameters(search_trainable, board=board, train_fn=train_fn)
        tuner = tune.Tuner(
            tune.with_resources(fn, spec.settings.resources.as_ray()),
            param_space={"cfg": dict(spec.base), "sweep": _meta(spec)},
            tune_config=tune.TuneConfig(
                search_alg=searcher,
                num_samples=remaining,
                reuse_actors=REUSE_ACTORS,
                trial_dirname_creator=trial_dirname,
            ),
            run_config=tune.RunConfig(
                name=TUNE_DIR,
                storage_path=str(sweep_dir.resolve()),
                failure_config=tune.FailureConfig(max_failures=spec.settings.max_failures),
                # ParquetCallback prunes superseded checkpoints safely (tune/prune.py); Tune's own
                # num_to_keep deletes them before its snapshot moved past them.
                checkpoint_config=tune.CheckpointConfig(num_to_keep=None),
                callbacks=[callback],
                verbose=0,
            ),
        )
        outcome = run_tuner(tuner, remaining, callback)
        return {"started": remaining, "errored": outcome.errored,
                "interrupted": outcome.interrupted}
    finally:
        if callback is None:
            heartbeat.stop("ended" if remaining == 0 else "interrupted")
        else:
            stop_heartbeat(heartbeat, callback, remaining)
        ray.shutdown()
