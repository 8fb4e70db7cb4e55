"""`sweepgrok ls STORAGE`: one line per sweep folder under a storage folder, from the folders alone.

Each line: the sweep's name, its kind (grid, search, or runs: `sweepgrok train --out`), trials
done / total, runs grokked / recorded (at the runs' own threshold), the last write (UTC). What
the counts mean: sweepgrok.analysis.sweepstatus (as `sweepgrok status` shows one sweep in full).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sweepgrok.cli.common import SkipDamaged, analysis_errors, fail
from sweepgrok.config.trial import ConfigError


def ls(
    storage: Annotated[
        Path,
        typer.Argument(metavar="STORAGE", help="A storage folder: the parent of sweep folders.",
                       exists=True, file_okay=False, dir_okay=True, show_default=False),
    ],
    skip_damaged: SkipDamaged = False,
) -> None:
    """List the sweeps under STORAGE, one line each: name, kind, trials done/total, runs grokked
    and the last write, read from the folders alone (no Ray)."""
    from sweepgrok.analysis.sweepstatus import read_status
    from sweepgrok.store.storage import sweeps_under

    sweeps = sweeps_under(storage)
    if not sweeps:
        raise fail(f"{storage}: holds no sweep folders (a sweep folder <storage>/<name> has "
                   "runs/, tune/, sweep.yaml or study.json); `sweepgrok status` reads one sweep")
    rows = []
    with analysis_errors():
        for folder in sweeps:
            try:
                rows.append(_row(read_status(folder, skip_damaged=skip_damaged)))
            except ConfigError as err:
                raise fail(str(err)) from None
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def _row(state: object) -> list[str]:
    from sweepgrok.analysis.sweepstatus import SweepStatus, iso_time

    assert isinstance(state, SweepStatus)
    written = "-" if state.last_write is None else iso_time(state.last_write)
    return [
        state.sweep_dir.name,
        state.kind,
        f"{state.counts['done']}/{state.total} trials done",
        f"{state.grokked}/{state.runs} runs grokked",
        f"last write {written}",
    ]
