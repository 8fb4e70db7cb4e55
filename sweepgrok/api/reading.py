"""Reading and analysing sweep folders from Python: ``read_runs``, ``read_metrics``,
``analyze`` (what ``sweepgrok analyze`` prints, as a DataFrame) and ``report``.

`paths` is one sweep folder or several, or a storage folder (its sweeps), as the commands take.
A user mistake raises ConfigError with the command line's message: the option at fault
(``--by``, ``--baseline``) or the folder leads it, as ``sweepgrok analyze`` prints it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sweepgrok.config.thresholds import GROK_THRESHOLDS
from sweepgrok.config.trial import ConfigError

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

Paths = str | Path | Iterable[str | Path]
"""One folder, or several."""


def sweep_dirs(paths: Paths) -> list[Path]:
    """The sweep folders `paths` are or hold (a storage folder: the sweeps inside it)."""
    from sweepgrok.store.storage import expand_sweep_dirs

    folders = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    for folder in folders:
        if not folder.is_dir():
            raise ConfigError(f"SWEEP_DIR: {folder}: no such folder")
    return expand_sweep_dirs(folders)  # NoSweeps is a ConfigError


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """What reading and analysing refuse (stats.AnalysisError: the option at fault;
    parts.DamagedPart: the damaged part file) as one ConfigError with the command's message."""
    from sweepgrok.analysis.stats import AnalysisError
    from sweepgrok.core.errors import analysis_option, damaged_part_message
    from sweepgrok.store.parts import DamagedPart

    try:
        yield
    except AnalysisError as err:
        raise ConfigError(f"{analysis_option(err)}: {err}") from None
    except DamagedPart as err:
        raise ConfigError(f"{err.sweep_dir}: {damaged_part_message(err)}") from None


def read_runs(paths: Paths, *, skip_damaged: bool = False) -> pd.DataFrame:
    """runs/ of the sweep folders: one row per run (its last-written row), every column of
    docs/outputs.md (config keys by dotted path, status, fit and grok steps, provenance)."""
    from sweepgrok.store import sink

    dirs = sweep_dirs(paths)
    with user_errors():
        return sink.read_runs(dirs, skip_damaged=skip_damaged)


def read_metrics(paths: Paths, *, skip_damaged: bool = False) -> pd.DataFrame:
    """metrics/ of the sweep folders: one row per run and evaluated step, every column of
    docs/outputs.md, and the extra metrics a Recorder kept (sweepgrok.train.recorder)."""
    from sweepgrok.store import sink

    dirs = sweep_dirs(paths)
    with user_errors():
        return sink.read_metrics(dirs, skip_damaged=skip_damaged, extras=True)


@dataclass
class Analysis:
    """What ``sweepgrok analyze`` computes: the table it prints and what it drew it from."""

    table: pd.DataFrame
    """One row per group: runs, success rate, grok step, delay, Kaplan-Meier median, speed-up."""
    metrics: pd.DataFrame
    """metrics/ of the runs read."""
    summary: pd.DataFrame
    """One row per run analysed (its events and config keys)."""
    keys: list[str]
    """The grouping keys (`by`, or the keys that vary)."""
    threshold: float
    """The test accuracy that defined grokking."""


def analysis(
    paths: Paths,
    *,
    by: str | Sequence[str] | None = None,
    baseline: str | None = None,
    paired: bool = False,
    threshold: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    skip_damaged: bool = False,
    censor_interrupted: bool = False,
    note: Callable[[str], None] | None = None,
) -> Analysis:
    """``analyze``, with what the table was drawn from; `note` gets each note line (runs left
    out or kept interrupted; default: a logged warning)."""
    from sweepgrok.analysis import comparisons, stats

    dirs = sweep_dirs(paths)
    theta = _threshold(threshold)
    keys = _keys(by)
    say = note or log.warning
    with user_errors():
        metrics, summary, pending = stats.load_recorded_runs(
            dirs, skip_damaged=skip_damaged, censor_interrupted=censor_interrupted,
            keep_repeats=stats.separates_sweeps(keys),
        )
        stats.check_runs_to_analyse(summary, pending, dirs)
        if pending:
            say(f"note: {pending} run(s) have not ended (no runs/ row yet, or interrupted: "
                "--resume finishes them, --censor-interrupted keeps them): left out")
        kept = stats.interrupted_count(summary)
        if kept:
            say(f"note: {stats.interrupted_note(kept)}")
        keys = stats.resolve_by(summary, keys)
        theta = theta if theta is not None else stats.default_threshold(summary)
        table = comparisons.analysis_table(
            summary, keys, baseline, paired=paired, threshold=theta, n_boot=n_boot, seed=seed
        )
    return Analysis(table, metrics, summary, keys, theta)


def analyze(
    paths: Paths,
    *,
    by: str | Sequence[str] | None = None,
    baseline: str | None = None,
    paired: bool = False,
    threshold: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    skip_damaged: bool = False,
    censor_interrupted: bool = False,
) -> pd.DataFrame:
    """The grokking statistics of each group, as ``sweepgrok analyze`` prints them: success
    rate, grok step, delay, Kaplan-Meier median and speed-up against `baseline` (``key=value``).

    `by`: config keys to group on (``"model.norm"``, a list, or ``"a,b"``; default: the keys
    that vary). `threshold`: 0.95 or 0.99 (default: the runs' train.grok_threshold). Runs not
    ended are left out (`censor_interrupted` keeps the interrupted ones, censored where they
    stopped), with a logged note."""
    return analysis(paths, by=by, baseline=baseline, paired=paired, threshold=threshold,
                    n_boot=n_boot, seed=seed, skip_damaged=skip_damaged,
                    censor_interrupted=censor_interrupted).table


def report(
    paths: Paths,
    out: str | Path,
    *,
    by: str | Sequence[str] | None = None,
    baseline: str | None = None,
    paired: bool = False,
    threshold: float | None = None,
    skip_damaged: bool = False,
    censor_interrupted: bool = False,
    html: bool = False,
) -> Path:
    """Write the report folder `out` (report.md, figures/, runs.csv, groups_95/99.csv; with
    `html` also report.html) as ``sweepgrok report`` does; returns report.md's path."""
    from sweepgrok.analysis.reporting import build_report
    from sweepgrok.store.outputs import os_reason, output_problem

    dirs = sweep_dirs(paths)
    out = Path(out)
    problem = output_problem(out, folder=True)
    if problem:
        raise ConfigError(f"--out: {problem}")
    try:
        with user_errors():
            return build_report(dirs, out, _keys(by), baseline, _threshold(threshold), paired,
                                skip_damaged, html, censor_interrupted=censor_interrupted)
    except OSError as err:  # the reading side raises DamagedPart: this is the report's folder
        raise ConfigError(f"--out: {out}: cannot write the report: {os_reason(err)}") from None


def _keys(by: str | Sequence[str] | None) -> list[str] | None:
    """``"a,b"`` or [a, b] -> [a, b]; None (or nothing): group by what varies."""
    items = by.split(",") if isinstance(by, str) else list(by or ())
    keys = [k.strip() for k in items if k.strip()]
    return keys or None


def _threshold(threshold: float | None) -> float | None:
    """An analysis threshold: one of GROK_THRESHOLDS (the grok steps the runs recorded)."""
    if threshold is None or float(threshold) in GROK_THRESHOLDS:
        return None if threshold is None else float(threshold)
    allowed = ", ".join(f"{t:g}" for t in GROK_THRESHOLDS)
    raise ConfigError(f"--threshold: {threshold!r} is not one of {allowed}")
