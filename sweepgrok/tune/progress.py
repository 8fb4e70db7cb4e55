"""The live view of a running sweep: one rich progress bar, driven by the driver callback."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class LiveView:
    """Trials done / running / grokked; draws only on a terminal (stderr), silent otherwise."""

    def __init__(self, total: int, sweep: str) -> None:
        self.console = Console(stderr=True)
        self.enabled = self.console.is_terminal and sys.stderr.isatty()
        self.progress = Progress(
            TextColumn(f"[bold]{escape(sweep)}[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=self.console,
            disable=not self.enabled,
        )
        self.task = self.progress.add_task("starting", total=total)

    def start(self) -> None:
        self.progress.start()

    def update(self, done: int, running: int, grokked: int) -> None:
        desc = f"running {running}  grokked {grokked}"
        self.progress.update(self.task, completed=done, description=desc)

    def stop(self) -> None:
        self.progress.stop()
