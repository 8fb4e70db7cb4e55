"""Grokking-delay statistics from sweep Parquet: per-run events, group summaries, comparisons.

Pure pandas / numpy / scipy (no ray, no torch), so a sweep can be analysed offline on a laptop.

Definitions (docs/statistics.md repeats them):

- fit step: first evaluation with ``train_acc >= fit_threshold`` (default 0.99).
- grok step at theta: first evaluation with ``test_acc >= theta``; computed at 0.95 and 0.99.
- delay = grok step - fit step (null when either is missing).
- censored at theta: the run never reached theta within the steps it ran. Its grok time is
  "> steps_run": it is right-censored at ``steps_run`` in every time-to-event statistic, never
  set to the budget and never dropped. Diverged and failed runs are censored the same way (at
  the steps they ran) and count as failures in the success rate.
- collapse onset: first evaluation where ``deff`` (D_eff of metrics/) falls below
  ``collapse_fraction`` (default 0.5) of its running maximum; collapse-to-grok = grok - collapse.

Group statistics (``group_summary``): success rate with a Wilson interval; median and mean grok
step and delay among grokked runs with seeded percentile-bootstrap CIs; the Kaplan-Meier median
grok time over all runs (censored included); the standard error of the mean, std / sqrt(n).

Comparisons (``compare``): speed-up = baseline Kaplan-Meier median / group Kaplan-Meier median
(both count censored runs), with a seeded bootstrap CI. The p-value is the two-sided log-rank
test (``scipy.stats.logrank``), which counts censored runs too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from sweepgrok.analysis.labels import key_labels, key_named, unknown_key_message
from sweepgrok.analysis.survival import km_median, km_median_rows
from sweepgrok.config.thresholds import DEFAULT_GROK_THRESHOLD, GROK_THRESHOLDS, tag
from sweepgrok.config.trial import SEED_KEYS
from sweepgrok.store.columns import progress_panels
from sweepgrok.store.provenance import SUMMARY_PROVENANCE
from sweepgrok.train import events
from sweepgrok.train.events import ACC_EPS, COLLAPSE_FRACTION, FIT_THRESHOLD

log = logging.getLogger(__name__)

REPLICATE_KEYS = (*SEED_KEYS, "task.data_seed")
"""Seed keys are replicates, not factors: never auto-detected as grouping keys."""
PAIR_KEYS = (SEED_KEYS[0], "task.data_seed")  # a run row's own seed is its train.seed
"""Keys that pair runs across groups (``--paired``): seed s of every variant shares its split."""
_BOOKKEEPING_KEYS = ("train.device", "train.threads", "train.checkpoint_every")
REPEAT_EXCLUDED = (*_BOOKKEEPING_KEYS, "train.seeds")
"""Config keys that say how a run ran, not which experiment it is: two runs from two folders
equal in every other config key (seeds included) are the same experiment run twice."""
STOPPED_STATUSES = events.NEVER_GROKS
"""Runs that stopped and can never grok: censored at their budget, never where they stopped."""
SMALL_GROUP = 5
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


class AnalysisError(ValueError):
    """A user mistake (unknown key, baseline matching nothing, percent accuracies).

    `param` names the option at fault (``by``, ``baseline``) so a CLI can point at it.
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


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


# ---------------------------------------------------------------- small estimators


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a success rate k / n (scipy's binomtest)."""
    if n == 0:
        return float("nan"), float("nan")
    ci = sps.binomtest(int(k), int(n)).proportion_ci(confidence, method="wilson")
    return float(ci.low), float(ci.high)


def sem(x: np.ndarray) -> float:
    """Standard error of the mean: sample std / sqrt(n) (not / n, a trap in public code)."""
    x = np.asarray(x, dtype=float)
    if x.size < 2:
        return float("nan")
    return float(np.std(x, ddof=1) / np.sqrt(x.size))


Statistic = Callable[..., np.ndarray]


def bootstrap_ci(
    x: np.ndarray,
    statistic: Statistic = np.median,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """(estimate, low, high): seeded percentile bootstrap of `statistic` (takes ``axis=``).

    Written here rather than with scipy.stats.bootstrap: grok steps lie on the evaluation grid,
    so ties are the rule and BCa degenerates to NaN, and one resample matrix per group is a few
    lines. Fewer than two values give the estimate with a NaN interval.
    """
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    point = float(statistic(x, axis=0))
    if x.size < 2:
        return point, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    boots = statistic(x[rng.integers(0, x.size, size=(n_boot, x.size))], axis=1)
    lo, hi = _percentiles(boots, confidence)
    return point, lo, hi


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    # inverted_cdf picks order statistics: no interpolation between +inf and a finite value.
    alpha = (1.0 - confidence) / 2.0
    finite = values[~np.isnan(values)]
    if finite.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(finite, [alpha, 1.0 - alpha], method="inverted_cdf")
    return float(lo), float(hi)


def _ratio(base: np.ndarray | float, group: np.ndarray | float) -> np.ndarray:
    # inf / finite = inf (baseline median beyond its runs), finite / inf = 0, inf / inf = NaN.
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(base, float) / np.asarray(group, float)


def speedup(
    base_times: np.ndarray,
    base_censored: np.ndarray,
    times: np.ndarray,
    censored: np.ndarray,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """(ratio, low, high): baseline KM median / group KM median, with a seeded bootstrap CI.

    Kaplan-Meier medians count censored runs. A group that groks in under half of its runs
    has no median (+inf): the ratio is then inf (baseline) or 0 (group), and NaN with a NaN
    interval when both are. Runs are resampled independently within each group; resamples
    where both medians are infinite have no ratio and are left out of the interval.
    """
    bt, bc = np.asarray(base_times, float), np.asarray(base_censored, bool)
    gt, gc = np.asarray(times, float), np.asarray(censored, bool)
    if bt.size == 0 or gt.size == 0:
        return float("nan"), float("nan"), float("nan")
    point = float(_ratio(km_median_rows(bt, bc)[0], km_median_rows(gt, gc)[0]))
    if np.isnan(point):
        return point, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    ib = rng.integers(0, bt.size, size=(n_boot, bt.size))
    ig = rng.integers(0, gt.size, size=(n_boot, gt.size))
    boots = _ratio(km_median_rows(bt[ib], bc[ib]), km_median_rows(gt[ig], gc[ig]))
    lo, hi = _percentiles(boots, confidence)
    return point, lo, hi


def speedup_bound(
    base_times: np.ndarray, base_censored: np.ndarray, times: np.ndarray, censored: np.ndarray
) -> float:
    """The ratio with a missing KM median replaced by that group's longest run.

    A median that KM never reaches lies beyond the group's last observed step, so where
    ``speedup`` is inf this is a lower bound on it, and where it is 0 an upper bound.
    """
    if len(base_times) == 0 or len(times) == 0:
        return float("nan")
    b = float(km_median_rows(base_times, base_censored)[0])
    g = float(km_median_rows(times, censored)[0])
    b = _longest_finite(base_times) if np.isinf(b) else b
    g = _longest_finite(times) if np.isinf(g) else g
    return float(_ratio(b, g))


def _longest_finite(times: np.ndarray) -> float:
    finite = np.asarray(times, float)[np.isfinite(times)]
    return float(finite.max()) if finite.size else float("inf")


# ---------------------------------------------------------------- groups


def config_keys(summary: pd.DataFrame) -> list[str]:
    """The config columns (dotted keys) of a run summary."""
    return [c for c in summary.columns if "." in c]


def varying_keys(summary: pd.DataFrame) -> list[str]:
    """Config keys that take more than one value across runs (seeds and bookkeeping excluded)."""
    skip = set(REPLICATE_KEYS) | set(_BOOKKEEPING_KEYS)
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
    out["steps_run_max"] = _longest_finite(times) if n else np.nan
    # Paper 2: accelerated runs collapse earlier and the collapse-to-grok gap shrinks.
    out["collapse_median"] = _median_or_nan(rows["collapse_step"])
    out["collapse_to_grok_median"] = _median_or_nan(rows[f"collapse_to_grok_{t}"])
    if "status" in rows:
        out["n_failed"] = int(rows["status"].isin(STOPPED_STATUSES).sum())
    return out


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

    Columns: the keys, label, n, n_grokked, success_rate (+ _lo/_hi Wilson), grok_median,
    grok_mean, delay_median, delay_mean (each + _lo/_hi bootstrap CI, among grokked runs),
    grok_sem, km_median (Kaplan-Meier, counts censored runs; NaN if under half grokked),
    grok_min, grok_max, steps_run_max, collapse_median (collapse onset) and
    collapse_to_grok_median (grokked runs), n_failed (diverged or failed runs), few_runs
    (fewer than SMALL_GROUP runs: the bootstrap intervals are about the data's range).
    """
    keys = resolve_by(summary, by)
    boot = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
    rows = []
    for values, part in iter_groups(summary, keys):
        rows.append(
            {
                **dict(zip(keys, values, strict=True)),
                "label": group_label(keys, values),
                **_group_stats(part, threshold, boot),
            }
        )
    return pd.DataFrame(rows)
