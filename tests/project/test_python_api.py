"""The Python API's surface: every name of sweepgrok.__all__ exists and says what it does, and
`import sweepgrok` imports none of the heavy libraries (the command line's start-up)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import sweepgrok as sg

ROOT = Path(__file__).resolve().parents[2]


def test_every_public_name_exists_and_has_a_docstring() -> None:
    assert set(sg.__all__) >= {"train", "launch", "search", "read_runs", "read_metrics",
                               "analyze", "report", "Recorder", "ConfigError"}
    for name in sg.__all__:
        value = getattr(sg, name)
        assert callable(value), name
        if name in sg.PACKAGE_FUNCTIONS:  # the subpackage, called: the API function runs
            value = getattr(importlib.import_module("sweepgrok.api.running"), name)
        assert (value.__doc__ or "").strip(), f"sweepgrok.{name} has no docstring"
    assert set(sg.__all__) <= set(dir(sg))


def test_train_and_search_are_functions_and_still_subpackages() -> None:
    import sweepgrok.train.events as events  # the dotted import goes through sg.train

    assert events.__name__ == "sweepgrok.train.events" and sg.train.events is events
    with pytest.raises(sg.ConfigError, match="a trial config is a YAML path"):
        sg.train(42)  # the call runs sweepgrok.api.running.train
    with pytest.raises(sg.ConfigError, match=r"nowhere\.yaml"):
        sg.search("nowhere.yaml")


def test_import_sweepgrok_loads_no_heavy_library() -> None:
    code = ("import sys, sweepgrok; "
            "heavy = ('ray', 'torch', 'optuna', 'matplotlib', 'pandas', 'pyarrow', 'pydantic'); "
            "print([m for m in heavy if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        sg.tarin  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as err:
        assert "tarin" in str(err)
    else:
        raise AssertionError("sg.tarin resolved")
