"""`sweepgrok launch GRID.yaml`: a grid file becomes Ray Tune trials; rows land in Parquet.

Ray is imported only after the grid file has been validated and the sweep folder checked, so a
user mistake costs no Ray start-up and shows no traceback (exit code 2).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from sweepgrok.config import ConfigError
from sweepgrok.spaces import GridSpec, load_grid, read_sweep_doc

console = Console()
SHORT = {"weight_decay": "wd", "attention": "attn", "target_dim": "d*", "start_step": "t_s"}
"""Column headers of the run table for long key names."""


def fail(message: str) -> typer.Exit:
    """Print a user-facing error (no traceback) and return the exit-2 exception to raise."""
    Console(stderr=True).print(f"[red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


def has_runs(sweep_dir: Path) -> bool:
    """A sweep folder that already holds rows or Tune state (so a new launch would mix in)."""
    parts = any(any((sweep_dir / k).glob("*.parquet")) for k in ("runs", "metrics"))
    return parts or (sweep_dir / "tune").exists()


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
    from sweepgrok.sink import read_runs

    runs = read_runs(sweep_dir)
    # Packed seeds: each run row carries its own train.seed, train.seeds is null.
    keys = list(dict.fromkeys("train.seed" if k == "train.seeds" else k for k in varying))
    cols = ["run_id", *keys, "status", "fit_step", "grok_step"]
    table = Table(
        title=f"{sweep_dir}: {len(runs)} runs",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for col in cols:  # short headers so a sweep's table fits an 80-column terminal
        name = col.rsplit(".", 1)[-1]
        table.add_column(SHORT.get(name, name), no_wrap=True)
    for _, row in runs.iterrows():
        cells = [_cell(row.get(c)) for c in cols]
        cells[0] = cells[0].removeprefix(f"{sweep}-")
        table.add_row(*cells)
    return table


def prepare_folder(sweep_dir: Path, *, resume: bool, fresh: bool) -> None:
    """--fresh deletes the sweep folder; otherwise refuse to mix a new sweep into old rows."""
    if fresh and sweep_dir.exists():
        shutil.rmtree(sweep_dir)
    elif not resume and has_runs(sweep_dir):
        raise fail(
            f"{sweep_dir} already holds a sweep: pass --resume to finish it, or --fresh to "
            "delete it and start over"
        )
    elif resume and has_runs(sweep_dir) and not (sweep_dir / "tune" / "tuner.pkl").exists():
        # New trials would get new run ids and count every finished run twice.
        raise fail(f"{sweep_dir} holds rows but no Ray Tune state to resume from (tune/)")


def launch(
    grid: Annotated[Path, typer.Argument(help="Grid file (YAML) to run.", show_default=False)],
    address: Annotated[
        str | None,
        typer.Option(
            help="Ray cluster address (default: $RAY_ADDRESS, else an embedded local Ray)."
        ),
    ] = None,
    storage: Annotated[
        Path | None, typer.Option(help="Root of sweep folders (overrides the file's storage).")
    ] = None,
    max_concurrent: Annotated[
        int | None, typer.Option(min=1, help="Cap on trials running at once.")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Finish an interrupted sweep (restore Tune state).")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the trial table; start nothing.")
    ] = False,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Delete an existing sweep folder of this name first.")
    ] = False,
) -> None:
    """Run every trial of a grid file on Ray Tune; rows land in <storage>/<name>/ Parquet."""
    if resume and fresh:
        raise fail("--resume and --fresh exclude each other")
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
    prepare_folder(sweep_dir, resume=resume, fresh=fresh)
    outcome = run(spec, sweep_dir, address, max_concurrent, resume)
    console.print(runs_table(sweep_dir, spec.varying, spec.settings.name))
    if outcome.unfinished or outcome.errored:
        console.print(
            f"{outcome.errored} trial(s) failed, {outcome.unfinished} unfinished: "
            f"`sweepgrok launch {grid} --resume` finishes them"
        )
        raise typer.Exit(code=1)


def run(
    spec: GridSpec, sweep_dir: Path, address: str | None, max_concurrent: int | None, resume: bool
) -> Any:
    """Start Ray (embedded or cluster) and run the trials; keep the grid beside the rows."""
    from sweepgrok.tune.launch import launch_grid

    sweep_dir.mkdir(parents=True, exist_ok=True)
    copy = sweep_dir / "sweep.yaml"
    if not copy.exists():
        shutil.copyfile(spec.settings.source, copy)
    return launch_grid(
        spec, sweep_dir, address=address, max_concurrent=max_concurrent, resume=resume
    )
