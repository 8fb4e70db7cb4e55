"""Build and run (or restore) the Ray Tune experiment of a validated grid.

Layout: the sweep folder ``<storage>/<name>/`` holds our Parquet (runs/, metrics/, geometry/)
and Tune's own experiment state under ``tune/`` (what ``--resume`` restores from).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray import tune

from sweepgrok.config.grid_file import GridSpec, Resources, trial_labels
from sweepgrok.core import interrupt
from sweepgrok.store.compact import compact_sweep
from sweepgrok.store.heartbeat import Heartbeat
from sweepgrok.trackers import TrackerSpec
from sweepgrok.tune.callback import TUNE_DIR, ParquetCallback, raise_write_error
from sweepgrok.tune.cluster import check_cluster
from sweepgrok.tune.moved import rehome_generator_state
from sweepgrok.tune.reuse import retry_failed_resets
from sweepgrok.tune.trainable import trainable

log = logging.getLogger(__name__)

# Quiet by default: no usage stats, no per-trial CSV/JSON/TensorBoard files (our Parquet is the
# record), deduplicated worker logs. setdefault: the user's environment wins.
QUIET_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
    "RAY_DEDUP_LOGS": "1",
    # Snapshot-frequency warnings are about num_to_keep, which we leave unset (see prune.py).
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0",
    "RAY_AIR_NEW_OUTPUT": "0",
}
NO_TUNE_SIGINT = "TUNE_DISABLE_SIGINT_HANDLER"
"""Set while sweepgrok.core.interrupt handles the signals (the CLI): the callback then asks Tune to
stop through Tune's own graceful stop (ParquetCallback.on_step_begin). A library caller
without it keeps Tune's Ctrl-C handling."""
# Loggers that warn about things we chose (no result.json: rows go to Parquet instead).
QUIET_LOGGERS = ("ray.tune.analysis.experiment_analysis", "ray.tune.tune", "ray.tune")
TOKEN_LOGGER = "ray._private.authentication.authentication_token_setup"
TUNE_ADVICE = ("Stop signal received", "Experiment has been interrupted", "Trials did not complete")
"""Tune's own lines about an interrupted fit (its restore advice is Tuner.restore(...), the
wrong tool for a sweepgrok user): sweepgrok prints its own line with the command that
continues (sweepgrok.cli.launch / search)."""
TOKEN_GREETING = "Token authentication is enabled for this Ray cluster."
"""Ray's warning at every local start that it turned token authentication on: about Ray's own
default, not about the sweep; an embedded Ray drops it (that message only, see start_ray)."""


class _DropMessage(logging.Filter):
    """Drops records whose message starts with `prefix` (a string or a tuple of them); lets
    every other record through."""

    def __init__(self, prefix: str | tuple[str, ...]) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


_TUNE_ADVICE_FILTER = _DropMessage(TUNE_ADVICE)
_set_by_us = {"sigint": False}


@contextlib.contextmanager
def without_token_greeting() -> Iterator[None]:
    """Drop Ray's token-authentication greeting (TOKEN_GREETING) while the block runs."""
    logger = logging.getLogger(TOKEN_LOGGER)
    drop = _DropMessage(TOKEN_GREETING)
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


@dataclass
class Outcome:
    """What happened to the trials of one launch."""

    total: int
    terminated: int
    errored: int
    interrupted: int = 0
    """Trials started and stopped before they ended (Ctrl-C, SIGTERM): --resume resumes them."""

    @property
    def unfinished(self) -> int:
        """Trials not ended: interrupted ones and those never started."""
        return self.total - self.terminated - self.errored


def tune_dir(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir).resolve() / TUNE_DIR


def can_resume(sweep_dir: str | Path) -> bool:
    """True if Tune left a restorable experiment in the sweep folder."""
    return tune.Tuner.can_restore(str(tune_dir(sweep_dir)))


def start_ray(
    address: str | None,
    num_cpus: int | None = None,
    verbose: bool = False,
    num_gpus: int | None = None,
) -> None:
    """Connect to `address` (or $RAY_ADDRESS), else start an embedded local Ray (with
    `num_cpus` / `num_gpus`, else what Ray detects; tests declare logical GPUs this way).

    Quiet unless `verbose`: then the trial workers' output reaches the terminal and Ray / Tune
    log at INFO (the environment defaults of QUIET_ENV stay: they only drop files we never read).
    An embedded Ray starts without its token-authentication greeting (TOKEN_GREETING).
    """
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    if interrupt.active():
        os.environ[NO_TUNE_SIGINT] = "1"
    elif os.environ.get(NO_TUNE_SIGINT) == "1" and _set_by_us["sigint"]:
        del os.environ[NO_TUNE_SIGINT]
    _set_by_us["sigint"] = interrupt.active()
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.ERROR)
    tune_log = logging.getLogger("ray.tune.tune")
    if _TUNE_ADVICE_FILTER not in tune_log.filters:  # --verbose too
        tune_log.addFilter(_TUNE_ADVICE_FILTER)
    address = address or os.environ.get("RAY_ADDRESS") or None
    common: dict[str, Any] = {
        "log_to_driver": verbose,
        "logging_level": "INFO" if verbose else "WARNING",
    }
    if address:
        log.info("connecting to the Ray cluster at %s", address)
        ray.init(address=address, **common)
    else:
        # "local" forces a fresh embedded Ray even if another cluster runs on this machine.
        with without_token_greeting():
            ray.init(
                address="local",
                num_cpus=num_cpus,
                num_gpus=num_gpus,
                include_dashboard=False,
                **common,
            )
    interrupt.reinstall()  # ray.init put its own SIGTERM handler in place of sweepgrok's
    skip_callback_usage_tag()


def skip_callback_usage_tag() -> None:
    """With Ray's usage statistics off (QUIET_ENV's default), skip the usage tag Tune's fit
    records of the callbacks it was given: to name them it imports Ray's MLflow, W&B, Comet and
    Aim integrations, and through them mlflow and wandb where installed, before the first trial
    (~2 s of CPU, bench_startup), for a tag that is never sent. Usage statistics on: left alone."""
    if os.environ.get("RAY_USAGE_STATS_ENABLED") != "0":
        return
    from ray.air._internal import usage

    if callable(getattr(usage, "tag_callbacks", None)):
        usage.tag_callbacks = _no_usage_tag  # type: ignore[assignment]


def _no_usage_tag(callbacks: Any) -> bool:
    """Stands in for ray.air._internal.usage.tag_callbacks: records nothing."""
    return False


REUSE_ACTORS = True
"""Tune hands a finished trial's worker process to the next trial: a fresh worker costs ~2.5 s
per trial on 2 cores, importing torch and the trainer again (bench_ray; the slow tests took 19
minutes instead of 12). A worker that dies before its reuse costs the next trial a retry, as a
new worker's death does (sweepgrok.tune.reuse, applied by run_tuner)."""


def trial_dirname(trial: Any) -> str:
    """Short trial folders (Tune's default embeds the whole flat config in the name)."""
    return str(trial.trial_id)


def grid_trainable(resources: Resources, train_fn: Callable[..., Any] | None) -> Any:
    """The trainable of a grid's trials (fresh or restored: Tune needs the same one)."""
    fn = tune.with_parameters(trainable, train_fn=train_fn)
    return tune.with_resources(fn, resources.as_ray())


def _param_space(trials: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> dict:
    # One grid_search axis over full flat configs: zipped axes are not a Tune cross product.
    return {"sweep": dict(meta), "cfg": tune.grid_search([dict(t) for t in trials])}


def build_tuner(
    trials: Sequence[Mapping[str, Any]],
    *,
    sweep: str,
    sweep_dir: Path,
    resources: Resources,
    max_concurrent: int | None,
    max_failures: int,
    checkpoint_every: int | None,
    callback: ParquetCallback,
    train_fn: Callable[..., Any] | None = None,
    labels: Sequence[Sequence[Any]] = (),
) -> tune.Tuner:
    """A fresh Tuner: one trial per expanded grid config (`labels`: see trial_labels)."""
    meta: dict[str, Any] = {
        "name": sweep, "cpu": resources.cpu, "checkpoint_every": checkpoint_every
    }
    if labels:
        meta["labels"] = [list(x) for x in labels]
    run_config = tune.RunConfig(
        name=TUNE_DIR,
        storage_path=str(Path(sweep_dir).resolve()),
        failure_config=tune.FailureConfig(max_failures=max_failures),
        # Keep all: CheckpointPruner deletes old ones once no saved snapshot refers to them.
        checkpoint_config=tune.CheckpointConfig(num_to_keep=None),
        callbacks=[callback],
        verbose=0,
    )
    tune_config = tune.TuneConfig(
        max_concurrent_trials=max_concurrent,
        reuse_actors=REUSE_ACTORS,
        trial_dirname_creator=trial_dirname,
    )
    return tune.Tuner(
        grid_trainable(resources, train_fn),
        param_space=_param_space(trials, meta),
        tune_config=tune_config,
        run_config=run_config,
    )


def restore_tuner(
    sweep_dir: Path,
    resources: Resources,
    callback: ParquetCallback,
    train_fn: Callable[..., Any] | None = None,
) -> tune.Tuner:
    """Restore the sweep's Tune experiment: finished trials stay finished, the rest resume."""
    rehome_generator_state(tune_dir(sweep_dir))  # a moved folder's unstarted trials
    tuner = tune.Tuner.restore(
        str(tune_dir(sweep_dir)),
        grid_trainable(resources, train_fn),
        resume_unfinished=True,
        resume_errored=True,
    )
    # Tune restores the pickled callbacks of the first launch; use this session's instead
    # (fresh live view, this session's sweep path). No public setter exists in Ray 2.60.
    internal = getattr(tuner, "_local_tuner", None)
    if internal is not None:
        internal.get_run_config().callbacks = [callback]
    return tuner


@contextlib.contextmanager
def working_in(directory: str | Path) -> Iterator[None]:
    """Run the block in `directory`, then go back to the previous working directory if it
    still exists.

    Tune resolves paths against the driver's working directory during and after the fit
    (os.path.relpath in its experiment-state listing). A Ray job's driver works in Ray's
    unpacked copy of the job's working_dir, which Ray can delete and unpack anew while the job
    runs (a second node sharing the machine's Ray temp dir does, when it sets the job's
    environment up for its first trial): the sweep folder is ours and outlives the fit."""
    try:
        before: str | None = os.getcwd()
    except FileNotFoundError:  # already gone: stay in the sweep folder afterwards
        before = None
    os.chdir(directory)
    try:
        yield
    finally:
        if before is not None:
            with contextlib.suppress(OSError):
                os.chdir(before)


def run_tuner(tuner: tune.Tuner, total: int, callback: ParquetCallback) -> Outcome:
    """Fit in the sweep folder, always flushing the rows, and count how the trials ended.

    The count comes from the callback (the trials as the experiment ended), not from the
    fit's result (Tune's ExperimentAnalysis, built after the experiment ended): once every
    trial ended and its rows are flushed, a failure of Tune's own bookkeeping is logged, not
    reported as a failed sweep."""
    Path(callback.sweep_dir).mkdir(parents=True, exist_ok=True)
    retry_failed_resets()
    try:
        with working_in(callback.sweep_dir):
            tuner.fit()
    except Exception as err:
        raise_write_error(err)  # a full sweep folder comes out as itself (PartWriteError)
        if not callback.all_ended(total):
            raise
        log.warning("every trial ended and its rows are written; Tune failed after", exc_info=True)
    finally:
        callback.close()
        compact_sweep(callback.sweep_dir)  # its last rows are written: one row per key
    ended = callback.ended or {}
    return Outcome(
        total,
        terminated=ended.get("TERMINATED", 0),
        errored=ended.get("ERROR", 0),
        interrupted=ended.get("INTERRUPTED", 0),
    )


def stop_heartbeat(heartbeat: Heartbeat, callback: ParquetCallback, total: int) -> None:
    """The driver's last heartbeat: ended when every trial ended, else interrupted; its counts
    are those `sweepgrok status` reads from the folder now (sweepstatus.stopped_counts: the
    same function), else, if the folder cannot be read, the callback's own."""
    from sweepgrok.analysis.sweepstatus import stopped_counts

    try:
        counts = stopped_counts(Path(callback.sweep_dir))
    except Exception:  # a record of the counts must not fail the driver's stop
        log.warning("could not read the sweep folder's trial counts", exc_info=True)
        counts = None
    heartbeat.stop("ended" if callback.all_ended(total) else "interrupted", counts)


def launch_grid(
    spec: GridSpec,
    sweep_dir: Path,
    *,
    address: str | None = None,
    max_concurrent: int | None = None,
    resume: bool = False,
    num_cpus: int | None = None,
    live: bool = True,
    verbose: bool = False,
    train_fn: Callable[..., Any] | None = None,
    trackers: Sequence[TrackerSpec] = (),
    num_gpus: int | None = None,
    resume_command: str = "",
) -> Outcome:
    """Run (or, with `resume`, restore and finish) a grid's trials; rows land in sweep_dir.

    `verbose` lets Ray's worker output through (see start_ray). `train_fn` replaces
    sweepgrok.train.trainer.train inside the trials (tests: a trainer that fails). The driver
    mirrors the rows to `trackers` (sweepgrok.trackers) and keeps a heartbeat in the sweep folder
    (sweepgrok.store.heartbeat; `resume_command` is the command it shows for going on). Raises
    ClusterTooSmall, before any trial, when no node of the cluster can hold one.
    """
    s = spec.settings
    total = len(spec.trials)
    heartbeat = Heartbeat(sweep_dir, "launch", total, resume=resume_command).start()
    callback = ParquetCallback(
        sweep_dir, s.name, total, live=live, trackers=trackers, heartbeat=heartbeat
    )
    try:
        start_ray(address, num_cpus, verbose=verbose, num_gpus=num_gpus)
    except BaseException:
        heartbeat.stop("interrupted")
        raise
    try:
        check_cluster(s.resources, s.source)
        if resume and can_resume(sweep_dir):
            log.info("restoring the Ray Tune experiment in %s", tune_dir(sweep_dir))
            tuner = restore_tuner(sweep_dir, s.resources, callback, train_fn)
        else:
            tuner = build_tuner(
                [t.flat for t in spec.trials],
                sweep=s.name,
                sweep_dir=sweep_dir,
                resources=s.resources,
                max_concurrent=max_concurrent or s.max_concurrent,
                max_failures=s.max_failures,
                checkpoint_every=s.checkpoint_every,
                callback=callback,
                train_fn=train_fn,
                labels=trial_labels(spec.trials),
            )
        return run_tuner(tuner, total, callback)
    finally:
        stop_heartbeat(heartbeat, callback, total)
        ray.shutdown()
