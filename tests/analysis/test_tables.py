"""The analysis table's legend says the thresholds the table was made with: the table's grok
threshold and the declared fit threshold (sweepgrok.train.events), never a fixed number."""

from __future__ import annotations

import pandas as pd
import pytest

from sweepgrok.analysis import tables
from sweepgrok.analysis.summary_columns import SMALL_GROUP
from sweepgrok.train import events


def test_the_legend_says_the_declared_fit_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    table = pd.DataFrame({"label": ["a"], "few_runs": [True]})
    assert f"train_acc >= {events.FIT_THRESHOLD:g};" in tables.legend(0.95, table)
    monkeypatch.setattr(events, "FIT_THRESHOLD", 0.9)
    text = tables.legend(0.95, table)
    assert "test_acc >= 0.95; fit = first eval with train_acc >= 0.9;" in text
    assert f"† fewer than {SMALL_GROUP} runs" in text
