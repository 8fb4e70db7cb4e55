"""The Weights & Biases tracker: a project (default $WANDB_PROJECT, else sweepgrok), the sweep
as the group, each sweepgrok run a W&B run named by its run id.

Config: the run's flat config (dotted keys); history: each evaluation's metrics at its step;
summary: ``status`` and the numbers the run ended with (``grok_step``, ``fit_step``, ``delay``,
``censored``, final accuracies: sweepgrok.trackers.base.SUMMARY_KEYS; a censored run has no
``grok_step``), which W&B's tables and parallel coordinates sort and plot. One more run of the
group, named after the sweep (job type ``sweep``), holds the sweep file, analyze's table and the
report as files. The W&B run id is derived from the sweep, the run id and the sweep folder, so a
resumed sweep continues its W&B runs (``resume="allow"``).
Honours WANDB_MODE (offline: local run files, ``wandb sync`` uploads them later).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_PROJECT = "sweepgrok"


def wandb_id(sweep: str, run_id: str, folder: str) -> str:
    """A stable W&B run id (W&B ids allow no '/', ':' and the like: a hex digest)."""
    return hashlib.sha1(f"{sweep}\0{run_id}\0{folder}".encode()).hexdigest()[:24]


class WandbTracker:
    """Logs one W&B run per sweepgrok run, several open at once (reinit="create_new")."""

    kind = "wandb"

    def __init__(self, project: str | None, sweep: str, folder: str) -> None:
        import wandb

        self.wandb = wandb
        self.project = project or os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT
        self.sweep, self.folder = sweep, folder
        # console="off": W&B must not capture the terminal the sweep's progress is drawn on.
        self.settings = wandb.Settings(console="off", x_disable_stats=True)
        self._runs: dict[str, Any] = {}

    def _init(self, name: str, job_type: str) -> Any:
        return self.wandb.init(
            project=self.project,
            group=self.sweep,
            job_type=job_type,
            name=name,
            id=wandb_id(self.sweep, name if job_type == "run" else "", self.folder),
            resume="allow",
            reinit="create_new",
            settings=self.settings,
        )

    def open(self, run_id: str) -> int | None:
        run = self._init(run_id, "run")
        self._runs[run_id] = run
        held = run.summary.get("_step") if run.resumed else None
        return None if held is None else int(held)

    def log_metrics(self, run_id: str, step: int, values: Mapping[str, float]) -> None:
        self._runs[run_id].log(dict(values), step=step)

    def finish(self, run_id: str, params: Mapping[str, Any], summary: Mapping[str, Any]) -> None:
        run = self._runs.pop(run_id)
        run.config.update(dict(params), allow_val_change=True)
        run.summary.update(dict(summary))
        run.finish(exit_code=1 if summary.get("status") == "failed" else 0)

    def close(self) -> None:
        runs, self._runs = self._runs, {}
        for run in runs.values():
            run.finish()

    def attach(self, files: Sequence[Path]) -> None:
        run = self._init(self.sweep, "sweep")
        for path in files:
            # Into the run's own folder: offline, W&B links a saved file until `wandb sync`.
            kept = shutil.copyfile(path, Path(run.dir) / path.name)
            run.save(str(kept), base_path=run.dir, policy="now")
        run.finish()
