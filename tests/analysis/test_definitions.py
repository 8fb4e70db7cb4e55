"""The reports' definitions say the declared thresholds (sweepgrok.config.thresholds,
sweepgrok.train.events), never a number written again: declare another, and they follow."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest

from sweepgrok.analysis import definitions
from sweepgrok.config import thresholds
from sweepgrok.train import events


@pytest.fixture
def other_thresholds(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """definitions re-read with other declared thresholds; the real ones again afterwards."""
    monkeypatch.setattr(events, "FIT_THRESHOLD", 0.9)
    monkeypatch.setattr(events, "COLLAPSE_FRACTION", 0.4)
    monkeypatch.setattr(thresholds, "GROK_STEP_COLUMNS", {"grok_step_90": 0.9,
                                                           "grok_step_97.5": 0.975})
    yield dict(importlib.reload(definitions).DEFINITIONS)
    monkeypatch.undo()
    importlib.reload(definitions)


def test_the_definitions_say_the_declared_thresholds(other_thresholds: dict[str, str]) -> None:
    assert other_thresholds["fit step"] == (
        "first evaluation where train accuracy ≥ `train.fit_threshold` (0.9).")
    assert other_thresholds["grok step at θ"].startswith(
        "first evaluation where test accuracy ≥ θ, recorded at 0.9 and 0.975 (`grok_step_90`, "
        "`grok_step_97.5`);")
    assert "`geometry.collapse_fraction` (0.4) of its" in other_thresholds["collapse onset"]


def test_the_shipped_definitions_say_the_shipped_thresholds() -> None:
    said = dict(definitions.DEFINITIONS)
    assert f"`train.fit_threshold` ({events.FIT_THRESHOLD:g})" in said["fit step"]
    shipped = " and ".join(f"{t:g}" for t in thresholds.GROK_THRESHOLDS)
    assert f"recorded at {shipped} (" in said["grok step at θ"]
