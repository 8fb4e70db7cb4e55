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
import sys
import types
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


PACKAGE_FUNCTIONS = ("train", "search")
"""API functions named like a subpackage (sweepgrok/train/, sweepgrok/search/): the import
system binds the subpackage to that name of this package whenever one of its modules is
imported, so the subpackage itself is made callable: ``sg.train(config)`` runs the function
and ``sweepgrok.train.trainer`` is still the module."""


class _CallablePackage(types.ModuleType):
    """A subpackage that, called, runs the API function of its name."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run sweepgrok.api.running's function of this package's name (see its docstring)."""
        name = self.__name__.rpartition(".")[2]
        return getattr(importlib.import_module(_WHERE[name]), name)(*args, **kwargs)


class _Package(types.ModuleType):
    """This package: each subpackage of PACKAGE_FUNCTIONS is made callable as it is bound."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in PACKAGE_FUNCTIONS and isinstance(value, types.ModuleType):
            value.__class__ = _CallablePackage
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (PEP 562)."""
    if name in PACKAGE_FUNCTIONS:  # bound (callable) by the import: see PACKAGE_FUNCTIONS
        return importlib.import_module(f"{__name__}.{name}")
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sweepgrok' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
