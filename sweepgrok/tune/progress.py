"""The live view of a running sweep, driven by the driver callback.

- In a terminal (stderr is a TTY): a live table, refreshed in place: trials done / running /
  failed, runs grokked so far, and each running trial's last step and test accuracy.
- In a log (stdout is not a TTY: CI, ``ray job logs``, a redirect): one line per trial that
  ends, on stdout: its run id(s), each run's status, grok step and steps run.

Both at once when stderr is a terminal and stdout is redirected.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

MAX_ROWS = 20
"""Running trials shown in the live table (the rest are counted in its last row)."""


@dataclass
class ProgressState:
    """What the live table shows."""

    sweep: str
    total: int
    done: int = 0
    failed: int = 0
    grokked: int = 0
    running: int = 0
    interrupted: int = 0
    """Trials stopped by Ctrl-C / SIGTERM before they ended (--resume continues them)."""
    stopping: str = ""
    """The signal that is stopping the sweep (Ctrl-C, SIGTERM), empty while it runs."""
    latest: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """Running trial id -> (its last reported step, test accuracy)."""


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _cell(value: Any, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def progress_table(state: ProgressState, elapsed: float, max_rows: int = MAX_ROWS) -> Group:
    """The live table: a line with the counts, one row per running trial (step, test acc)."""
    counts = (
        f"{state.sweep}: {state.done}/{state.total} trials done, {state.running} running, "
        f"{state.failed} failed, "
        + (f"{state.interrupted} interrupted, " if state.interrupted else "")
        + f"{state.grokked} run(s) grokked  {_elapsed(elapsed)}"
    )
    if state.stopping:
        counts += f"  (stopping: {state.stopping})"
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("trial")
    table.add_column("step", justify="right")
    table.add_column("test acc", justify="right")
    shown = sorted(state.latest.items())[:max_rows]
    for trial_id, (step, test_acc) in shown:
        table.add_row(trial_id, _cell(step, ","), _cell(test_acc, ".3f"))
    if len(state.latest) > len(shown):
        table.add_row(f"... {len(state.latest) - len(shown)} more", "", "")
    # A line of its own: a table's title would wrap at the (narrow) table's width.
    return Group(Text(counts), table)


def ended_line(trial_id: str, runs: Sequence[Mapping[str, Any]], failed: bool = False) -> str:
    """The log line of a trial that ended: each run's id, status, grok step and steps run."""
    parts = [
        f"{r.get('run_id')} {r.get('status')} grok_step={_cell(r.get('grok_step'), 'd')} "
        f"steps={_cell(r.get('steps_run'), 'd')}"
        for r in runs
    ]
    return f"trial {trial_id} {'failed' if failed else 'ended'}: " + ("; ".join(parts) or "no runs")


class LiveView:
    """The table on a terminal (stderr), the lines in a log (stdout); see the module doc."""

    def __init__(
        self, total: int, sweep: str, *, table: bool | None = None, lines: bool | None = None
    ) -> None:
        self.console = Console(stderr=True)
        self.table = self.console.is_terminal and sys.stderr.isatty() if table is None else table
        self.lines = not sys.stdout.isatty() if lines is None else lines
        self.state = ProgressState(sweep, total)
        self.started = time.monotonic()
        self.live: Live | None = None

    def start(self) -> None:
        if self.table:
            self.live = Live(self._render(), console=self.console, refresh_per_second=2,
                             get_renderable=self._render)
            self.live.start()

    def _render(self) -> Group:
        return progress_table(self.state, time.monotonic() - self.started)

    @property
    def stopping(self) -> str:
        return self.state.stopping

    @stopping.setter
    def stopping(self, signal_name: str) -> None:
        self.state.stopping = signal_name

    def update(
        self, done: int, running: int, grokked: int, failed: int = 0, interrupted: int = 0
    ) -> None:
        self.state.done, self.state.running = done, running
        self.state.grokked, self.state.failed = grokked, failed
        self.state.interrupted = interrupted

    def trial_result(self, trial_id: str, step: Any, test_acc: Any) -> None:
        """A running trial's last evaluation."""
        self.state.latest[trial_id] = (step, test_acc)

    def trial_ended(
        self, trial_id: str, runs: Sequence[Mapping[str, Any]], failed: bool = False
    ) -> None:
        """A trial ended (its run rows are written): off the table, one line in a log."""
        self.state.latest.pop(trial_id, None)
        if self.lines:
            print(ended_line(trial_id, runs, failed), flush=True)

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
