"""Ctrl-C (SIGINT) and SIGTERM for long commands: stop cleanly once, at once the second time.

The contract (docs/interrupting.md):

- the first signal only records itself (``requested()``); the command's work polls that, stops,
  writes what it measured and returns; the command then says what was kept and how to go on,
  and exits ``exit_code()``: 130 for SIGINT, 143 for SIGTERM (128 + the signal, as shells
  report a process a signal ended);
- a second signal ends the process at once (``os._exit``), except inside ``critical()``: a
  file being written and renamed into place is finished first, so nothing is left half
  written.

Plain Python (no Ray, no torch): ``sweepgrok train`` and the Ray drivers share it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals handled: Ctrl-C in a terminal, and what schedulers and ``kill`` send."""
NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}

_state: dict[str, Any] = {"signum": None, "pending_exit": None, "depth": 0, "active": 0}
_lock = threading.Lock()
_notice: list[Callable[[int], None]] = []


def active() -> bool:
    """Inside ``handling()``: sweepgrok's handlers own SIGINT and SIGTERM."""
    return bool(_state["active"])


def requested() -> int | None:
    """The first signal received while ``handling()`` was active (None: none)."""
    return _state["signum"]


def exit_code(signum: int | None = None) -> int:
    """128 + the signal: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + int(signum if signum is not None else (requested() or signal.SIGINT))


def name(signum: int | None = None) -> str:
    """How the signal is named in messages (Ctrl-C, SIGTERM)."""
    sig = signum if signum is not None else requested()
    return NAMES.get(signal.Signals(sig), f"signal {sig}") if sig is not None else "nothing"


def _say(line: str) -> None:
    # os.write, not sys.stderr: the handler may run while the main thread is inside a write to
    # sys.stderr (a live view), and a buffered stream refuses a reentrant call.
    with contextlib.suppress(OSError):
        if os.isatty(2):
            line = "\r\x1b[?25h" + line  # show the cursor a live view hid
        os.write(2, (line + "\n").encode())


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state["signum"] is None:
        _state["signum"] = signum
        again = "Ctrl-C again" if signum == signal.SIGINT else "a second signal"
        _say(f"{name(signum)}: stopping and keeping what was measured ({again} ends at once)")
        for notice in list(_notice):
            notice(signum)
        return
    with _lock:
        if _state["depth"] > 0:  # a file is being written: end right after it is in place
            _state["pending_exit"] = exit_code(signum)
            return
    _end_now(exit_code(signum))


def _end_now(code: int) -> None:
    _say(f"{name()} again: ended at once; the files written so far are intact")
    os._exit(code)


@contextlib.contextmanager
def critical() -> Iterator[None]:
    """A write that must finish once begun (temporary file, then rename): a second signal
    that arrives meanwhile ends the process right after the block, not inside it."""
    with _lock:
        _state["depth"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["depth"] -= 1
            pending = _state["pending_exit"] if _state["depth"] == 0 else None
        if pending is not None:
            _end_now(pending)


@contextlib.contextmanager
def handling(on_signal: Callable[[int], None] | None = None) -> Iterator[None]:
    """Install the handlers (main thread only) for the block; restore the previous ones after.

    `on_signal(signum)` runs at the first signal (in the main thread, between two bytecodes:
    it must only set flags). The recorded signal outlives the block: the command reads
    ``requested()`` after it to choose its exit status."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    if on_signal is not None:
        _notice.append(on_signal)
    for sig in SIGNALS:
        signal.signal(sig, _handler)
    _state["active"] += 1
    try:
        yield
    finally:
        _state["active"] -= 1
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if on_signal is not None:
            _notice.remove(on_signal)


def reinstall() -> None:
    """Take the signals back after a library replaced their handlers below Python (Ray's core
    worker installs its own SIGTERM handler at ``ray.init``, which exits 15 at once)."""
    if _state["active"] and threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _handler)


def reset() -> None:
    """Forget a recorded signal (tests that run several commands in one process)."""
    _state.update(signum=None, pending_exit=None)
