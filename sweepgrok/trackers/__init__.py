"""Experiment trackers (MLflow, Weights & Biases): optional windows onto a sweep.

The Parquet sweep folder stays the record of truth. A tracker mirrors what the driver writes
there (sweepgrok.trackers.base.TrackedSink): one tracker run per sweepgrok run, its flat config
as parameters, each evaluation's metrics at their step, its status and grok/fit steps as summary
values. The tracker libraries are optional extras, imported only here and only when asked for.
"""

from sweepgrok.trackers.spec import (
    KINDS,
    MissingExtra,
    TrackerSpec,
    TrackerSpecError,
    check_installed,
    parse_trackers,
)

__all__ = [
    "KINDS",
    "MissingExtra",
    "TrackerSpec",
    "TrackerSpecError",
    "check_installed",
    "parse_trackers",
]
