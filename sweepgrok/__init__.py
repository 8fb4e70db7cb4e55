"""sweepgrok: run and analyse sweeps of grokking experiments, from the command line or Python.

    import sweepgrok as sg

    runs = sg.train("trial.yaml", out="runs/t")          # one trial, no Ray
    table = sg.analyze("runs/t", by="model.norm")        # what `sweepgrok analyze` prints
    with sg.Recorder("runs/mine", {"train": {"max_steps": 5000}}) as rec:
        ...                                              # any training loop: rec.log(step, ...)

Every name is imported when first used, so ``import sweepgrok`` (and the command line) stays
fast. Bad input raises ``sg.ConfigError`` with the message the command line prints.
See docs/python.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sweepgrok.api.reading import analyze, read_metrics, read_runs, report
    from sweepgrok.api.running import TrainInterrupted, launch, search, train
    from sweepgrok.config.trial import ConfigError
    from sweepgrok.train.recorder import Recorder

_WHERE = {
    "train": "sweepgrok.api.running",
    "launch": "sweepgrok.api.running",
    "search": "sweepgrok.api.running",
    "TrainInterrupted": "sweepgrok.api.running",
    "read_runs": "sweepgrok.api.reading",
    "read_metrics": "sweepgrok.api.reading",
    "analyze": "sweepgrok.api.reading",
    "report": "sweepgrok.api.reading",
    "Recorder": "sweepgrok.train.recorder",
    "ConfigError": "sweepgrok.config.trial",
}
"""Each public name and the module that defines it."""

__all__ = [
    "ConfigError",
    "Recorder",
    "TrainInterrupted",
    "analyze",
    "launch",
    "read_metrics",
    "read_runs",
    "report",
    "search",
    "train",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (PEP 562)."""
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sweepgrok' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
