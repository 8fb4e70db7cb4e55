"""``--tracker KIND[=TARGET]``: which trackers a command mirrors its rows to (parsed, checked)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass

KINDS = {"mlflow": "URI", "wandb": "PROJECT"}
"""Tracker kind -> what its optional target names (MLflow tracking URI, W&B project)."""
PACKAGES = {"mlflow": "mlflow", "wandb": "wandb"}
"""Tracker kind -> the module its extra installs (mlflow-skinny installs `mlflow`)."""
ALLOWED = ", ".join(f"{kind}[={target}]" for kind, target in KINDS.items())

STEP_METRIC = "test_acc"
"""A metric every evaluation has: its series tells which steps a tracker run holds."""


class TrackerSpecError(ValueError):
    """A --tracker value that names no tracker, or an empty target."""


class MissingExtra(TrackerSpecError):
    """The tracker's library is not installed; the message has the install command."""

    def __init__(self, kind: str) -> None:
        super().__init__(
            f"{kind} is not installed: pip install 'sweepgrok[{kind}]'"
        )
        self.kind = kind


@dataclass(frozen=True)
class TrackerSpec:
    """One --tracker: its kind and target (None: the library's default, e.g.
    $MLFLOW_TRACKING_URI, $WANDB_PROJECT else `sweepgrok`)."""

    kind: str
    target: str | None = None


def parse_tracker(text: str) -> TrackerSpec:
    """``mlflow``, ``mlflow=URI``, ``wandb``, ``wandb=PROJECT`` -> a TrackerSpec."""
    kind, sep, target = text.partition("=")
    kind = kind.strip()
    if kind not in KINDS:
        raise TrackerSpecError(f"{text!r} is not a tracker: one of {ALLOWED}")
    if sep and not target.strip():
        raise TrackerSpecError(f"{text!r}: empty {KINDS[kind]} after '=' (allowed: {ALLOWED})")
    return TrackerSpec(kind, target.strip() if sep else None)


def parse_trackers(texts: Sequence[str] | None) -> list[TrackerSpec]:
    """Every --tracker value parsed, duplicates dropped (order kept)."""
    return list(dict.fromkeys(parse_tracker(t) for t in texts or ()))


def check_installed(specs: Sequence[TrackerSpec]) -> None:
    """Raise MissingExtra for the first tracker whose library is not importable (looked up
    without importing it: a command checks this before it starts anything)."""
    for spec in specs:
        try:
            found = importlib.util.find_spec(PACKAGES[spec.kind]) is not None
        except (ImportError, ValueError):  # a broken or half-removed installation
            found = False
        if not found:
            raise MissingExtra(spec.kind)
