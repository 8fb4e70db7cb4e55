"""Grokking-delay statistics from sweep Parquet: group summaries, and the one import path of
every statistic the analysis computes.

Pure pandas / numpy / scipy (no ray, no torch), so a sweep can be analysed offline on a laptop.
This module holds the group summary (``group_summary``: one row per group, its columns declared
in sweepgrok.analysis.summary_columns) and how a run's time and censoring are read
(``times_and_censoring``). It re-exports, so that callers import them from here:

- sweepgrok.analysis.runsummary: reading sweep folders into one row per run (``read_sweeps``,
  ``run_summary``, ``load_recorded_runs``); the per-run events are those of
  sweepgrok.train.events (fit step at ``train.fit_threshold``, grok step at each of
  sweepgrok.config.thresholds.GROK_THRESHOLDS, delay, collapse onset);
- sweepgrok.analysis.grouping: grouping keys, group labels, AnalysisError;
- sweepgrok.analysis.estimators: the Wilson interval, the seeded percentile bootstrap, the
  speed-up of Kaplan-Meier medians.

A run that never reached the threshold is right-censored (at the steps it ran; a diverged or
failed run at its budget) in every time-to-event statistic, never dropped. Comparisons
(speed-ups, log-rank tests) are sweepgrok.analysis.comparisons. docs/statistics.md states every
definition for users.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from sweepgrok.analysis import summary_columns
from sweepgrok.analysis.estimators import (
    Statistic,
    bootstrap_ci,
    longest_finite,
    sem,
    speedup,
    speedup_bound,
    wilson_interval,
)
from sweepgrok.analysis.grouping import (
    BOOKKEEPING_KEYS,
    PAIR_KEYS,
    REPEAT_EXCLUDED,
    REPLICATE_KEYS,
    AnalysisError,
    config_keys,
    format_value,
    group_label,
    groupable_keys,
    iter_groups,
    resolve_by,
    resolve_key,
    run_labels,
    separates_sweeps,
    varying_keys,
)
from sweepgrok.analysis.runsummary import (
    METRIC_COLUMNS,
    PROGRESS_COLUMNS,
    PROGRESS_PANELS,
    check_runs_to_analyse,
    default_threshold,
    interrupted_count,
    interrupted_note,
    load_recorded_runs,
    read_sweeps,
    recorded_runs,
    repeat_keys,
    run_events,
    run_summary,
    summarize_sweeps,
)
from sweepgrok.analysis.summary_columns import SMALL_GROUP
from sweepgrok.analysis.survival import km_median
from sweepgrok.config.thresholds import DEFAULT_GROK_THRESHOLD, tag
from sweepgrok.train import events

__all__ = [
    "BOOKKEEPING_KEYS", "METRIC_COLUMNS", "PAIR_KEYS", "PROGRESS_COLUMNS", "PROGRESS_PANELS",
    "REPEAT_EXCLUDED", "REPLICATE_KEYS", "SMALL_GROUP", "STOPPED_STATUSES", "AnalysisError",
    "Statistic", "bootstrap_ci", "check_runs_to_analyse", "config_keys", "default_threshold",
    "format_value", "group_label", "group_summary", "groupable_keys", "interrupted_count",
    "interrupted_note", "iter_groups", "km_median", "load_recorded_runs", "read_sweeps",
    "recorded_runs", "repeat_keys", "resolve_by", "resolve_key", "run_events", "run_labels",
    "run_summary", "sem", "separates_sweeps", "speedup", "speedup_bound", "summarize_sweeps",
    "tag", "times_and_censoring", "varying_keys", "wilson_interval",
]
"""The statistics' public names: this module's, and those of the modules it was split into
(grouping, runsummary, estimators), which callers keep importing from here."""

STOPPED_STATUSES = events.NEVER_GROKS
"""Runs that stopped and can never grok: censored at their budget, never where they stopped."""


def times_and_censoring(rows: pd.DataFrame, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """(time, censored) per run: the grok step, or the step at which the run is censored.

    A run that ran out of steps (or was stopped from outside) is censored at ``steps_run``. A
    run that diverged or failed can never grok: it is censored at its budget
    (``train.max_steps``, or +inf when unknown), so it stays in every risk set; censoring it
    where it stopped would treat it as a run that might still have grokked (informative
    censoring). A run with no recorded steps and no such status is censored at 0.
    """
    grok = rows[f"grok_step_{tag(threshold)}"].to_numpy(dtype=float, na_value=np.nan)
    censored = np.isnan(grok)
    steps = rows["steps_run"].to_numpy(dtype=float, na_value=0.0)
    if "status" in rows:
        budget = np.full(len(rows), np.inf)
        if "train.max_steps" in rows:
            budget = rows["train.max_steps"].to_numpy(dtype=float, na_value=np.inf)
        stopped = rows["status"].isin(STOPPED_STATUSES).to_numpy(bool)
        steps = np.where(stopped, np.maximum(budget, steps), steps)
    return np.where(censored, steps, grok), censored


def _median_or_nan(column: pd.Series) -> float:
    values = column.dropna().to_numpy(dtype=float)
    return float(np.median(values)) if values.size else float("nan")


def _group_stats(rows: pd.DataFrame, threshold: float, boot: Mapping[str, Any]) -> dict[str, Any]:
    """The statistics of one group's runs: each column summary_columns declares."""
    t = tag(threshold)
    times, censored = times_and_censoring(rows, threshold)
    grok = times[~censored]
    delay = rows[f"delay_{t}"].dropna().to_numpy(dtype=float)
    n, k = len(rows), int((~censored).sum())
    lo, hi = wilson_interval(k, n, boot["confidence"])
    out: dict[str, Any] = {"n": n, "n_grokked": k, "success_rate": k / n if n else np.nan}
    out |= {"success_lo": lo, "success_hi": hi}
    for name, values in (("grok", grok), ("delay", delay)):
        for stat_name, fn in (("median", np.median), ("mean", np.mean)):
            est, s_lo, s_hi = bootstrap_ci(values, fn, **boot)
            out |= {f"{name}_{stat_name}": est, f"{name}_{stat_name}_lo": s_lo}
            out[f"{name}_{stat_name}_hi"] = s_hi
    out["grok_sem"] = sem(grok)
    # A percentile bootstrap over 2-4 runs is about their range, with coverage far below 95%.
    out["few_runs"] = n < SMALL_GROUP
    out["km_median"] = km_median(times, censored)
    out["grok_min"] = float(grok.min()) if k else np.nan
    out["grok_max"] = float(grok.max()) if k else np.nan
    out["steps_run_max"] = longest_finite(times) if n else np.nan
    # Paper 2: accelerated runs collapse earlier and the collapse-to-grok gap shrinks.
    out["collapse_median"] = _median_or_nan(rows["collapse_step"])
    out["collapse_to_grok_median"] = _median_or_nan(rows[f"collapse_to_grok_{t}"])
    if "status" in rows:
        out["n_failed"] = int(rows["status"].isin(STOPPED_STATUSES).sum())
    return out


def _in_declared_order(stats: dict[str, Any]) -> dict[str, Any]:
    """`stats` in the order of summary_columns.SUMMARY_COLUMNS; a statistic computed but not
    declared there is a mistake (no table, definition or doc would know it): KeyError."""
    undeclared = sorted(set(stats) - set(summary_columns.NAMES))
    if undeclared:
        raise KeyError(f"declare {', '.join(undeclared)} in sweepgrok/analysis/summary_columns.py")
    return {name: stats[name] for name in summary_columns.NAMES if name in stats}


def group_summary(
    summary: pd.DataFrame,
    by: Sequence[str] | None = None,
    *,
    threshold: float = DEFAULT_GROK_THRESHOLD,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """One row per group of runs (the `by` keys, default: the config keys that vary).

    Columns: the keys, label, then the statistics in the order and with the meaning that
    sweepgrok.analysis.summary_columns.SUMMARY_COLUMNS declares (docs/statistics.md lists
    them); ``n_failed`` only when the runs have a status.
    """
    keys = resolve_by(summary, by)
    boot = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
    rows = []
    for values, part in iter_groups(summary, keys):
        rows.append(
            {
                **dict(zip(keys, values, strict=True)),
                "label": group_label(keys, values),
                **_in_declared_order(_group_stats(part, threshold, boot)),
            }
        )
    return pd.DataFrame(rows)
