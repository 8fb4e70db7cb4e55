"""Groups of runs: which config keys group them, a group's label, the runs of each group.

AnalysisError, the user mistake every analysis module raises, lives here, the lowest module of
the statistics (sweepgrok.analysis.stats re-exports all of it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from sweepgrok.analysis.labels import key_labels, key_named, unknown_key_message
from sweepgrok.config.trial import SEED_KEYS

REPLICATE_KEYS = (*SEED_KEYS, "task.data_seed")
"""Seed keys are replicates, not factors: never auto-detected as grouping keys."""
PAIR_KEYS = (SEED_KEYS[0], "task.data_seed")  # a run row's own seed is its train.seed
"""Keys that pair runs across groups (``--paired``): seed s of every variant shares its split."""
BOOKKEEPING_KEYS = ("train.device", "train.threads", "train.checkpoint_every")
"""Config keys that say where and how a run ran: never grouping keys."""
REPEAT_EXCLUDED = (*BOOKKEEPING_KEYS, "train.seeds")
"""Config keys that say how a run ran, not which experiment it is: two runs from two folders
equal in every other config key (seeds included) are the same experiment run twice."""


class AnalysisError(ValueError):
    """A user mistake (unknown key, baseline matching nothing, percent accuracies).

    `param` names the option at fault (``by``, ``baseline``) so a CLI can point at it.
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param



def config_keys(summary: pd.DataFrame) -> list[str]:
    """The config columns (dotted keys) of a run summary."""
    return [c for c in summary.columns if "." in c]


def varying_keys(summary: pd.DataFrame) -> list[str]:
    """Config keys that take more than one value across runs (seeds and bookkeeping excluded)."""
    skip = set(REPLICATE_KEYS) | set(BOOKKEEPING_KEYS)
    return [
        k
        for k in config_keys(summary)
        if k not in skip and summary[k].astype(str).nunique(dropna=False) > 1
    ]


def groupable_keys(summary: pd.DataFrame) -> list[str]:
    """Columns a caller may group by: every config key, plus ``sweep`` and a confirm stage's
    ``arm`` when present."""
    return config_keys(summary) + [k for k in ("sweep", "arm") if k in summary]


def separates_sweeps(by: Sequence[str] | None) -> bool:
    """Grouping by ``sweep``: each folder is its own group, so a repeat is kept in each."""
    return by is not None and "sweep" in by


def resolve_by(summary: pd.DataFrame, by: Sequence[str] | None) -> list[str]:
    """`by` as the summary's columns (each a dotted key or its table label, once), or the
    auto-detected varying keys (a confirm stage's runs: their ``arm``, which names what
    varies)."""
    if by is None:
        if "arm" in summary and summary["arm"].notna().all():
            return ["arm"]
        return varying_keys(summary)
    return list(dict.fromkeys(resolve_key(summary, word, "by") for word in by))


def resolve_key(summary: pd.DataFrame, word: str, param: str) -> str:
    """The grouping key `word` names (dotted, or its label: ``norm``); AnalysisError for
    `param` with the closest name and the keys that vary when it names none."""
    allowed = groupable_keys(summary)
    key = key_named(word, allowed)
    if key is None:
        raise AnalysisError(unknown_key_message(word, allowed, varying_keys(summary)), param)
    return key


def format_value(value: Any) -> str:
    """A config value as it appears in labels: 1.0 -> '1', True -> 'true', NaN -> 'null'."""
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return "null"
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, float | np.floating):
        return f"{float(value):g}"
    return str(value)


def group_label(keys: Sequence[str], values: Sequence[Any]) -> str:
    """'norm=sphere, wd=1': each key's label (sweepgrok.analysis.labels) and its value."""
    if not keys:
        return "all runs"
    names = key_labels(keys)
    return ", ".join(f"{k}={format_value(v)}" for k, v in zip(names, values, strict=True))


def iter_groups(
    summary: pd.DataFrame, by: Sequence[str]
) -> Iterator[tuple[tuple[Any, ...], pd.DataFrame]]:
    """(values of `by`, rows) per group, in sorted order; NaN config values form a group."""
    if not by:
        yield (), summary
        return
    for key, rows in summary.groupby(list(by), dropna=False, sort=True):
        yield tuple(key), rows


def run_labels(summary: pd.DataFrame, by: Sequence[str]) -> pd.Series:
    """run_id -> its group's label (for plots and per-run tables)."""
    parts = [
        pd.Series(group_label(by, values), index=rows["run_id"].to_numpy())
        for values, rows in iter_groups(summary, by)
    ]
    return pd.concat(parts) if parts else pd.Series(dtype=str)
