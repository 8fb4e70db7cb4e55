"""`sweepgrok status SWEEP_DIR`: where a running or finished sweep stands, from its folder alone.

What the states mean and where they are read from: sweepgrok.analysis.sweepstatus. This module only
prints: a table (once, or refreshed with --watch) or the JSON form.
"""

from __future__ import annotations

import json
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sweepgrok.cli.common import SkipDamaged, analysis_errors, fail, plain_console
from sweepgrok.config.trial import ConfigError

if TYPE_CHECKING:
    from rich.console import RenderableType

    from sweepgrok.analysis.sweepstatus import SweepStatus

console = plain_console()


class Format(StrEnum):
    """How status is printed: a table for people, JSON for scripts (stable keys)."""

    table = "table"
    json = "json"


def status(
    sweep_dir: Annotated[
        Path,
        typer.Argument(metavar="SWEEP_DIR", help="The sweep folder (<storage>/<name>).",
                       show_default=False),
    ],
    fmt: Annotated[
        Format,
        typer.Option(
            "--format",
            help="table, or json: keys sweep_dir, kind, trials {total, done, running, pending, "
            "failed, interrupted}, runs {recorded, grokked, threshold}, groups [{group, label, "
            "runs, grokked, grok_median, km_median}], search {study, metric, mode, "
            "best_objective, best_trial} or null, last_write, seconds_since_write, mean_trial_s, "
            "time_left_s, driver {state, pid, host, since, resume} or null, notes.",
        ),
    ] = Format.table,
    watch: Annotated[
        bool, typer.Option("--watch", help="Refresh every --every seconds until Ctrl-C.")
    ] = False,
    every: Annotated[
        float, typer.Option(min=0.5, help="Seconds between refreshes with --watch.")
    ] = 5.0,
    skip_damaged: SkipDamaged = False,
) -> None:
    """Show a sweep's progress, read from its folder alone (no Ray): trials done, running,
    pending and failed, runs grokked and their median grok step per group, a search's best
    objective, the last write and the time left.

    It also says whether the sweep's driver still runs; when it does not, the sweep was
    interrupted, and status prints the command that continues it. The time left is the mean
    duration of the done trials x (pending + running / 2) / max(running, 1); there is none
    before a trial is done."""
    try:
        if not watch:
            _print(_read(sweep_dir, skip_damaged), fmt)
        elif fmt is Format.table and console.is_terminal:
            _watch_live(sweep_dir, skip_damaged, every)
        else:
            _watch_plain(sweep_dir, skip_damaged, every, fmt)
    except KeyboardInterrupt:  # Ctrl-C ends a watch: what was shown stands
        typer.echo(f"stopped watching {sweep_dir} (the sweep itself goes on)", err=True)
        raise typer.Exit(130) from None


def _read(sweep_dir: Path, skip_damaged: bool) -> SweepStatus:
    from sweepgrok.analysis.sweepstatus import NotASweep, read_status

    with analysis_errors():
        try:
            return read_status(sweep_dir, skip_damaged=skip_damaged)
        except NotASweep as err:
            raise fail(_storage_pointer(sweep_dir) or str(err)) from None
        except ConfigError as err:
            raise fail(str(err)) from None


def _storage_pointer(folder: Path) -> str | None:
    """For a storage folder (one holding sweep folders): that it is one, and the commands that
    read it (`ls`) or one of its sweeps (`status`); None for any other folder."""
    import shlex

    from sweepgrok.store.storage import sweeps_under

    sweeps = sweeps_under(folder) if folder.is_dir() else []
    if not sweeps:
        return None
    names = ", ".join(s.name for s in sweeps[:5]) + (", ..." if len(sweeps) > 5 else "")
    return (
        f"{folder}: a storage folder holding {len(sweeps)} sweep folder(s) ({names}), not a "
        f"sweep folder: `sweepgrok ls {shlex.quote(str(folder))}` lists them, "
        f"`sweepgrok status {shlex.quote(str(sweeps[0]))}` shows one"
    )


def _print(state: SweepStatus, fmt: Format) -> None:
    if fmt is Format.json:
        from sweepgrok.analysis.sweepstatus import as_json

        typer.echo(json.dumps(as_json(state, time.time()), indent=2))
    else:
        # soft_wrap: never wrapped, paths and the continue command are copied and pasted.
        console.print(status_view(state, time.time()), soft_wrap=True)
    sys.stdout.flush()


def _watch_live(sweep_dir: Path, skip_damaged: bool, every: float) -> None:
    from rich.live import Live

    with Live(console=console, auto_refresh=False) as live:
        while True:
            live.update(status_view(_read(sweep_dir, skip_damaged), time.time()), refresh=True)
            time.sleep(every)  # a refresh period the user chose, not a wait for a state


def _watch_plain(sweep_dir: Path, skip_damaged: bool, every: float, fmt: Format) -> None:
    while True:
        _print(_read(sweep_dir, skip_damaged), fmt)
        time.sleep(every)  # a refresh period the user chose, not a wait for a state


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _steps(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def driver_words(driver: dict | None) -> str:
    """`: running (driver pid 4242 on box)`, `: interrupted (driver not running since 14:03)`,
    or nothing (no heartbeat, or the sweep ended)."""
    from datetime import datetime

    if driver is None or driver["state"] == "ended":
        return ""
    if driver["state"] == "running":
        return f": running (driver pid {driver['pid']} on {driver['host']})"
    since = datetime.fromtimestamp(driver["since"]).strftime("%H:%M")  # local time
    return f": interrupted (driver not running since {since})"


def status_view(state: SweepStatus, now: float) -> RenderableType:
    """The table form: a summary block and one row per group."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from sweepgrok.analysis.summary_columns import STATUS, shown_in
    from sweepgrok.analysis.sweepstatus import iso_time, status_name

    c = state.counts
    stopped = c.get("interrupted", 0)
    lines = [
        f"{state.sweep_dir} ({state.kind}){driver_words(state.driver)}",
        f"trials: {c['done']}/{state.total} done, {c['running']} running, "
        f"{c['pending']} pending, {c['failed']} failed"
        + (f", {stopped} interrupted" if stopped else ""),
        f"runs: {state.runs} recorded, {state.grokked} grokked (test acc >= {state.threshold:g})",
    ]
    if state.search is not None:
        best = state.search["best_objective"]
        lines.append(
            f"best {state.search['metric'] or 'objective'} ({state.search['mode']}): "
            + ("-" if best is None else f"{best:g} (trial {state.search['best_trial']})")
        )
    if state.last_write is not None:
        ago = _duration(max(0.0, now - state.last_write))
        lines.append(f"last write: {iso_time(state.last_write)} ({ago} ago)")
    left = "-" if state.time_left_s is None else f"~{_duration(state.time_left_s)}"
    if not c["pending"] + c["running"] + stopped:
        left = "none (every trial ended)"
    if state.driver is not None and state.driver["state"] == "interrupted":
        lines.append("time left: none (nothing runs)")
        if state.driver.get("resume"):
            lines.append(f"continue with: {state.driver['resume']}")
    else:
        lines.append(f"time left: {left} (mean trial {_duration(state.mean_trial_s)})")
    lines += [f"note: {n}" for n in state.notes]
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("group", justify="left")
    shown = shown_in(STATUS)  # the group summary columns status shows, declared once
    for column in shown:
        table.add_column(column.header, justify="right")
    for g in state.groups:
        values = [g[status_name(c.name)] for c in shown]
        table.add_row(g["label"], *(_steps(v) if c.unit == "steps" else str(v)
                                    for c, v in zip(shown, values, strict=True)))
    parts: list[RenderableType] = [Text("\n".join(lines))]
    if state.groups:
        parts.append(table)
    return Group(*parts)
