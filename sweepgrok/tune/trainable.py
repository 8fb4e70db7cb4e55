"""The Ray Tune function trainable: one grid trial = one call of the shared trainer.

Rows are not written here: on a cluster a trial's local files are lost, so each
evaluation's rows travel inside ``tune.report`` to the driver, whose callback writes Parquet.

Trial config layout (the Tuner's param space): ``{"cfg": <flat trial config>, "sweep": {...}}``
where ``sweep`` holds settings shared by every trial (name, checkpoint cadence, CPU share).
"""

from __future__ import annotations

import json
import math
import os
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ray import tune

from sweepgrok.config.grid_file import label_of
from sweepgrok.config.trial import Config, from_flat, update

PAYLOAD = "_sweepgrok_rows"
"""Result key holding the evaluation's rows as JSON text (metrics, geometry, finished)."""
CKPT_FLAG = "_sweepgrok_checkpoint"
"""Result key set when the result carries a checkpoint: the driver flushes rows before it."""


def run_ids_for(sweep: str, trial_id: str, cfg: Config) -> list[str]:
    """Stable run ids: the trial id survives retries and restores; packed seeds add the seed."""
    stem = f"{sweep}-{trial_id}" if sweep else trial_id
    if cfg.train.seeds is None:
        return [stem]
    return [f"{stem}-s{seed}" for seed in cfg.train.seed_list]


def node_id() -> str:
    """The Ray node this trial runs on (its hex id), else the host name."""
    import ray

    try:
        return str(ray.get_runtime_context().get_node_id())
    except Exception:
        return socket.gethostname()


def encode_rows(report: Any) -> str:
    """An EvalReport's rows as JSON (NaN allowed: a diverged run has non-finite losses)."""
    return json.dumps(
        {"metrics": report.metrics, "geometry": report.geometry, "finished": report.finished},
        default=str,
    )


def summary(report: Any) -> dict[str, Any]:
    """Small scalar metrics Tune shows and stores (the rows themselves are in PAYLOAD)."""
    accs = [r.get("test_acc") for r in report.metrics if r.get("test_acc") is not None]
    best = max((a for a in accs if math.isfinite(a)), default=0.0)
    return {"step": report.step, "test_acc": best, "runs_finished": len(report.finished)}


def configure_trial_process(cfg: Config, cpu_share: float) -> None:
    """The process-wide settings of `cfg` for a trial's worker; threads default to one per CPU
    the trial asked for (Ray does not set them)."""
    from sweepgrok.train.process import configure_process

    configure_process(cfg.train, default_threads=max(1, int(cpu_share)))


@contextmanager
def owner_only_files() -> Iterator[None]:
    """Files and folders this process creates meanwhile are its owner's only (umask 077).

    Tune copies a checkpoint into the sweep's storage inside ``tune.report``, in this process,
    with the process's umask: trial checkpoints land 0600 (folders 0700) whatever it is."""
    old = os.umask(0o077)
    os.umask(old | 0o077)  # never looser than the process's own mask
    try:
        yield
    finally:
        os.umask(old)


class Reporter:
    """on_eval hook: report every evaluation, with a checkpoint every `every` evaluations.

    Subclasses (the Optuna search) extend ``observe`` (what to do with an evaluation before it
    is reported), ``result`` (the metrics dict) and ``save_extras`` (files beside the trainer's
    checkpoint)."""

    def __init__(self, every: int, trial_id: str, run_ids: Sequence[str]) -> None:
        self.every = every
        self.trial_id = trial_id
        self.active = len(run_ids)  # runs still training after the latest evaluation
        self.evals = 0

    def observe(self, report: Any) -> None:
        """Called first at every evaluation (may stop runs: ``report.stop``)."""

    def result(self, report: Any) -> dict[str, Any]:
        """The metrics dict reported for this evaluation."""
        return {**summary(report), PAYLOAD: encode_rows(report)}

    def save_extras(self, directory: Path) -> None:
        """Write anything besides the trainer state into a checkpoint directory."""

    def __call__(self, report: Any) -> None:
        self.evals += 1
        self.observe(report)
        self.active = len(report.metrics) - len(report.finished)
        metrics = self.result(report)
        # No checkpoint at the last evaluation: nothing would resume from it.
        if self.active > 0 and self.evals % self.every == 0:
            with tempfile.TemporaryDirectory(prefix="sweepgrok-ckpt-") as tmp:
                report.save_checkpoint(tmp)
                self.save_extras(Path(tmp))
                metrics[CKPT_FLAG] = True
                # Tune copies the directory into the trial's storage before report returns.
                with owner_only_files():
                    tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(tmp))
        else:
            tune.report(metrics)


def run_trial(
    train: Callable[..., Any],
    cfg: Config,
    run_ids: Sequence[str],
    sweep: str,
    reporter: Reporter,
    extra: Mapping[str, Any],
    on_resume: Callable[[Path], None] | None = None,
) -> None:
    """Call the trainer, from Tune's checkpoint when the trial is retried or restored.

    The trainer is built with the device this trial resolves to (sweepgrok.tune.devices);
    its run rows keep train.device as the file wrote it (a grid of auto trials is one group
    whether a trial landed on a GPU or not) and record Ray's GPU ids in gpu_ids."""
    from sweepgrok.tune.devices import trial_device

    placed = trial_device(cfg.train.device)
    extra = {**extra, "gpu_ids": placed.gpu_ids, "train.device": cfg.train.device}
    if placed.device != cfg.train.device:
        cfg = update(cfg, {"train.device": placed.device})
    checkpoint = tune.get_checkpoint()
    kwargs = {"run_ids": run_ids, "sweep": sweep, "on_eval": reporter, "run_extra": extra}
    if checkpoint is None:
        train(cfg, None, **kwargs)
        return
    with checkpoint.as_directory() as resume_dir:
        if on_resume is not None:
            on_resume(Path(resume_dir))
        train(cfg, None, resume_from=resume_dir, **kwargs)


def trial_extra(trial_id: str, arm: str = "") -> dict[str, str]:
    """Run-row fields that say where a trial ran (and its arm, when the sweep labels one)."""
    extra = {"trial_id": trial_id, "node_id": node_id(), "host": socket.gethostname()}
    return {**extra, "arm": arm} if arm else extra


def trainable(config: Mapping[str, Any], train_fn: Callable[..., Any] | None = None) -> None:
    """Build the Config, resume from Tune's checkpoint if any, train, report every eval.

    ``train_fn`` stands in for ``sweepgrok.train.trainer.train`` (same signature; tests wrap the
    real trainer to make a trial fail)."""
    if train_fn is None:
        from sweepgrok.train.trainer import train

        train_fn = train

    meta = dict(config.get("sweep") or {})
    cfg = from_flat(config["cfg"], f"trial of sweep {meta.get('name', '')}")
    configure_trial_process(cfg, float(meta.get("cpu", 1.0)))
    trial_id = tune.get_context().get_trial_id() or "local"
    sweep = str(meta.get("name", ""))
    run_ids = run_ids_for(sweep, trial_id, cfg)
    every = int(meta.get("checkpoint_every") or cfg.train.checkpoint_every)
    reporter = Reporter(every, trial_id, run_ids)
    arm = label_of(meta.get("labels") or (), config["cfg"])
    run_trial(train_fn, cfg, run_ids, sweep, reporter, trial_extra(trial_id, arm))
