"""`sweepgrok analyze`: grokking-delay statistics of sweep folders, from Parquet alone.

stats, plots (and so pandas, scipy, matplotlib) are imported inside the command, so that
`sweepgrok --help` stays fast. The table's text formats live in sweepgrok.tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sweepgrok.cli.common import (
    Baseline,
    By,
    Paired,
    SweepDirs,
    ThresholdOption,
    check_sweep_dirs,
    fail,
    split_keys,
)
from sweepgrok.errors import analysis_option
from sweepgrok.tables import Format, render

if TYPE_CHECKING:
    import pandas as pd


def analyze(
    sweep_dirs: SweepDirs,
    by: By = None,
    baseline: Baseline = None,
    paired: Paired = False,
    threshold: ThresholdOption = None,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.table,
    plots: Annotated[
        Path | None, typer.Option(help="Write every figure that applies (PNG) to this folder.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Write the output to this file instead of stdout.")
    ] = None,
    n_boot: Annotated[int, typer.Option(min=100, help="Bootstrap resamples.")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
) -> None:
    """Grokking statistics per group: success rate, grok step, delay, Kaplan-Meier median,
    speed-up vs a baseline. Reads Parquet only (no Ray, no torch)."""
    from sweepgrok import comparisons, stats

    check_sweep_dirs(sweep_dirs)
    try:
        metrics, summary, keys = _load(sweep_dirs, by)
        theta = float(threshold.value) if threshold else stats.default_threshold(summary)
        table = comparisons.analysis_table(
            summary, keys, baseline, paired=paired, threshold=theta, n_boot=n_boot, seed=seed
        )
    except stats.AnalysisError as err:
        raise fail(str(err), analysis_option(err)) from None
    _emit(render(table, keys, fmt, theta), out)
    if plots is not None:
        from sweepgrok import plots as figures

        for path in figures.plot_all(metrics, summary, keys, plots, theta):
            typer.echo(f"wrote {path}", err=True)


def _load(sweep_dirs: list[Path], by: str | None) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(metrics, run summary of the runs with a run row, grouping keys)."""
    from sweepgrok import stats

    metrics, runs = stats.read_sweeps(sweep_dirs)
    summary, pending = stats.recorded_runs(stats.run_summary(metrics, runs))
    if pending:
        typer.echo(
            f"note: {pending} run(s) have metrics but no runs/ row yet (still running?): left out",
            err=True,
        )
    return metrics, summary, stats.resolve_by(summary, split_keys(by))


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        typer.echo(text, nl=False)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    typer.echo(f"wrote {out}", err=True)
