"""`sweepgrok launch GRID.yaml`: a grid file becomes Ray Tune trials; rows land in Parquet.

Ray is imported only after the grid file has been validated and the sweep folder checked, so a
user mistake costs no Ray start-up and shows no traceback (exit code 2).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from sweepgrok.analysis.labels import key_labels
from sweepgrok.cli.common import (
    Address,
    Fresh,
    MaxConcurrent,
    Resume,
    Storage,
    Trackers,
    Umask,
    Verbose,
    apply_umask,
    cannot_write_rows,
    check_resume_fresh,
    fail,
    plain_console,
    setup_logging,
)
from sweepgrok.cli.interrupted import continue_command, interrupted_exit
from sweepgrok.config.grid_file import GridSpec, load_grid, read_sweep_doc
from sweepgrok.config.trial import ConfigError, run_column
from sweepgrok.core import interrupt
from sweepgrok.store.sweepdir import delete_sweep_folder, keep_sweep_file, prepare_grid_folder

console = plain_console()


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):  # NaN is missing
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def trial_table(spec: GridSpec) -> Table:
    """The --dry-run table: one row per trial, the varying keys as columns."""
    s = spec.settings
    table = Table(
        title=f"grid {s.name}: {len(spec.trials)} trials",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("#", justify="right")
    keys = spec.varying or sorted({k for t in spec.trials for k in t.overrides})
    for key in keys:
        table.add_column(key)
    for t in spec.trials:
        table.add_row(str(t.index), *(_cell(t.flat.get(k)) for k in keys))
    return table


def runs_table(sweep_dir: Path, varying: list[str], sweep: str = "") -> Table:
    """The end-of-sweep table from the Parquet (the record, not Ray's memory)."""
    from sweepgrok.store.sink import read_runs

    runs = read_runs(sweep_dir)
    keys = list(dict.fromkeys(run_column(k) for k in varying))
    cols = ["run_id", *keys, "status", "fit_step", "grok_step"]
    table = Table(
        title=f"{sweep_dir}: {len(runs)} runs",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    # Short, unambiguous headers (sweepgrok.analysis.labels) so a sweep's table fits a terminal.
    for header in ["run_id", *key_labels(keys), "status", "fit_step", "grok_step"]:
        table.add_column(header, no_wrap=True)
    for _, row in runs.iterrows():
        cells = [_cell(row.get(c)) for c in cols]
        cells[0] = cells[0].removeprefix(f"{sweep}-")
        table.add_row(*cells)
    return table


def launch(
    grid: Annotated[Path, typer.Argument(help="Grid file (YAML) to run.", show_default=False)],
    address: Address = None,
    storage: Storage = None,
    max_concurrent: MaxConcurrent = None,
    resume: Resume = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the trial table; start nothing.")
    ] = False,
    fresh: Fresh = False,
    umask: Umask = None,
    verbose: Verbose = False,
    tracker: Trackers = None,
) -> None:
    """Run every trial of a grid file on Ray Tune; rows land in <storage>/<name>/ Parquet."""
    check_resume_fresh(resume, fresh)
    if resume and max_concurrent is not None:
        # Tune restores the grid's saved generator and the trials it had made with the first
        # launch's cap; a new one would apply to some trials and not others, so none is taken.
        raise fail(
            "cannot change on --resume: Ray Tune restores the sweep with the cap of its first "
            "launch; leave it out",
            "--max-concurrent",
        )
    apply_umask(umask)
    setup_logging(verbose)
    try:
        if "search" in read_sweep_doc(grid):
            raise ConfigError(
                f"{grid}: is a search file (has 'search:'): run it with `sweepgrok search`"
            )
        spec = load_grid(grid)
    except ConfigError as err:
        raise fail(str(err)) from None
    sweep_dir = spec.settings.sweep_dir(storage)
    if dry_run:
        console.print(trial_table(spec))
        console.print(f"sweep folder: {sweep_dir}")
        return
    try:
        prepare_grid_folder(sweep_dir, resume=resume, fresh=fresh)
        new_folder = not sweep_dir.exists()
        keep_sweep_file(spec.settings, sweep_dir)  # creates the folder and its marker
    except ConfigError as err:
        raise fail(str(err)) from None
    from sweepgrok.store.sink import PartWriteError

    # Absolute before the fit: a Ray job's working directory may vanish while it runs.
    sweep_dir = sweep_dir.resolve()
    command = partial(continue_command, "launch", grid, storage=storage, address=address,
                      umask=umask, tracker=tracker)
    again, again_anywhere = command(), command(absolute=True)
    with interrupt.handling():
        try:
            outcome = run(spec, sweep_dir, address, max_concurrent, resume, verbose, tracker,
                          again_anywhere)
        except ConfigError as err:  # no node of the cluster can hold a trial: none started
            if new_folder:  # leave nothing behind (the next launch keeps the corrected file)
                delete_sweep_folder(sweep_dir)
            raise fail(str(err)) from None
        except PartWriteError as err:  # Tune's state is saved: trials resume from checkpoints
            raise cannot_write_rows(err, f"`{again}` continues") from None
    if interrupt.requested() is not None:
        raise interrupted_exit(sweep_dir, again)
    console.print(runs_table(sweep_dir, spec.varying, spec.settings.name))
    if outcome.unfinished or outcome.errored:
        console.print(
            f"{outcome.errored} trial(s) failed, {outcome.unfinished} unfinished: "
            f"`{again}` finishes them",
            soft_wrap=True,
        )
        raise typer.Exit(code=1)


def run(
    spec: GridSpec,
    sweep_dir: Path,
    address: str | None,
    max_concurrent: int | None,
    resume: bool,
    verbose: bool = False,
    tracker: list[str] | None = None,
    resume_command: str = "",
) -> Any:
    """Start Ray (embedded or cluster) and run the trials (sweepgrok.api.running.run_grid)."""
    from sweepgrok.api.running import run_grid

    return run_grid(spec, sweep_dir, address=address, max_concurrent=max_concurrent,
                    resume=resume, verbose=verbose, trackers=tracker,
                    resume_command=resume_command)
