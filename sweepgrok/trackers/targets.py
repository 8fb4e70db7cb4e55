"""Tracker targets: refused before a command starts where MLflow refuses them, made absolute
before a fit, and where a SQLite store keeps its artifacts.

MLflow 3.13 put its file store (``file:///.../mlruns`` or a plain folder path) in maintenance
mode: the store raises on first use unless ``MLFLOW_ALLOW_FILE_STORE=true``. Without this check a
sweep would start and its tracker would only warn, in the middle of the first trial; refused
here, the user gets the SQLite form to use instead (one file, every MLflow feature).

`launch` and `search` run the fit in the sweep folder (sweepgrok.tune.grid.working_in), and
MLflow resolves a relative SQLite path, its default store (``sqlite:///mlflow.db``) and its
default artifact root (``./mlruns``) against the working directory when the store is opened:
inside the fit that is the sweep folder, which ``--fresh`` deletes. So an MLflow target is made
absolute where the command was started (absolute_spec), and a SQLite store keeps its artifacts
in ``mlartifacts/`` beside the database file (artifact_root), for the Default experiment too.
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
ARTIFACTS_DIR = "mlartifacts"
"""Where a SQLite store's artifacts go, beside the database file (the name `mlflow server`
gives its artifact folder; not `mlruns`, the name of the file store a SQLite file replaces)."""
SQLITE = "sqlite:///"


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


def sqlite_file(uri: str) -> Path | None:
    """The database file of a ``sqlite:///PATH`` URI (relative or absolute), else None."""
    if not uri.startswith(SQLITE):
        return None
    path = urlparse(uri).path.removeprefix("/")  # sqlite:///rel.db -> rel.db, ////abs -> /abs
    return Path(path) if path and path != ":memory:" else None


def absolute_uri(uri: str | None) -> str | None:
    """`uri` (None: MLflow's default, $MLFLOW_TRACKING_URI else ``sqlite:///mlflow.db``) with
    a relative SQLite path made absolute against the working directory of now."""
    if uri is None:
        try:
            import mlflow
        except ImportError:  # the command checked the extra; a bare library call may not
            return None
        uri = str(mlflow.get_tracking_uri())
    db = sqlite_file(uri)
    if db is None or db.is_absolute():
        return uri
    query = uri[len(SQLITE) + len(str(db)):]  # '?mode=...' and the like, kept
    return f"{SQLITE}{Path.cwd() / db}{query}"


def absolute_spec(spec: TrackerSpec) -> TrackerSpec:
    """`spec` with an MLflow target that no later working directory changes (absolute_uri)."""
    if spec.kind != "mlflow":
        return spec
    uri = absolute_uri(spec.target)
    return spec if uri is None else TrackerSpec(spec.kind, uri)


def artifact_root(uri: str | None) -> Path | None:
    """Where the artifacts of a SQLite store at `uri` go: ARTIFACTS_DIR beside its database
    file (None for other stores: a tracking server keeps its own)."""
    db = None if uri is None else sqlite_file(uri)
    return None if db is None else db.expanduser().absolute().parent / ARTIFACTS_DIR
