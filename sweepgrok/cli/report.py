"""`sweepgrok report SWEEP_DIR... --out DIR [--html]`: a Markdown report with figures and CSV
tables, and with --html one self-contained HTML file.

The report itself is library code (sweepgrok.analysis.reporting), imported inside the command with
pandas and matplotlib, so that `sweepgrok --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sweepgrok.api.reading import report as write_report
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
)


def report(
    sweep_dirs: SweepDirs,
    out: Annotated[
        Path, typer.Option(help="Report folder (created): report.md, figures/, CSV tables.")
    ],
    by: By = None,
    baseline: Baseline = None,
    paired: Paired = False,
    threshold: ThresholdOption = None,
    skip_damaged: SkipDamaged = False,
    censor_interrupted: CensorInterrupted = False,
    html: Annotated[
        bool,
        typer.Option(
            "--html",
            help="Also write report.html: one self-contained file (figures inside, the "
            "definitions, every run's config, provenance) to send to a colleague.",
        ),
    ] = False,
) -> None:
    """Write report.md, figures/*.png, runs.csv and groups_95/99.csv for sweep folders.

    The tables are given at each threshold (0.95, 0.99) that every run could see; --threshold
    picks the figures'.
    """
    from sweepgrok.analysis.reporting import HTML_FILE

    sweep_dirs = check_sweep_dirs(sweep_dirs)  # a storage folder: its sweeps
    check_output(out, "--out", folder=True)  # before any work
    theta = float(threshold.value) if threshold else None
    with analysis_errors():  # a folder that cannot take the report too (--out)
        path = write_report(sweep_dirs, out, by=by, baseline=baseline, paired=paired,
                            threshold=theta, skip_damaged=skip_damaged, html=html,
                            censor_interrupted=censor_interrupted)
    typer.echo(f"wrote {path}")
    if html:
        typer.echo(f"wrote {out / HTML_FILE}")
