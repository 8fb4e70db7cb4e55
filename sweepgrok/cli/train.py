"""`sweepgrok train`: one trial without Ray, into the same sweep-shaped Parquet folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from sweepgrok.cli.common import (
    Fresh,
    Trackers,
    Umask,
    apply_umask,
    cannot_write_rows,
    fail,
    plain_console,
)
from sweepgrok.config import ConfigError, device_problem, load_config
from sweepgrok.sweepdir import make_sweep_folder, prepare_train_folder


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
    fresh: Fresh = False,
    umask: Umask = None,
    tracker: Trackers = None,
) -> None:
    """Run one trial (or its train.seeds in lockstep) without Ray; write runs/ and metrics/.

    A sweep folder that already holds runs is refused (--fresh deletes it first)."""
    apply_umask(umask)
    try:
        cfg = load_config(config, set_ or [])
    except ConfigError as err:
        raise fail(str(err)) from None
    problem = device_problem(cfg.train.device, cfg.train.cuda_graph)
    if problem:
        raise fail(problem, str(config))
    where = "--out" if out is not None else None
    out = out if out is not None else Path("runs") / config.stem
    try:  # before training: a folder that cannot take the rows would lose the run at the end
        prepare_train_folder(out, fresh=fresh)
        make_sweep_folder(out)
    except ConfigError as err:
        raise fail(str(err), where) from None
    from sweepgrok.process import configure_process
    from sweepgrok.sink import ParquetSink, PartWriteError
    from sweepgrok.trackers import parse_trackers
    from sweepgrok.trackers.base import tracked
    from sweepgrok.trainer import train as run_training

    configure_process(cfg.train)
    sink = tracked(ParquetSink(out), parse_trackers(tracker), sweep=out.name, sweep_dir=out)
    try:
        with _Progress(cfg.train.max_steps, len(cfg.train.seed_list), quiet) as prog:
            rows = run_training(cfg, sink, sweep=out.name, on_eval=prog.update)
    except PartWriteError as err:  # the folder holds this run's first rows: start it over
        then = "run the same `sweepgrok train` again with --fresh"
        raise cannot_write_rows(err, then) from None
    finally:
        sink.close()
    _print_runs(rows, out)


class _Progress:
    """A rich progress bar over steps, showing the first active run's accuracies."""

    def __init__(self, total: int, n_runs: int, quiet: bool) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.quiet, self.n_runs, self.grokked = quiet, n_runs, 0
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
        self.grokked += sum(r["grok_step"] is not None for r in report.finished)
        if report.metrics:
            m = report.metrics[0]
            desc = f"train {m['train_acc']:.3f}  test {m['test_acc']:.3f}"
        else:
            desc = ""
        desc += f"  grokked {self.grokked}/{self.n_runs}"
        self.bar.update(self.task, completed=report.step, description=desc)


def _print_runs(rows: list[dict[str, Any]], out: Path) -> None:
    from rich.table import Table

    table = Table(title=f"runs -> {out}")
    for col in ("run_id", "train.seed", "status", "fit_step", "grok_step", "steps_run"):
        table.add_column(col)
    for r in rows:
        table.add_row(*(str(r.get(c)) for c in
                        ("run_id", "train.seed", "status", "fit_step", "grok_step", "steps_run")))
    plain_console().print(table)
