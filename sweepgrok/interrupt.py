"""Interrupting a command with SIGINT (Ctrl-C) or SIGTERM: one contract for every command.

Inside ``with interruptible(...) as intr:``

- the **first** signal is recorded (``intr.requested``) and one note goes to stderr; the command
  goes on to its next safe point (``intr.check()`` raises Interrupted there), keeps what it
  measured, prints ``continue_line`` and exits with ``intr.exit_code``: 128 + the signal's
  number, 130 for SIGINT and 143 for SIGTERM, as shells report a process a signal ended;
- the **second** raises KeyboardInterrupt wherever the main thread is: the command skips to its
  cleanup (flush what is measured, record what is unfinished) at once;
- a **third** ends the process at once (``os._exit``), even inside that cleanup. Files stay
  whole even then: every file sweepgrok writes goes to a temporary name and is renamed, so a
  reader sees the old file or the new one; rows still in memory are lost.

The handlers do no I/O but one ``os.write`` of the note (async-signal safe, no Python buffer
that the interrupted code may be holding). Outside the main thread nothing is installed (Python
allows handlers only there) and the block is never interrupted by this module.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals a command handles: a terminal's Ctrl-C, and a scheduler's or `kill`'s stop."""


def exit_code(signum: int) -> int:
    """The exit status of a command a signal stopped: 128 + its number (130, 143)."""
    return 128 + signum


class Interrupted(Exception):
    """Raised at a safe point after the first signal (``Interruption.check``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class Interruption:
    """The signals received so far inside ``interruptible``."""

    signum: int | None = None
    """The first signal's number (None: none yet)."""
    count: int = 0
    """How many signals arrived."""

    @property
    def requested(self) -> bool:
        """A signal arrived: stop at the next safe point."""
        return self.signum is not None

    @property
    def name(self) -> str:
        """SIGINT or SIGTERM (the first signal)."""
        return signal.Signals(self.signum or signal.SIGINT).name

    @property
    def exit_code(self) -> int:
        """130 for SIGINT, 143 for SIGTERM (the first signal)."""
        return exit_code(self.signum or signal.SIGINT)

    def check(self) -> None:
        """At a safe point: raise Interrupted if a signal arrived."""
        if self.signum is not None:
            raise Interrupted(self.signum)


def _again(signum: int) -> str:
    return "Ctrl-C again" if signum == signal.SIGINT else f"a second {signal.Signals(signum).name}"


@contextlib.contextmanager
def interruptible(note: str) -> Iterator[Interruption]:
    """Handle SIGINT and SIGTERM inside the block as the module doc says; the previous handlers
    come back after it. `note` says what the first signal does (``stopping at the next
    evaluation``); the line printed is ``<SIGNAL>: <note> (<how to stop at once>)``."""
    intr = Interruption()
    if threading.current_thread() is not threading.main_thread():
        yield intr
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        intr.count += 1
        if intr.count == 1:
            intr.signum = signum
            line = f"\n{signal.Signals(signum).name}: {note} ({_again(signum)}: stop at once)\n"
            with contextlib.suppress(OSError):
                os.write(2, line.encode())
        elif intr.count == 2:
            raise KeyboardInterrupt
        else:
            os._exit(intr.exit_code)

    previous = {s: signal.signal(s, handle) for s in SIGNALS}
    try:
        yield intr
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def continue_line(intr: Interruption, kept: str, command: str) -> str:
    """The one line an interrupted command prints (stderr): what it kept, how to go on.

    ``interrupted by SIGINT: <kept>; continue with: <command>``"""
    return f"interrupted by {intr.name}: {kept}; continue with: {command}"
