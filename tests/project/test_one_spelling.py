"""One fact in one place: a status group is declared once (sweepgrok.train.events) and every
other module names it, never spells its members again. A grep over the package, as the
import-rule test reads imports."""

from __future__ import annotations

import re
from pathlib import Path

from sweepgrok.train import events

PACKAGE = Path(__file__).resolve().parents[2] / "sweepgrok"
HOME = PACKAGE / "train" / "events.py"
GROUPS = {"NEVER_GROKS": events.NEVER_GROKS, "GROKKED_STATUSES": events.GROKKED_STATUSES}


def _spelled(members: tuple[str, ...]) -> re.Pattern[str]:
    """The members quoted side by side, in either order, in a tuple, list or set."""
    a, b = (re.escape(f'"{m}"') for m in members)
    return re.compile(rf"[(\[{{]\s*({a}\s*,\s*{b}|{b}\s*,\s*{a})\s*[,)\]}}]")


def test_a_status_group_is_spelled_only_where_it_is_declared() -> None:
    stray = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME:
            continue
        text = path.read_text()
        for name, members in GROUPS.items():
            if _spelled(members).search(text):
                stray.append(f"{path.relative_to(PACKAGE.parent)}: use events.{name}")
    assert not stray, stray


def test_the_grep_finds_a_second_spelling() -> None:
    pattern = _spelled(events.NEVER_GROKS)
    assert pattern.search('if status in ("diverged", "failed"):')
    assert pattern.search("if status in {'x'} or s in ['failed', 'diverged']".replace("'", '"'))
    assert not pattern.search('if status in ("censored", *NEVER_GROKS):')


def test_the_search_metrics_come_from_the_declared_thresholds() -> None:
    from typing import get_args

    from sweepgrok.config.search_file import SearchSection
    from sweepgrok.config.thresholds import GROK_STEP_COLUMNS

    metrics = get_args(SearchSection.model_fields["metric"].annotation)
    assert metrics == ("grok_step", *GROK_STEP_COLUMNS)


def test_every_figure_defaults_to_the_declared_threshold() -> None:
    import importlib
    import inspect
    import pkgutil

    from sweepgrok import analysis
    from sweepgrok.config.thresholds import DEFAULT_GROK_THRESHOLD

    # plots and the modules that draw its figures (curve_figures, heatmap_figure, ...).
    modules = [
        importlib.import_module(f"{analysis.__name__}.{info.name}")
        for info in pkgutil.iter_modules(analysis.__path__)
        if info.name == "plots" or info.name.endswith(("_figure", "_figures"))
    ]
    defaults = {
        name: inspect.signature(fn).parameters["threshold"].default
        for module in modules
        for name, fn in inspect.getmembers(module, inspect.isfunction)
        if fn.__module__ == module.__name__ and "threshold" in inspect.signature(fn).parameters
    }
    allowed = (DEFAULT_GROK_THRESHOLD, inspect.Parameter.empty)
    odd = {n: d for n, d in defaults.items() if d not in allowed}
    assert {"accuracy_curves", "grok_heatmap", "survival_curves", "plot_all"} <= set(defaults)
    assert not odd, odd
