"""`sweepgrok analyze`: grokking-delay statistics of sweep folders, from Parquet alone.

stats, plots (and so pandas, scipy, matplotlib) are imported inside the command, so that
`sweepgrok --help` stays fast. The table's text formats live in sweepgrok.analysis.tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sweepgrok.analysis.tables import Format, render
from sweepgrok.api.reading import analysis
from sweepgrok.cli.common import (
    Baseline,
    By,
    CensorInterrupted,
    Paired,
    SkipDamaged,
    SweepDirs,
    ThresholdOption,
    analysis_errors,
    check_output,
    check_sweep_dirs,
    fail,
)
from sweepgrok.store.outputs import FigureFormat, os_reason, write_text

MAX_BOOT = 100_000
"""Cap on --n-boot: a group's resample matrix is n_boot x its runs (8 bytes each, twice)."""


def _check_outputs(
    out: Path | None, plots: Path | None, plot_format: FigureFormat, per_run: bool
) -> None:
    """Every output path and figure flag before any work: a mistake never follows a
    half-printed table."""
    check_output(out, "--out", folder=False)
    check_output(plots, "--plots", folder=True)
    if plots is None and plot_format is not FigureFormat.png:
        raise fail("applies to the figures of --plots DIR: give --plots too", "--plot-format")
    if plots is None and per_run:
        raise fail("applies to the figures of --plots DIR: give --plots too", "--per-run")


def analyze(
    sweep_dirs: SweepDirs,
    by: By = None,
    baseline: Baseline = None,
    paired: Paired = False,
    threshold: ThresholdOption = None,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.table,
    plots: Annotated[
        Path | None, typer.Option(help="Write every figure that applies to this folder.")
    ] = None,
    plot_format: Annotated[
        FigureFormat,
        typer.Option(help="File format of the --plots figures (svg and pdf: vectors, for papers)."),
    ] = FigureFormat.png,
    per_run: Annotated[
        bool,
        typer.Option(
            "--per-run",
            help="The --plots accuracy figure draws every run's curves, not each group's "
            "median and band.",
        ),
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="Write the output to this file instead of stdout.")
    ] = None,
    n_boot: Annotated[int, typer.Option(min=100, max=MAX_BOOT, help="Bootstrap resamples.")] = 2000,
    seed: Annotated[int, typer.Option(min=0, help="Bootstrap seed.")] = 0,
    skip_damaged: SkipDamaged = False,
    censor_interrupted: CensorInterrupted = False,
) -> None:
    """Print the grokking statistics of each group: success rate, grok step, delay, Kaplan-Meier
    median and speed-up against a baseline. It reads the Parquet files only (no Ray, no torch)."""
    from sweepgrok.analysis.report_content import result_text

    sweep_dirs = check_sweep_dirs(sweep_dirs)  # a storage folder: its sweeps
    _check_outputs(out, plots, plot_format, per_run)
    with analysis_errors():
        done = analysis(sweep_dirs, by=by, baseline=baseline, paired=paired,
                        threshold=float(threshold.value) if threshold else None, n_boot=n_boot,
                        seed=seed, skip_damaged=skip_damaged,
                        censor_interrupted=censor_interrupted,
                        note=lambda line: typer.echo(line, err=True))
        table, metrics, summary, keys, theta = (done.table, done.metrics, done.summary,
                                                done.keys, done.threshold)
        said = result_text(table, summary, keys, fmt, theta, default=by is None,
                           baseline=baseline)
    _emit(render(table, keys, fmt, theta) + said, out)
    if plots is not None:
        from sweepgrok.analysis import plots as figures

        try:
            drawn = figures.plot_all(metrics, summary, keys, plots, theta, plot_format, per_run)
            for path in drawn:
                typer.echo(f"wrote {path}", err=True)
        except OSError as err:  # checked writable above: the disk filled up, or a race
            raise fail(f"{plots}: cannot write a figure: {os_reason(err)}", "--plots") from None


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        write_text(out, text)
    except OSError as err:  # checked writable above: the disk filled up, or a race
        raise fail(f"{out}: cannot write: {os_reason(err)}", "--out") from None
    typer.echo(f"wrote {out}", err=True)
