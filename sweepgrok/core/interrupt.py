"""Ctrl-C (SIGINT) and SIGTERM: one contract for every long command (docs/interrupting.md).

Inside ``with handling(...) as intr:``

- the **first** signal only records itself (``requested()``, ``intr.requested``) and one note
  goes to stderr: ``Ctrl-C: <note> (Ctrl-C again: stop at once)``. The command's work polls
  the request (``intr.check()`` raises Interrupted at a safe point), keeps what it measured,
  prints ``continue_line`` and exits ``exit_code()``: 130 for SIGINT, 143 for SIGTERM (128 +
  the signal, as shells report a process a signal ended);
- the **second** ends the process at once (``os._exit``). A command that still holds rows in
  memory asks for ``cleanup=True``: then the second raises KeyboardInterrupt wherever the main
  thread is, so the command skips to its cleanup (flush the rows, record what is unfinished),
  and only a **third** ends it at once, even inside that cleanup;
- ``critical()`` marks a write that must finish once begun (a temporary file renamed into
  place), in any thread: an exit it would cut short waits until the block ends; a raise waits
  only for a block of the main thread (the thread it lands in) and is never taken by a writer
  thread. The files a command writes into a sweep folder while its handlers are installed
  (Parquet parts, checkpoints, the study record, the sweep file's copy, reports) go to a
  temporary name and are renamed inside one, so a reader sees the old file or the new one, and
  no temporary file is left behind by a signal; only rows still in memory are lost when the
  process ends at once. Tracker calls (network) stay outside: a hung server never delays an
  exit.

Ending at once exits with the first signal's status. The handlers do no I/O but one
``os.write`` of a line (async-signal safe, no Python buffer that the interrupted code may be
holding). Outside the main thread nothing is installed (Python allows handlers only there).
Plain Python (no Ray, no torch): ``sweepgrok train`` and the Ray drivers share it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals handled: Ctrl-C in a terminal, and what schedulers and ``kill`` send."""
NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
DEFAULT_NOTE = "stopping and keeping what was measured"

_state: dict[str, Any] = {
    "signum": None,  # the first signal received (None: none yet)
    "count": 0,  # how many arrived
    "pending_exit": None,  # exit status owed once the current critical() block ends
    "pending_raise": False,  # a KeyboardInterrupt owed once the main thread's critical() ends
    # critical() blocks open: (in any thread, which os._exit would cut short; in the main
    # thread, where a raise would land). One tuple, so the handler never sees half an update.
    "depths": (0, 0),
    "active": 0,  # nesting of handling()
    "note": DEFAULT_NOTE,
    "cleanup": False,
}
_lock = threading.RLock()
"""Reentrant: the handler runs in the main thread, possibly while it holds the lock."""


class Interrupted(Exception):
    """Raised at a safe point after the first signal (``Interruption.check``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Interruption:
    """What ``handling`` yields: the module's record of the signals, as attributes."""

    @property
    def signum(self) -> int | None:
        """The first signal's number (None: none yet)."""
        return requested()

    @property
    def count(self) -> int:
        """How many signals arrived."""
        return int(_state["count"])

    @property
    def requested(self) -> bool:
        """A signal arrived: stop at the next safe point."""
        return requested() is not None

    @property
    def name(self) -> str:
        """Ctrl-C or SIGTERM (the first signal)."""
        return name()

    @property
    def exit_code(self) -> int:
        """130 for SIGINT, 143 for SIGTERM (the first signal)."""
        return exit_code()

    def check(self) -> None:
        """At a safe point: raise Interrupted if a signal arrived."""
        signum = requested()
        if signum is not None:
            raise Interrupted(signum)


def active() -> bool:
    """Inside ``handling()``: sweepgrok's handlers own SIGINT and SIGTERM."""
    return bool(_state["active"])


def requested() -> int | None:
    """The first signal received while ``handling()`` was active (None: none)."""
    return _state["signum"]


def exit_code(signum: int | None = None) -> int:
    """128 + the signal (default: the first received): 130 for SIGINT, 143 for SIGTERM."""
    return 128 + int(signum if signum is not None else (requested() or signal.SIGINT))


def name(signum: int | None = None) -> str:
    """How the signal (default: the first received) is named in messages: Ctrl-C, SIGTERM."""
    sig = signum if signum is not None else requested()
    return NAMES.get(signal.Signals(sig), f"signal {sig}") if sig is not None else "nothing"


def continue_line(kept: str, command: str | None = None) -> str:
    """The one line an interrupted command prints (stderr): what it kept, how to go on.

    ``interrupted (Ctrl-C): <kept>; continue with: <command>`` (no command: nothing to go on)."""
    then = f"; continue with: {command}" if command else ""
    return f"interrupted ({name()}): {kept}{then}"


def _say(line: str) -> None:
    # os.write, not sys.stderr: the handler may run while the main thread is inside a write to
    # sys.stderr (a live view), and a buffered stream refuses a reentrant call.
    with contextlib.suppress(OSError):
        if os.isatty(2):
            line = "\r\x1b[?25h" + line  # show the cursor a live view hid
        os.write(2, (line + "\n").encode())


def _again(signum: int) -> str:
    return "Ctrl-C again" if signum == signal.SIGINT else f"a second {name(signum)}"


def _handler(signum: int, frame: FrameType | None) -> None:
    _state["count"] += 1
    if _state["signum"] is None:
        _state["signum"] = signum
        _say(f"{name(signum)}: {_state['note']} ({_again(signum)}: stop at once)")
        return
    raise_now = _state["cleanup"] and _state["count"] == 2
    with _lock:
        depth, main_depth = _state["depths"]
        if raise_now and main_depth > 0:  # this thread is writing a file: after it
            _state["pending_raise"] = True
            return
        if not raise_now and depth > 0:  # a file is being written: exit after it
            _state["pending_exit"] = exit_code()
            return
    if raise_now:  # a write in another thread goes on: only os._exit would cut it short
        raise KeyboardInterrupt
    _end_now(exit_code())


def _end_now(code: int) -> None:
    _say(f"{name()} again: ended at once; the files written so far are intact")
    os._exit(code)


@contextlib.contextmanager
def critical() -> Iterator[None]:
    """A write that must finish once begun (temporary file, then rename): a signal that would
    end the process (or raise) meanwhile does so right after the block, not inside it."""
    main = threading.current_thread() is threading.main_thread()
    with _lock:
        depth, main_depth = _state["depths"]
        _state["depths"] = (depth + 1, main_depth + main)
    try:
        yield
    finally:
        with _lock:
            depth, main_depth = _state["depths"]
            depth, main_depth = depth - 1, main_depth - main
            _state["depths"] = (depth, main_depth)
            pending = _state["pending_exit"] if depth == 0 else None
            # The KeyboardInterrupt is the main thread's: a writer thread must not take it.
            raise_now = main and main_depth == 0 and _state["pending_raise"]
            if raise_now:
                _state["pending_raise"] = False
        if pending is not None:
            _end_now(pending)
        if raise_now:
            raise KeyboardInterrupt


@contextlib.contextmanager
def handling(
    note: str = DEFAULT_NOTE,
    *,
    cleanup: bool = False,
) -> Iterator[Interruption]:
    """Install the handlers (main thread only) for the block; restore the previous ones after.

    `note` says what the first signal does (``stopping at the next evaluation``). `cleanup`:
    the second signal raises KeyboardInterrupt, the third ends at once (see the module doc).
    The recorded signal outlives the block: the command reads
    ``requested()`` after it to choose its exit status; the outermost block starts afresh."""
    if threading.current_thread() is not threading.main_thread():
        yield Interruption()
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    saved = {"note": _state["note"], "cleanup": _state["cleanup"]}
    if not _state["active"]:  # a new command (tests run several in one process)
        _state.update(signum=None, count=0, pending_exit=None, pending_raise=False)
    _state.update(note=note, cleanup=cleanup)
    for sig in SIGNALS:
        signal.signal(sig, _handler)
    _state["active"] += 1
    try:
        yield Interruption()
    finally:
        _state["active"] -= 1
        _state.update(saved)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def reinstall() -> None:
    """Take the signals back after a library replaced their handlers below Python (Ray's core
    worker installs its own SIGTERM handler at ``ray.init``, which exits 15 at once)."""
    if _state["active"] and threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _handler)
