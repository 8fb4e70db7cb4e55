"""Reading sweep folders into one row per run: the runs of several folders kept apart, repeats
left out, events recomputed from metrics/, runs that have not ended set aside.

Pure pandas / numpy (no ray, no torch). Definitions of the per-run events: sweepgrok.train.events
and docs/statistics.md ("Per run"); sweepgrok.analysis.stats re-exports all of it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sweepgrok.analysis.grouping import REPEAT_EXCLUDED, AnalysisError, config_keys
from sweepgrok.config.thresholds import DEFAULT_GROK_THRESHOLD, GROK_THRESHOLDS, tag
from sweepgrok.store.columns import progress_panels
from sweepgrok.store.provenance import SUMMARY_PROVENANCE
from sweepgrok.train import events
from sweepgrok.train.events import ACC_EPS, COLLAPSE_FRACTION, FIT_THRESHOLD

log = logging.getLogger(__name__)

"""Below this many runs a percentile bootstrap interval is about the data's range (flagged)."""
PROGRESS_PANELS: tuple[tuple[str, tuple[str, ...]], ...] = progress_panels()
"""The progress measures of metrics/ that the figures show (plots.progress_curves), one panel
each: its y label, then the columns drawn in it (solid, dashed, dotted); declared with the
columns (sweepgrok.store.columns, Column.panel)."""
PROGRESS_COLUMNS = tuple(column for _, columns in PROGRESS_PANELS for column in columns)
"""Every column of PROGRESS_PANELS, in order."""
METRIC_COLUMNS = ("step", "train_acc", "test_acc", "deff", *PROGRESS_COLUMNS)
"""The metrics/ columns the statistics and figures read (Parquet projection keeps reads
fast)."""

def read_sweeps(
    sweep_dirs: str | Path | Iterable[str | Path],
    *,
    skip_damaged: bool = False,
    keep_repeats: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(metrics, runs) of one or more sweep folders, each deduplicated, metrics projected.

    Runs are keyed by folder as well as id (docs/statistics.md, "Several folders"): each
    folder is read on its own, so two folders are two sets of runs, never merged by run id.
    A run whose experiment (REPEAT_EXCLUDED) an earlier folder given holds too is left out,
    with a warning naming how many of which folder, unless `keep_repeats` (``--by sweep``:
    then each folder is its own group). A run id an earlier folder holds too is read as
    ``<sweep>/<run_id>``; sweep names two folders share take their parent folder's name.

    A damaged part file raises sweepgrok.store.parts.DamagedPart (`skip_damaged`: left out, warned).
    """
    from sweepgrok.store.sink import read_metrics, read_runs

    dirs = [Path(sweep_dirs)] if isinstance(sweep_dirs, str | Path) else list(map(Path, sweep_dirs))
    folders = []
    for d in dirs:
        runs = read_runs(d, skip_damaged=skip_damaged)
        # A run row without a sweep name takes its folder's (--by sweep tells folders apart).
        runs["sweep"] = runs["sweep"].fillna(d.name)
        metrics = read_metrics(d, list(METRIC_COLUMNS), skip_damaged=skip_damaged)
        _check_metrics_present(d, runs, metrics["run_id"])
        folders.append(_Folder(d, runs, metrics))
    if not folders:
        return read_metrics([], list(METRIC_COLUMNS)), read_runs([])
    _separate_sweep_names(folders)
    if not keep_repeats:
        _drop_repeats(folders)
    _qualify_shared_ids(folders)
    runs = pd.concat([f.runs for f in folders], ignore_index=True)
    metrics = pd.concat([f.metrics for f in folders], ignore_index=True)
    if len(folders) > 1:  # the readers' order, (run_id, step), across the folders too
        metrics = metrics.sort_values(["run_id", "step"], kind="stable", ignore_index=True)
    return metrics, runs


@dataclass
class _Folder:
    """One sweep folder's rows, each deduplicated by its reader."""

    path: Path
    runs: pd.DataFrame
    metrics: pd.DataFrame


def _separate_sweep_names(folders: Sequence[_Folder]) -> None:
    """A sweep name that two folders share (two `<storage>/<name>` of one name) becomes
    ``<parent>/<name>`` in each (then ``#<position>`` among the folders given, when parents
    share a name too), so that ``--by sweep`` never pools two folders."""
    owners: dict[str, set[int]] = {}
    for i, folder in enumerate(folders):
        for name in folder.runs["sweep"].astype(str).unique():
            owners.setdefault(name, set()).add(i)
    shared = {name for name, held in owners.items() if len(held) > 1}
    used: set[str] = set()
    for i, folder in enumerate(folders):
        names = folder.runs["sweep"].astype(str)
        rename = {}
        for name in names.unique():
            label = f"{folder.path.resolve().parent.name}/{name}" if name in shared else name
            rename[name] = f"{label} #{i + 1}" if name in shared and label in used else label
        folder.runs["sweep"] = names.map(rename)
        used |= set(rename.values())


def repeat_keys(runs: pd.DataFrame) -> list[str]:
    """The columns that say which experiment a run is: every config key but REPEAT_EXCLUDED."""
    return [k for k in config_keys(runs) if k not in REPEAT_EXCLUDED]


def _drop_repeats(folders: Sequence[_Folder]) -> None:
    """Leave out each run whose experiment an earlier folder holds (the first folder given
    keeps it), with one warning naming how many left which folder."""
    seen: pd.DataFrame | None = None
    dropped: list[tuple[int, Path]] = []
    for folder in folders:
        keys = repeat_keys(folder.runs)
        mine = folder.runs[keys].drop_duplicates()
        if seen is not None and len(folder.runs):
            # merge treats null as equal to null: a key no run sets matches itself.
            hit = folder.runs[keys].merge(seen.assign(_seen=True), how="left", on=keys)
            repeat = hit["_seen"].fillna(False).to_numpy(bool)
            if repeat.any():
                ids = set(folder.runs.loc[repeat, "run_id"])
                dropped.append((int(repeat.sum()), folder.path))
                folder.runs = folder.runs[~repeat].reset_index(drop=True)
                folder.metrics = folder.metrics[~folder.metrics["run_id"].isin(ids)]
        seen = mine if seen is None else pd.concat([seen, mine]).drop_duplicates()
    if dropped:
        log.warning(
            "left out %s run(s) that repeat a run of a folder given before them (the same "
            "config and seed, see docs/statistics.md): %s; --by sweep keeps every folder's "
            "runs, each folder its own group",
            sum(n for n, _ in dropped),
            ", ".join(f"{n} from {path}" for n, path in dropped),
        )


def _qualify_shared_ids(folders: Sequence[_Folder]) -> None:
    """A run id an earlier folder holds too (two `train` folders of one config) is read as
    ``<sweep>/<run_id>``: one id, one run, in every table and figure."""
    taken: set[str] = set()
    for folder in folders:
        ids = set(folder.runs["run_id"]) | set(folder.metrics["run_id"])
        shared = ids & taken
        if shared:
            sweep = folder.runs.set_index("run_id")["sweep"]
            name = {r: f"{sweep.get(r, folder.path.name)}/{r}" for r in shared}
            for frame in (folder.runs, folder.metrics):
                frame["run_id"] = frame["run_id"].map(lambda r, n=name: n.get(r, r))
        taken |= set(folder.runs["run_id"]) | set(folder.metrics["run_id"])


def _check_metrics_present(sweep_dir: Path, runs: pd.DataFrame, metric_ids: pd.Series) -> None:
    # Without their evaluations, runs that ran would all count as censored: refuse instead.
    ran = runs[runs["status"].isin((*events.GROKKED_STATUSES, "censored"))]
    if len(ran) and not ran["run_id"].isin(metric_ids).any():
        raise AnalysisError(
            f"{sweep_dir}: runs/ records {len(ran)} run(s) that ran, but metrics/ holds none of "
            "their evaluations (missing, empty or left out): their grok steps are unknown"
        )


# ---------------------------------------------------------------- per run


def _check_fractions(metrics: pd.DataFrame) -> None:
    # Trap in public code: accuracies logged in percent. Refuse rather than report no grokking.
    for col in ("train_acc", "test_acc"):
        top, bottom = metrics[col].max(), metrics[col].min()
        if pd.notna(top) and top > 1.0 + ACC_EPS:
            raise AnalysisError(
                f"{col} must be a fraction in [0, 1] (max is {top:g}: logged in percent?)"
            )
        if pd.notna(bottom) and bottom < -ACC_EPS:
            raise AnalysisError(f"{col} must be a fraction in [0, 1] (min is {bottom:g})")


def run_events(metrics: pd.DataFrame, **kwargs: Any) -> pd.DataFrame:
    """sweepgrok.train.events.run_events after refusing accuracies logged in percent."""
    _check_fractions(metrics)
    return events.run_events(metrics, **kwargs)


def run_summary(
    metrics: pd.DataFrame,
    runs: pd.DataFrame | None = None,
    *,
    fit_threshold: float = FIT_THRESHOLD,
    grok_thresholds: Sequence[float] = GROK_THRESHOLDS,
    collapse_fraction: float = COLLAPSE_FRACTION,
) -> pd.DataFrame:
    """One row per run: events from metrics/ joined with runs/ (status and config columns).

    Columns: run_id, in_runs, sweep, status, steps_run, peak_test_acc, fit_step, for each theta
    grok_step_<t>, censored_<t>, delay_<t>, collapse_to_grok_<t>, then collapse_step, every
    config key (dotted name) and the provenance runs/ holds (SUMMARY_PROVENANCE: code, torch,
    device; what a rerun must match). The grok steps are recomputed from metrics/, not trusted from
    runs/. steps_run is the larger of runs/ ``steps_run`` and the last evaluated step; a run in
    runs/ without metrics (failed before its first evaluation) is kept, censored.
    """
    ev = run_events(
        metrics,
        fit_threshold=fit_threshold,
        grok_thresholds=grok_thresholds,
        collapse_fraction=collapse_fraction,
    )
    config: pd.DataFrame | None = None
    if runs is not None and len(runs):
        r = runs.drop_duplicates("run_id", keep="last").set_index("run_id")
        index = ev.index.union(r.index)
        ev = ev.reindex(index)
        if "steps_run" in r:
            both = pd.concat([ev["steps_run"], r["steps_run"].reindex(index)], axis=1)
            ev["steps_run"] = both.max(axis=1).astype("Int64")
        if "status" in r:
            ev.insert(0, "status", r["status"].reindex(index))
        if "sweep" in r:
            ev.insert(0, "sweep", r["sweep"].reindex(index))
        if "arm" in r and r["arm"].notna().any():  # a confirm stage's runs
            ev.insert(0, "arm", r["arm"].reindex(index))
        # False: metrics but no run row yet (a run still in progress, or its driver died).
        ev.insert(0, "in_runs", index.isin(r.index))
        kept = [c for c in r.columns if "." in c] + [c for c in SUMMARY_PROVENANCE if c in r]
        config = r[kept].reindex(index)
    for theta in grok_thresholds:
        t = tag(theta)
        grok = ev[f"grok_step_{t}"]
        ev[f"censored_{t}"] = grok.isna()
        ev[f"delay_{t}"] = grok - ev["fit_step"]
        ev[f"collapse_to_grok_{t}"] = grok - ev["collapse_step"]
    if config is not None:
        ev = ev.join(config)
    ev.index.name = "run_id"
    return ev.reset_index()


def recorded_runs(
    summary: pd.DataFrame, *, censor_interrupted: bool = False
) -> tuple[pd.DataFrame, int]:
    """(runs that have a final runs/ row, how many were left out).

    A run with metrics but no run row is still running (or lost its driver): its config is
    unknown, so it cannot join a group. An interrupted run (its row says ``interrupted``) has
    not ended either: ``--resume`` finishes it; censoring it where the signal came would count
    it as not grokked in the success rate. Both are left out, unless `censor_interrupted`:
    then an interrupted run is kept, its grok step where it grokked before the signal, else
    censored at its last evaluated step (its row's ``steps_run``). That is administrative
    censoring (the sweep was stopped, not the run for its outcome), which Kaplan-Meier medians
    and the log-rank test allow; the success rate still counts such a run as not grokked.
    When no run has a row yet, every run is kept.
    """
    from sweepgrok.store.sink import INTERRUPTED

    if "in_runs" not in summary or not summary["in_runs"].any():
        return summary, 0
    final = summary["in_runs"]
    if "status" in summary and not censor_interrupted:
        final = final & (summary["status"] != INTERRUPTED)
    kept = summary[final]
    return kept, len(summary) - len(kept)


def check_runs_to_analyse(summary: pd.DataFrame, pending: int, sweep_dirs: Sequence[Path]) -> None:
    """Refuse to analyse folders that leave no run to analyse: none has ended yet (all
    interrupted or still running, as right after a Ctrl-C), no part file was written yet, or
    --skip-damaged left every part out. An empty table or report would say nothing (the report
    used to fail half-written), so say what to do instead."""
    if len(summary):
        return
    where = ", ".join(str(d) for d in sweep_dirs)
    if pending:
        raise AnalysisError(
            f"{where}: no run has ended yet ({pending} interrupted or still running): `--resume` "
            "on the command that ran them finishes them, and --censor-interrupted analyses the "
            "interrupted ones as censored where they stopped"
        )
    raise AnalysisError(
        f"{where}: no run to analyse: no part file holds one yet, or --skip-damaged left every "
        "part out"
    )


def interrupted_count(summary: pd.DataFrame) -> int:
    """How many runs of `summary` a signal interrupted (kept by censor_interrupted)."""
    from sweepgrok.store.sink import INTERRUPTED

    return int((summary["status"] == INTERRUPTED).sum()) if "status" in summary else 0


def interrupted_note(count: int) -> str:
    """What a table or report says of the interrupted runs it keeps."""
    return (f"{count} interrupted run(s) kept (--censor-interrupted): each groks where it did "
            "before the signal, else is censored at its last evaluated step; the success rate "
            "counts it as not grokked")


def default_threshold(summary: pd.DataFrame) -> float:
    """The runs' own train.grok_threshold when they share one of GROK_THRESHOLDS, else
    DEFAULT_GROK_THRESHOLD."""
    if "train.grok_threshold" in summary:
        values = summary["train.grok_threshold"].dropna().unique()
        if len(values) == 1 and any(np.isclose(values[0], t) for t in GROK_THRESHOLDS):
            return float(min(GROK_THRESHOLDS, key=lambda t: abs(t - values[0])))
    return DEFAULT_GROK_THRESHOLD


def load_recorded_runs(
    sweep_dirs: str | Path | Iterable[str | Path],
    *,
    skip_damaged: bool = False,
    censor_interrupted: bool = False,
    keep_repeats: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """(metrics, run summary of the runs with a runs/ row, how many runs have none yet): what
    `sweepgrok analyze` and the report read (see read_sweeps and recorded_runs)."""
    metrics, runs = read_sweeps(sweep_dirs, skip_damaged=skip_damaged, keep_repeats=keep_repeats)
    summary, pending = recorded_runs(run_summary(metrics, runs),
                                     censor_interrupted=censor_interrupted)
    return metrics, summary, pending


def summarize_sweeps(sweep_dirs: str | Path | Iterable[str | Path], **kwargs: Any) -> pd.DataFrame:
    """run_summary of one or more sweep folders (kwargs go to run_summary)."""
    metrics, runs = read_sweeps(sweep_dirs)
    return run_summary(metrics, runs, **kwargs)
