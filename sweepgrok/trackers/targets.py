"""Tracker targets refused before a command starts: MLflow's file store where MLflow refuses it.

MLflow 3.13 put its file store (``file:///.../mlruns`` or a plain folder path) in maintenance
mode: the store raises on first use unless ``MLFLOW_ALLOW_FILE_STORE=true``. Without this check a
sweep would start and its tracker would only warn, in the middle of the first trial; refused
here, the user gets the SQLite form to use instead (one file, every MLflow feature).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from urllib.parse import urlparse

from sweepgrok.trackers.spec import TrackerSpec, TrackerSpecError

FILE_STORE_REFUSED_FROM = (3, 13)
"""The first MLflow (major, minor) whose file store raises unless MLFLOW_ALLOW_FILE_STORE."""
ALLOW_ENV = "MLFLOW_ALLOW_FILE_STORE"
"""MLflow's opt-in to its file store (honoured here as MLflow honours it)."""


def mlflow_version() -> str | None:
    """The installed MLflow (the full or the skinny distribution), or None."""
    for dist in ("mlflow", "mlflow-skinny"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def _release(version: str) -> tuple[int, int]:
    """(major, minor) of a version string ("3.18.0rc1" -> (3, 18)); (0, 0) when unreadable."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found[1]), int(found[2])) if found else (0, 0)


def file_store_path(uri: str) -> str | None:
    """The folder of an MLflow file-store URI (``file:...`` or a plain path), else None."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return parsed.path or "."
    return uri if parsed.scheme == "" else None  # a plain path: MLflow's file store too


def check_targets(specs: Sequence[TrackerSpec]) -> None:
    """Raise TrackerSpecError for an MLflow target that this MLflow will refuse."""
    version = mlflow_version()
    if version is None or _release(version) < FILE_STORE_REFUSED_FROM:
        return
    if os.environ.get(ALLOW_ENV, "").strip().lower() in ("true", "1"):
        return
    for spec in specs:
        uri = spec.target or os.environ.get("MLFLOW_TRACKING_URI")
        folder = None if spec.kind != "mlflow" or not uri else file_store_path(uri)
        if folder is None:
            continue
        db = Path(folder.rstrip("/") or ".").expanduser().absolute().with_suffix(".db")
        given = f"mlflow={spec.target}" if spec.target else f"$MLFLOW_TRACKING_URI={uri}"
        raise TrackerSpecError(
            f"{given}: MLflow {version} refuses a folder of runs (its file store, refused since "
            f"MLflow 3.13 unless {ALLOW_ENV}=true): keep the runs in a SQLite file instead, "
            f"e.g. mlflow=sqlite:///{db} (view it with `mlflow ui --backend-store-uri "
            f"sqlite:///{db}`)"
        )
