"""The grok thresholds, declared once in sweepgrok.config.thresholds: every place that lists them
(runs/ columns, the trainer's tracker and its checkpoints, search metrics, the CLI's choices, the
config default) follows that one declaration."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

from sweepgrok.cli.common import Threshold
from sweepgrok.config.search_file import SearchSection
from sweepgrok.config.thresholds import (
    DEFAULT_GROK_THRESHOLD,
    GROK_STEP_COLUMNS,
    GROK_THRESHOLDS,
    tag,
)
from sweepgrok.config.trial import TrainConfig
from sweepgrok.store.sink import RUNS_SCHEMA
from sweepgrok.train.events import RunTracker

PACKAGE = Path(__file__).resolve().parents[2] / "sweepgrok"


def test_the_declaration() -> None:
    assert GROK_THRESHOLDS == (0.95, 0.99) and DEFAULT_GROK_THRESHOLD == 0.99
    assert GROK_STEP_COLUMNS == {"grok_step_95": 0.95, "grok_step_99": 0.99}
    assert (tag(0.95), tag(0.995), tag(1.0)) == ("95", "99.5", "100")


def test_every_list_of_thresholds_follows_it() -> None:
    assert set(GROK_STEP_COLUMNS) <= set(RUNS_SCHEMA.names)
    assert set(GROK_STEP_COLUMNS) <= set(RunTracker.__dataclass_fields__)  # checkpoint keys
    metric = get_args(SearchSection.model_fields["metric"].annotation)
    assert set(metric) == {"grok_step", *GROK_STEP_COLUMNS}
    assert [float(t.value) for t in Threshold] == list(GROK_THRESHOLDS)
    assert TrainConfig.model_fields["grok_threshold"].default == DEFAULT_GROK_THRESHOLD


def test_the_tracker_records_each_threshold() -> None:
    t = RunTracker("r", grok_threshold=0.99, fit_threshold=0.99, collapse_fraction=0.5)
    t.update(0, 0.5, 0.5, None)
    t.update(10, 1.0, 0.96, None)
    t.update(20, 1.0, 0.995, None)
    assert (t.grok_step_95, t.grok_step_99, t.grok_step) == (10, 20, 20)


def test_no_module_spells_a_grok_step_column_out() -> None:
    # A string constant "grok_step_95" anywhere in the package would be a second declaration;
    # docstrings and type annotations (the search metric's Literal, pinned above) aside.
    found = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        docstrings |= {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.AnnAssign)
            for inner in ast.walk(node.annotation)
        }
        found += [
            f"{path.name}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and node.value in GROK_STEP_COLUMNS
            and id(node) not in docstrings
        ]
    assert found == []
