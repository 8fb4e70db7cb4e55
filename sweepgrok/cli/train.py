"""`sweepgrok train`: one trial without Ray, into the same sweep-shaped Parquet folder."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from sweepgrok.api.running import (
    TRAIN_NOTE,
    TrainInterrupted,
    prepare_out,
    train_into,
    trial_config,
)
from sweepgrok.cli.common import (
    Fresh,
    Trackers,
    Umask,
    apply_umask,
    cannot_write_rows,
    check_resume_fresh,
    fail,
    plain_console,
)
from sweepgrok.config.trial import ConfigError
from sweepgrok.core.interrupt import Interruption, continue_line, handling

TrainResume = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Continue an interrupted train in its --out folder, from its checkpoint (the same "
        "file and --set values); the rows come out as without the interruption. A folder "
        "whose runs all ended is left as it is; an empty one starts.",
    ),
]


def train(
    config: Annotated[Path, typer.Argument(help="Trial YAML (sections task/model/optim/...).")],
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a key: --set model.norm=sphere (repeatable)."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Sweep folder to write (default: runs/<config stem>).")
    ] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
    resume: TrainResume = False,
    fresh: Fresh = False,
    umask: Umask = None,
    tracker: Trackers = None,
) -> None:
    """Run one trial (or its train.seeds in lockstep) without Ray; write runs/ and metrics/.

    A sweep folder that already holds runs is refused (--fresh deletes it first; --resume
    continues an interrupted one). Ctrl-C or SIGTERM: stops at the next evaluation, keeps every
    row and a checkpoint, exits 130 or 143 (docs/interrupting.md)."""
    apply_umask(umask)
    check_resume_fresh(resume, fresh)
    try:
        cfg = trial_config(config, set_ or [])
    except ConfigError as err:
        raise fail(str(err)) from None
    where = "--out" if out is not None else None
    out = out if out is not None else Path("runs") / config.stem
    command = continue_command(config, set_ or [], out, quiet, umask, tracker or [])
    # From here a signal is ours (sweepgrok.core.interrupt): one that comes before the first
    # evaluation stops the command there. cleanup: the rows in memory are flushed even after
    # a second signal; a third ends at once.
    with handling(TRAIN_NOTE, cleanup=True) as intr:
        try:  # before training: a folder that cannot take the rows would lose the run at the end
            prepare_out(out, fresh=fresh, where=where)
        except ConfigError as err:
            raise fail(str(err)) from None
        rows = _train(cfg, out, where, resume=resume, quiet=quiet, tracker=tracker, intr=intr,
                      command=command)
    if rows is not None:
        _print_runs(rows, out)


def continue_command(config: Path, sets: list[str], out: Path, quiet: bool, umask: str | None,
                     trackers: list[str]) -> str:
    """The command that continues this `train` (the same options, --out spelled out, --resume)."""
    args = ["sweepgrok", "train", str(config)]
    for item in sets:
        args += ["--set", item]
    args += ["--out", str(out)] + (["--quiet"] if quiet else [])
    args += ["--umask", umask] if umask is not None else []
    for item in trackers:
        args += ["--tracker", item]
    return shlex.join([*args, "--resume"])


def _train(cfg: Any, out: Path, where: str | None, *, resume: bool, quiet: bool,
           tracker: list[str] | None, intr: Interruption, command: str
           ) -> list[dict[str, Any]] | None:
    """Train into `out` (sweepgrok.api.running.train_into); the run rows, or None when nothing
    ran. Its refusals, an interruption and a full disk as the one line each, and the exit."""
    from sweepgrok.store.sink import PartWriteError

    def progress(folder: Any) -> _Progress:
        return _Progress(cfg.train.max_steps, len(cfg.train.seed_list), quiet,
                         cfg.train.grok_threshold, folder.grokked)

    try:
        rows = train_into(cfg, out, resume=resume, where=where, trackers=tracker, intr=intr,
                          progress=progress)
    except ConfigError as err:
        raise fail(str(err)) from None
    except TrainInterrupted as err:
        typer.echo(continue_line(err.kept, command), err=True)
        raise typer.Exit(err.exit_code) from None
    except PartWriteError as err:  # the rows before are on disk, the checkpoint behind them
        raise cannot_write_rows(err, f"`{command}` continues") from None
    if rows is None:
        typer.echo(f"{out}: every run has ended already; nothing to resume", err=True)
    return rows


class _Progress:
    """A rich progress bar over steps: the first active run's accuracies, and how many runs
    reached train.grok_threshold at an evaluation so far (whatever train.stop_after_grok)."""

    def __init__(self, total: int, n_runs: int, quiet: bool, threshold: float,
                 grokked: set[str] | None = None) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.quiet, self.n_runs, self.threshold = quiet, n_runs, threshold
        self.grokked = set(grokked or ())
        self.description = ""
        """Run ids that reached the threshold (on resume: those on disk already)."""
        self.bar = Progress(
            TextColumn("[bold]step {task.completed:>7.0f}"), BarColumn(),
            TextColumn("{task.description}"), TimeElapsedColumn(), disable=quiet,
        )
        self.task = self.bar.add_task("", total=total)

    def __enter__(self) -> _Progress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.__exit__(*exc)

    def update(self, report: Any) -> None:
        from sweepgrok.train.events import reached

        self.grokked |= {m["run_id"] for m in report.metrics
                         if reached(m["test_acc"], self.threshold)}
        desc = ""
        if report.metrics:
            m = report.metrics[0]
            desc = f"train {m['train_acc']:.3f}  test {m['test_acc']:.3f}"
        desc += f"  grokked {len(self.grokked)}/{self.n_runs}"
        self.bar.update(self.task, completed=report.step, description=desc)
        self.description = desc


def _absent(value: Any) -> bool:
    """None, or a float NaN (pandas' missing value): no value to print."""
    return value is None or (isinstance(value, float) and value != value)


def _print_runs(rows: list[dict[str, Any]], out: Path) -> None:
    from rich.table import Table

    table = Table(title=f"runs -> {out}")
    for col in ("run_id", "train.seed", "status", "fit_step", "grok_step", "steps_run"):
        table.add_column(col)
    for r in rows:
        # An absent value (no fit, not grokked) prints "-", as in every other table.
        table.add_row(*("-" if _absent(r.get(c)) else str(r.get(c)) for c in
                        ("run_id", "train.seed", "status", "fit_step", "grok_step", "steps_run")))
    plain_console().print(table)
