"""What `launch` and `search` say and do when Ctrl-C or SIGTERM stopped them
(sweepgrok.core.interrupt): one line with what was kept and the command that continues, and the
exit status 130 (SIGINT) or 143 (SIGTERM)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

import typer

from sweepgrok.core import interrupt


def continue_command(
    command: str,
    file: Path,
    *,
    storage: Path | None = None,
    address: str | None = None,
    umask: str | None = None,
    tracker: Sequence[str] | None = None,
    extra: Sequence[str] = (),
    absolute: bool = False,
) -> str:
    """`sweepgrok COMMAND FILE [options] --resume`, with the options that change what a resume
    does (where the sweep is, where it runs, file modes, trackers, ``extra``). `absolute`:
    paths made absolute, for a reader in another directory (`sweepgrok status`)."""

    def path(p: Path) -> str:
        return str(p.resolve()) if absolute else str(p)

    args = ["sweepgrok", command, path(file)]
    if storage is not None:
        args += ["--storage", path(storage)]
    if address:
        args += ["--address", address]
    if umask:
        args += ["--umask", umask]
    for t in tracker or ():
        args += ["--tracker", t]
    return shlex.join([*args, *extra, "--resume"])


def kept(counts: Mapping[str, int]) -> str:
    """`1 of 4 trials finished, 1 interrupted, 2 not started` from `sweepgrok status`'s trial
    counts (done, failed, running, interrupted, pending); the failed among the finished named
    when any."""
    total = sum(counts.values())
    failed = counts.get("failed", 0)
    parts = [f"{counts.get('done', 0) + failed} of {total} trials finished"]
    if failed:
        parts.append(f"{failed} of them failed")
    # Running: none once the driver stopped; a trial still marked so was stopped with it.
    parts += [f"{counts.get('interrupted', 0) + counts.get('running', 0)} interrupted",
              f"{counts.get('pending', 0)} not started"]
    return ", ".join(parts)


def interrupted_exit(sweep_dir: Path, command: str) -> typer.Exit:
    """Print the one line and return the exit (130 / 143) to raise. The counts are those
    `sweepgrok status` gives now that the driver stopped (sweepstatus.stopped_counts), the ones
    the driver's last heartbeat holds."""
    counts = _counts_now(sweep_dir)
    what = kept(counts)
    if counts.get("pending", 0) + counts.get("interrupted", 0) + counts.get("running", 0) == 0:
        line = interrupt.continue_line(f"{what}; every trial had ended, rows in {sweep_dir}")
    else:
        kept_rows = f"{what}; the rows measured so far are in {sweep_dir}"
        line = interrupt.continue_line(kept_rows, command)
    typer.echo(line, err=True)
    return typer.Exit(code=interrupt.exit_code())


def _counts_now(sweep_dir: Path) -> dict[str, int]:
    """sweepstatus.stopped_counts; if the folder cannot be read, the counts of the driver's
    last heartbeat (the callback's own then): the line must not fail the stopped command."""
    from sweepgrok.analysis.sweepstatus import stopped_counts
    from sweepgrok.store import heartbeat

    try:
        return stopped_counts(sweep_dir)
    except Exception:
        doc = heartbeat.read(sweep_dir)
        return heartbeat.counts(doc) if doc is not None else {}
