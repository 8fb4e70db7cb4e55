"""The driver's heartbeat: ``<sweep>/driver.json``, what the running driver holds, for `status`.

A `launch` or `search` driver writes it when it starts, on every trial event (start, end,
failure) and at least every REFRESH_S seconds, and once more when it stops:

    {"pid": 4242, "host": "box", "command": "launch", "state": "running",
     "started": 1764771269.1, "updated": 1764771301.5, "total": 4, "done_before": 0,
     "trials": {"done": 1, "running": 2, "pending": 1, "failed": 0, "interrupted": 0},
     "resume": "sweepgrok launch /abs/grid.yaml --storage /abs/runs --resume"}

``state`` is running, interrupted (stopped before every trial ended: a signal, a crash) or
ended. ``done_before``: trials a search finished in earlier sessions (its Tune experiment holds
only this session's). A driver is alive while its state is running, its heartbeat is fresher
than STALE_S and, on this host, its pid is a live process: a driver killed outright (SIGKILL,
a lost machine) leaves state running, and is told apart that way.

No Ray, no torch: `status` reads it from any machine that sees the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sweepgrok.core.interrupt import critical

HEARTBEAT_FILE = "driver.json"
REFRESH_S = 5.0
"""Most seconds between two writes while the driver runs."""
STALE_S = 30.0
"""A heartbeat older than this is a driver that stopped (on another host, the only sign)."""
STATES = ("done", "running", "pending", "failed", "interrupted")


class Heartbeat:
    """Writes driver.json (atomically) for one driver session; a daemon thread refreshes it."""

    def __init__(
        self, sweep_dir: Path, command: str, total: int, done_before: int = 0, resume: str = ""
    ) -> None:
        self.path = Path(sweep_dir) / HEARTBEAT_FILE
        now = time.time()
        self.doc: dict[str, Any] = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "state": "running",
            "started": now,
            "updated": now,
            "total": total,
            "done_before": done_before,
            "trials": {s: 0 for s in STATES} | {"pending": max(0, total - done_before)},
            "resume": resume,
        }
        self._lock = threading.RLock()  # update() writes under it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Heartbeat:
        self.write()
        self._thread = threading.Thread(target=self._refresh, name="sweepgrok-heartbeat",
                                        daemon=True)
        self._thread.start()
        return self

    def _refresh(self) -> None:
        while not self._stop.wait(REFRESH_S):
            self.write()

    def done_before(self, n: int) -> None:
        """Trials a search finished in earlier sessions (known once its study is open)."""
        with self._lock:
            self.doc["done_before"] = n
            self.doc["trials"]["pending"] = max(0, self.doc["total"] - n)
            self.write()

    def update(self, counts: Mapping[str, int]) -> None:
        """The trial states the driver knows now (this session's trials)."""
        trials = {s: int(counts.get(s, 0)) for s in STATES}
        with self._lock:
            if trials == self.doc["trials"]:
                return  # nothing new: the refresh thread keeps the time fresh
            self.doc["trials"] = trials
            self.write()

    def stop(self, state: str, counts: Mapping[str, int] | None = None) -> None:
        """The last write: interrupted or ended, with the whole sweep's trial `counts` when
        given (what `status` reads from the folder once the driver stopped)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=REFRESH_S)
        with self._lock:
            self.doc["state"] = state
            if counts is not None:  # stored as this session's: counts() adds done_before
                trials = {s: int(counts.get(s, 0)) for s in STATES}
                trials["done"] = max(0, trials["done"] - int(self.doc["done_before"]))
                self.doc["trials"] = trials
        self.write()

    def write(self) -> None:
        with self._lock:
            self.doc["updated"] = time.time()
            text = json.dumps(self.doc)
            tmp = self.path.with_name(f".{HEARTBEAT_FILE}.{os.getpid()}.tmp")
            with critical(), contextlib.suppress(OSError):  # a full disk: the rows matter more
                tmp.write_text(text)
                os.replace(tmp, self.path)


def read(sweep_dir: Path) -> dict[str, Any] | None:
    """The heartbeat of the sweep's last driver (None: none, or unreadable)."""
    try:
        doc = json.loads((Path(sweep_dir) / HEARTBEAT_FILE).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("updated"), int | float) else None


def pid_alive(pid: Any) -> bool:
    """A live process of that pid on this machine."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    with contextlib.suppress(OSError):  # a zombie has ended
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        return state != "Z"
    return True


def alive(doc: Mapping[str, Any], now: float) -> bool:
    """The driver of this heartbeat is still running (see the module doc)."""
    if doc.get("state") != "running" or now - float(doc["updated"]) > STALE_S:
        return False
    return doc.get("host") != socket.gethostname() or pid_alive(doc.get("pid"))


def counts(doc: Mapping[str, Any]) -> dict[str, int]:
    """Trial counts of the whole sweep from a live driver's heartbeat."""
    trials = doc.get("trials") or {}
    out = {s: int(trials.get(s, 0)) for s in STATES}
    out["done"] += int(doc.get("done_before", 0))
    known = sum(out[s] for s in STATES if s != "pending")
    out["pending"] = max(0, int(doc.get("total", 0)) - known)
    return out
