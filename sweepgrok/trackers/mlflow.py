"""The MLflow tracker: the sweep is the experiment, each sweepgrok run an MLflow run nested
under the sweep's parent run.

A run's parameters: its flat config; metrics: each evaluation's at its step, and when it ends
its summary numbers (``grok_step``, ``fit_step``, ``delay``, ``censored``, final accuracies:
sweepgrok.trackers.base.SUMMARY_KEYS; a censored run has no ``grok_step`` metric), so the MLflow
UI sorts and compares runs by them; tags ``status``, ``sweepgrok.run_id`` and
``sweepgrok.folder`` (which tracker run to continue when the sweep is resumed). The parent run,
named after the sweep (tag ``sweepgrok.parent``), holds the sweep file, analyze's table and the
report as artifacts. Uses MlflowClient, not the fluent API: many runs are open at once.

A SQLite store keeps its artifacts in ``mlartifacts/`` beside the database file
(sweepgrok.trackers.targets.artifact_root), never in the working directory of the moment (inside
a fit: the sweep folder, which ``--fresh`` deletes): the database is opened first with that
artifact root, so a new database's Default experiment gets it too, and the sweep's experiment is
created through it (``mlartifacts/<experiment id>/``, MLflow's own layout).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sweepgrok.trackers.spec import STEP_METRIC
from sweepgrok.trackers.targets import absolute_uri, artifact_root

PARAMS_PER_BATCH = 100
"""MLflow's limit of parameters (and tags) in one log_batch call."""
HTTP_RETRIES = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
"""Defaults unless the user set them: MLflow's own (7 retries, 120 s) would stall the driver
for minutes on a server that is down, before the one warning."""


def _store_with_root(uri: str | None) -> Any:
    """A SQLite store at `uri` opened with its artifact root beside the database (creating the
    database, and its Default experiment there, when new); None for any other store."""
    root = artifact_root(uri)
    if uri is None or root is None:
        return None
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    return SqlAlchemyStore(uri, str(root))


class MlflowTracker:
    """Logs to the MLflow tracking server or store at `uri` (None: MLflow's default)."""

    kind = "mlflow"

    def __init__(self, uri: str | None, sweep: str, folder: str) -> None:
        for name, value in HTTP_RETRIES.items():
            os.environ.setdefault(name, value)
        from mlflow.tracking import MlflowClient

        uri = absolute_uri(uri)  # already absolute from the driver's callback: idempotent
        self._store = _store_with_root(uri)
        self.client = MlflowClient(tracking_uri=uri)
        self.sweep, self.folder = sweep, folder
        self._experiment: str | None = None
        self._runs: dict[str, str] = {}  # sweepgrok run id -> MLflow run id
        self._parent_id: str | None = None

    def _experiment_id(self) -> str:
        if self._experiment is None:
            found = self.client.get_experiment_by_name(self.sweep)
            if found is not None:
                self._experiment = str(found.experiment_id)
            elif self._store is not None:  # at the store's artifact root, not the cwd's
                self._experiment = str(self._store.create_experiment(self.sweep))
            else:
                self._experiment = str(self.client.create_experiment(self.sweep))
        return self._experiment

    def _find(self, tag: str, value: str) -> Any:
        query = f"tags.`{tag}` = '{value}' and tags.`sweepgrok.folder` = '{self.folder}'"
        found = self.client.search_runs([self._experiment_id()], query, max_results=1)
        return found[0] if found else None

    def _parent(self) -> str:
        """The sweep's parent run of this folder: found (a resumed sweep) or created."""
        if self._parent_id is None:
            earlier = self._find("sweepgrok.parent", "true")
            if earlier is None:
                tags = {"sweepgrok.parent": "true", "sweepgrok.folder": self.folder,
                        "sweepgrok.sweep": self.sweep}
                created = self.client.create_run(self._experiment_id(), run_name=self.sweep,
                                                 tags=tags)
                self._parent_id = str(created.info.run_id)
            else:
                self._parent_id = str(earlier.info.run_id)
                self.client.update_run(self._parent_id, status="RUNNING")
        return self._parent_id

    def open(self, run_id: str) -> int | None:
        earlier = self._find("sweepgrok.run_id", run_id)
        if earlier is None:
            tags = {"sweepgrok.run_id": run_id, "sweepgrok.folder": self.folder,
                    "sweepgrok.sweep": self.sweep, "mlflow.parentRunId": self._parent()}
            created = self.client.create_run(self._experiment_id(), run_name=run_id, tags=tags)
            self._runs[run_id] = created.info.run_id
            return None
        self._runs[run_id] = earlier.info.run_id
        self.client.update_run(earlier.info.run_id, status="RUNNING")
        history = self.client.get_metric_history(earlier.info.run_id, STEP_METRIC)
        return max((m.step for m in history), default=None)

    def log_metrics(self, run_id: str, step: int, values: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(key, value, now, step) for key, value in values.items()]
        self.client.log_batch(self._runs[run_id], metrics=metrics)

    def finish(self, run_id: str, params: Mapping[str, Any], summary: Mapping[str, Any]) -> None:
        from mlflow.entities import Metric, Param, RunTag

        mlflow_id = self._runs.pop(run_id)
        items = [Param(key, str(value)) for key, value in params.items()]
        for start in range(0, len(items), PARAMS_PER_BATCH):
            self.client.log_batch(mlflow_id, params=items[start : start + PARAMS_PER_BATCH])
        now = int(time.time() * 1000)
        numbers = [Metric(k, float(v), now, 0) for k, v in summary.items() if k != "status"]
        tags = [RunTag("status", str(summary["status"]))]
        self.client.log_batch(mlflow_id, metrics=numbers, tags=tags)
        failed = summary.get("status") == "failed"
        self.client.set_terminated(mlflow_id, "FAILED" if failed else "FINISHED")

    def close(self) -> None:
        runs, self._runs = self._runs, {}
        for mlflow_id in runs.values():
            self.client.set_terminated(mlflow_id, "KILLED")
        if self._parent_id is not None:
            self.client.set_terminated(self._parent_id, "FINISHED")

    def attach(self, files: Sequence[Path]) -> None:
        parent = self._parent()
        for path in files:
            self.client.log_artifact(parent, str(path))
        self.client.set_terminated(parent, "FINISHED")
