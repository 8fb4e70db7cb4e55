"""Where a running or finished sweep stands, read from its sweep folder alone (no Ray).

What each trial state means, and where it is read from:

- **done**: the trial ended and its runs have their run rows (``runs/``, any status but
  ``failed``); or Ray Tune's experiment snapshot (``tune/experiment_state-*.json``) says
  TERMINATED. A search's trials come from its Optuna study instead (``study.json`` names it):
  COMPLETE or PRUNED.
- **failed**: a run row says ``failed`` and Tune no longer runs the trial, or Tune says ERROR;
  a search's: Optuna FAIL. ``--resume`` re-runs them.
- **running**: Tune's snapshot (or Optuna) says RUNNING and not all its run rows are written.
  A search's trial that Optuna calls RUNNING but Tune's snapshot PENDING (sampled, waiting for
  resources) is pending.
  A driver that was killed leaves its trials RUNNING in the snapshot: the last write time
  tells a stalled sweep from a running one.
- **pending**: every other trial of the sweep file (``sweep.yaml``: a grid's trials, a
  search's num_samples): not started yet, or waiting for resources. A search that ended
  (``search_summary.json`` written, nothing running) has exactly the trials it ran; one
  running with ``--num-samples`` shows the file's num_samples as its total.

Tune writes its snapshot every few seconds, so the states can lag the run rows by that much;
the run rows win where they say more (a trial whose run rows are all written is done).

**The driver** (sweepgrok.store.heartbeat, ``driver.json``): while the driver that runs the sweep is
alive, the counts are the ones it holds (what runs is what Ray runs, not a snapshot's lag).
When it is gone (it stopped on Ctrl-C or SIGTERM, or it was killed: its heartbeat is stale or
its pid is not alive on this host) nothing runs: the trials the folder still calls running are
**interrupted** (``--resume`` continues them), the sweep is "interrupted (driver not running
since HH:MM)" while any trial is unfinished, and there is no time-left estimate; a search's
total is at least its driver's (``--num-samples``). A folder without a heartbeat (an older
version's) is read as before. A driver that stops reads its folder this way too
(``driver_stopped``): the counts its last heartbeat and its interrupted line give are the ones
``status`` gives afterwards.

Runs and grok steps come from ``runs/`` only (one row per run, written when it ends; no
metrics are read): a group's ``grok_median`` is the median grok step of its runs that grokked
(biased low while slow runs are still running), ``km_median`` the Kaplan-Meier median over
its ended runs, those that did not grok counted as censored (sweepgrok.analysis.stats, as in
``sweepgrok analyze``; null while under half have grokked).

The time left is ``mean duration of the done trials x (pending + running / 2) / max(running, 1)``
(a trial that runs is on average half done; as many run at once as run now); none before a
trial is done.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweepgrok.config.trial import ConfigError, seed_count
from sweepgrok.search.study import SUMMARY_FILE
from sweepgrok.store import heartbeat
from sweepgrok.store.sweepdir import PART_FOLDERS, SWEEP_FILE, holds_sweep

if TYPE_CHECKING:
    import pandas as pd

TRIAL_STATES = ("done", "running", "pending", "failed")
"""The trial states `sweepgrok status` counts (see the module doc)."""
TUNE_STATES = {"TERMINATED": "done", "ERROR": "failed", "RUNNING": "running"}
"""Tune's trial status -> ours (PENDING, PAUSED and any other: pending)."""
OPTUNA_STATES = {"COMPLETE": "done", "PRUNED": "done", "FAIL": "failed", "RUNNING": "running"}
"""Optuna's trial state -> ours (WAITING: pending)."""


class NotASweep(ConfigError):
    """The folder holds no sweep (no runs/, tune/, sweep.yaml, study.json or marker)."""


@dataclass
class Trial:
    """One trial as the folder records it."""

    trial_id: str
    state: str
    seconds: float | None = None
    """How long it ran (done trials; Tune's time_total_s or Optuna's start-to-end)."""


@dataclass
class SweepStatus:
    """What `sweepgrok status` prints (as_json is its stable JSON form)."""

    sweep_dir: Path
    kind: str
    """grid, search, or runs (a folder of runs without a sweep file: `sweepgrok train --out`)."""
    total: int
    counts: dict[str, int]
    runs: int
    grokked: int
    threshold: float
    groups: list[dict[str, Any]]
    last_write: float | None
    mean_trial_s: float | None
    time_left_s: float | None
    search: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    driver: dict[str, Any] | None = None
    """state (running, interrupted, ended), pid, host, since (the heartbeat's last time),
    resume (the command that continues); None without a heartbeat (see the module doc)."""


# ---- the sweep file ------------------------------------------------------------------------


def _sweep_spec(sweep_dir: Path, notes: list[str]) -> tuple[str, Any]:
    """(kind, validated spec or None) from the folder's copy of its sweep file."""
    from sweepgrok.config.grid_file import load_grid, read_sweep_doc
    from sweepgrok.config.search_file import is_search_doc, load_search

    path = sweep_dir / SWEEP_FILE
    if not path.is_file():
        return ("search" if (sweep_dir / "study.json").exists() else "runs"), None
    try:
        doc = read_sweep_doc(path)
        kind = "search" if is_search_doc(doc) else "grid"
        return kind, (load_search(path) if kind == "search" else load_grid(path))
    except ConfigError as err:  # e.g. a base: path relative to the original file
        notes.append(f"{path}: not readable as a sweep file ({err}): totals from the trials seen")
        kind = "search" if (sweep_dir / "study.json").exists() else "grid"
        return kind, None


# ---- trials --------------------------------------------------------------------------------


def _newest(paths: Iterable[Path]) -> Path | None:
    found = [p for p in paths if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def tune_trials(sweep_dir: Path) -> list[dict[str, Any]]:
    """Trials of Tune's newest experiment snapshot: trial_id, status, seconds, n_runs.

    The snapshot is Tune's internal format: what cannot be read is skipped (no Tune state)."""
    snapshot = _newest((sweep_dir / "tune").glob("experiment_state-*.json"))
    if snapshot is None:
        return []
    try:
        entries = json.loads(snapshot.read_text())["trial_data"]
        return [_tune_trial(json.loads(meta), json.loads(run)) for meta, run in entries]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _tune_trial(meta: Mapping[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
    last = run.get("last_result") or {}
    config = meta.get("config") or {}
    return {
        "trial_id": str(meta["trial_id"]),
        "status": str(meta.get("status")),
        "seconds": last.get("time_total_s"),
        "n_runs": seed_count(config.get("cfg", {})),
        "optuna_trial": (config.get("sweep") or {}).get("optuna_trial"),
    }


def grid_trials(runs: pd.DataFrame, tune: list[dict[str, Any]]) -> list[Trial]:
    """Each trial's state from Tune's snapshot and the run rows (see the module doc)."""
    ids = runs["trial_id"].fillna(runs["run_id"]) if len(runs) else runs["run_id"]
    rows = {str(k): list(v) for k, v in runs.groupby(ids)["status"]} if len(runs) else {}
    known = {t["trial_id"]: t for t in tune}
    out = []
    for trial_id in dict.fromkeys([*known, *rows]):
        info = known.get(trial_id, {})
        # Only a trial Tune saw end has its whole duration in the snapshot.
        seconds = info.get("seconds") if info.get("status") == "TERMINATED" else None
        out.append(Trial(trial_id, _grid_state(info, rows.get(trial_id, [])), seconds))
    return out


def _grid_state(info: Mapping[str, Any], statuses: list[str]) -> str:
    tune_state = TUNE_STATES.get(str(info.get("status")), "pending") if info else None
    from sweepgrok.store.sink import ENDED_STATUSES

    # An `interrupted` run row is not an end: its run continues on --resume.
    ok = sum(s in ENDED_STATUSES and s != "failed" for s in statuses)
    if "failed" in statuses and tune_state not in ("running", "pending"):
        return "failed"
    if statuses and ok >= int(info.get("n_runs", 1)):
        return "done"
    if tune_state is None:  # rows but no snapshot entry yet: its other runs still run
        return "running"
    return tune_state


def search_trials(sweep_dir: Path) -> tuple[list[Trial], dict[str, Any] | None]:
    """The study's trials and its best objective (None without a study on disk)."""
    from sweepgrok.search import study as studies

    record = studies.read_study_record(sweep_dir)
    if record is None or not Path(str(record["storage"]).removeprefix("sqlite:///")).exists():
        return [], None
    try:
        study = studies.load_study(record)
    except KeyError:  # optuna: the study is not in its storage yet
        return [], None
    # Sampled by Optuna (RUNNING there) but never started: Tune's snapshot says PENDING.
    waiting = {t["optuna_trial"] for t in tune_trials(sweep_dir) if t["status"] == "PENDING"}
    trials = []
    for t in study.get_trials(deepcopy=False):
        state = OPTUNA_STATES.get(t.state.name, "pending")
        if state == "running" and t.number in waiting:
            state = "pending"
        seconds = None
        if t.datetime_start and t.datetime_complete:
            seconds = (t.datetime_complete - t.datetime_start).total_seconds()
        trials.append(Trial(str(t.number), state, seconds))
    best = studies.best_value(study)
    best_trial = study.best_trial.number if best is not None else None
    mode = "min" if study.direction.name == "MINIMIZE" else "max"
    search = {"study": record["study_name"], "mode": mode, "best_objective": best,
              "best_trial": best_trial}
    return trials, search


# ---- runs and groups -----------------------------------------------------------------------


def group_keys(kind: str, spec: Any, runs: pd.DataFrame) -> list[str]:
    """A grid's swept keys (seeds are replicates); a search: none (every trial differs);
    without a readable sweep file, the config keys that vary among the run rows."""
    from sweepgrok.analysis import stats

    if kind == "search":
        return []
    keys = spec.varying if spec is not None else stats.varying_keys(runs)
    return [k for k in keys if k not in stats.REPLICATE_KEYS and k in runs]


STATUS_NAMES = {"n": "runs", "n_grokked": "grokked"}
"""The JSON names `status` gives the group summary columns it shows (summary_columns.STATUS)
where they differ from group_summary's (scripts read them: kept)."""


def status_name(column: str) -> str:
    """The key of group summary column `column` in a group of `status --json`."""
    return STATUS_NAMES.get(column, column)


def group_rows(runs: pd.DataFrame, keys: list[str], threshold: float) -> list[dict[str, Any]]:
    """Per group of run rows: its group and label, then each column summary_columns shows in
    `status` (runs, grokked, grok_median among the grokked runs, km_median), by status_name."""
    import numpy as np

    from sweepgrok.analysis import stats, summary_columns
    from sweepgrok.analysis.survival import km_median

    out = []
    for values, rows in stats.iter_groups(runs, keys):
        times, censored = stats.times_and_censoring(rows, threshold)
        grokked = times[~censored]
        computed = {
            "n": len(rows),
            "n_grokked": int(grokked.size),
            "grok_median": float(np.median(grokked)) if grokked.size else None,
            "km_median": _finite(km_median(times, censored)),
        }
        shown = summary_columns.shown_in(summary_columns.STATUS)
        out.append(
            {
                "group": {k: _plain(v) for k, v in zip(keys, values, strict=True)},
                "label": stats.group_label(keys, values),
                **{status_name(c.name): computed[c.name] for c in shown},
            }
        )
    return out


def _plain(value: Any) -> Any:
    """A pandas / numpy cell as a JSON value."""
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and value != value else value


def _finite(x: float) -> float | None:
    return float(x) if x == x and abs(x) != float("inf") else None


# ---- time ----------------------------------------------------------------------------------


def last_write(sweep_dir: Path) -> float | None:
    """Newest modification time among the files the sweep writes (top level, part folders,
    Tune's folder; not its checkpoints)."""
    newest = None
    for folder in (sweep_dir, *(sweep_dir / k for k in (*PART_FOLDERS, "tune"))):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name == heartbeat.HEARTBEAT_FILE or entry.name.startswith("."):
                continue  # the driver's heartbeat is refreshed while nothing is written
            if entry.is_file(follow_symlinks=False):
                mtime = entry.stat(follow_symlinks=False).st_mtime
                newest = mtime if newest is None else max(newest, mtime)
    return newest


def time_left(trials: list[Trial], counts: Mapping[str, int]) -> tuple[float | None, float | None]:
    """(mean seconds of the done trials, estimated seconds left) (see the module doc)."""
    durations = [t.seconds for t in trials if t.state == "done" and t.seconds is not None]
    if not durations:
        return None, None
    mean = sum(durations) / len(durations)
    running = counts["running"]
    return mean, mean * (counts["pending"] + running / 2) / max(running, 1)


# ---- all of it -----------------------------------------------------------------------------


def planned_thresholds(spec: Any) -> pd.DataFrame:
    """The sweep file's train.grok_threshold per trial, for a sweep with no run recorded yet
    (otherwise its status would name the default threshold, not the sweep's)."""
    import pandas as pd

    key = "train.grok_threshold"
    if spec is None:
        values: list[Any] = []
    elif hasattr(spec, "trials"):  # a grid: every expanded trial's full flat config
        values = [trial.flat.get(key) for trial in spec.trials]
    else:  # a search: one base config for every trial
        values = [spec.base.get(key)]
    return pd.DataFrame({key: [v for v in values if v is not None]}, dtype=float)


@dataclass
class Counted:
    """A sweep folder's trials, counted (what read_status builds on)."""

    kind: str
    spec: Any
    runs: pd.DataFrame
    trials: list[Trial]
    total: int
    counts: dict[str, int]
    driver: dict[str, Any] | None
    search: dict[str, Any] | None
    notes: list[str]


def count_trials(
    sweep_dir: Path, *, skip_damaged: bool = False, driver_stopped: bool = False
) -> Counted:
    """The folder's trials and their counts (see the module doc), without the statistics of
    read_status (no scipy: a driver that stops calls it). Raises as read_status does."""
    from sweepgrok.store.sink import read_runs

    if not sweep_dir.is_dir() or not holds_sweep(sweep_dir):
        raise NotASweep(
            f"{sweep_dir}: not a sweep folder (no runs/, tune/, {SWEEP_FILE} or study.json)"
        )
    notes: list[str] = []
    kind, spec = _sweep_spec(sweep_dir, notes)
    runs = read_runs(sweep_dir, skip_damaged=skip_damaged)
    search = None
    if kind == "search":
        trials, search = search_trials(sweep_dir)
        total = spec.num_samples if spec is not None else len(trials)
        if (sweep_dir / SUMMARY_FILE).exists() and not any(t.state == "running" for t in trials):
            total = len(trials)  # it ended: with the trials it ran (--num-samples may differ)
        if search is not None:
            search["metric"] = spec.metric if spec is not None else None
    else:
        trials = grid_trials(runs, tune_trials(sweep_dir))
        total = len(spec.trials) if spec is not None else len(trials)
    counts = {s: sum(t.state == s for t in trials) for s in TRIAL_STATES}
    counts["pending"] += max(0, total - len(trials))
    counts["interrupted"] = 0
    total = max(total, len(trials))
    counts, total, driver = with_driver(sweep_dir, counts, total, time.time(), driver_stopped,
                                        search=kind == "search")
    return Counted(kind, spec, runs, trials, total, counts, driver, search, notes)


def read_status(
    sweep_dir: Path, *, skip_damaged: bool = False, driver_stopped: bool = False
) -> SweepStatus:
    """The status of one sweep folder. Raises NotASweep, sweepgrok.store.parts.DamagedPart (unless
    `skip_damaged`), ConfigError for a damaged study record. `driver_stopped`: read as if the
    driver had stopped (the driver itself, as it stops; see the module doc)."""
    from sweepgrok.analysis import stats

    c = count_trials(sweep_dir, skip_damaged=skip_damaged, driver_stopped=driver_stopped)
    runs, counts, driver = c.runs, c.counts, c.driver
    threshold = stats.default_threshold(runs if len(runs) else planned_thresholds(c.spec))
    groups = group_rows(runs, group_keys(c.kind, c.spec, runs), threshold) if len(runs) else []
    mean, left = time_left(c.trials, counts)
    if driver is not None and driver["state"] != "running":
        left = None if counts["pending"] + counts["interrupted"] else 0.0
    return SweepStatus(
        sweep_dir=sweep_dir,
        kind=c.kind,
        total=c.total,
        counts=counts,
        runs=len(runs),
        grokked=sum(g["grokked"] for g in groups),
        threshold=threshold,
        groups=groups,
        last_write=last_write(sweep_dir),
        mean_trial_s=mean,
        time_left_s=left,
        search=c.search,
        notes=c.notes,
        driver=driver,
    )


def with_driver(
    sweep_dir: Path,
    counts: dict[str, int],
    total: int,
    now: float,
    stopped: bool = False,
    search: bool = False,
) -> tuple[dict[str, int], int, dict[str, Any] | None]:
    """(counts, total, driver) corrected by the driver's heartbeat (see the module doc);
    `stopped`: the driver is taken as stopped whatever its heartbeat says; `search`: a stopped
    driver's total counts (its --num-samples)."""
    doc = heartbeat.read(sweep_dir)
    if doc is None:
        return counts, total, None
    driver = {k: doc.get(k) for k in ("pid", "host", "resume")}
    driver["since"] = float(doc["updated"])
    if not stopped and heartbeat.alive(doc, now):
        live = heartbeat.counts(doc)
        return live, max(int(doc.get("total") or 0), sum(live.values())), {
            **driver, "state": "running"}
    # A search's --num-samples above the file's: the trials the command was to run.
    more = max(0, int(doc.get("total") or 0) - total) if search else 0
    total += more
    counts = {**counts, "interrupted": counts["running"], "running": 0,
              "pending": counts["pending"] + more}
    unfinished = counts["interrupted"] + counts["pending"]
    return counts, total, {**driver, "state": "interrupted" if unfinished else "ended"}


def stopped_counts(sweep_dir: Path) -> dict[str, int]:
    """The trial counts `status` gives once the sweep's driver stopped (count_trials, which
    read_status counts with, with `driver_stopped`; damaged parts skipped): what a stopping
    driver records and says."""
    return count_trials(sweep_dir, skip_damaged=True, driver_stopped=True).counts


def as_json(status: SweepStatus, now: float) -> dict[str, Any]:
    """The stable JSON form (`sweepgrok status --format json`; docs/grids.md lists the keys)."""
    written = status.last_write
    return {
        "sweep_dir": str(status.sweep_dir),
        "kind": status.kind,
        "trials": {"total": status.total, **status.counts},
        "runs": {"recorded": status.runs, "grokked": status.grokked,
                 "threshold": status.threshold},
        "groups": status.groups,
        "search": status.search,
        "last_write": None if written is None else iso_time(written),
        "seconds_since_write": None if written is None else max(0.0, now - written),
        "mean_trial_s": status.mean_trial_s,
        "time_left_s": status.time_left_s,
        "driver": None if status.driver is None else {
            **status.driver, "since": iso_time(status.driver["since"])},
        "notes": status.notes,
    }


def iso_time(epoch: float) -> str:
    """UTC, to the second: 2026-12-03T15:14:29Z."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
