"""Where a run came from: package versions, git commit, host, device (stored in every run row)."""

from __future__ import annotations

import socket
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path


def package_version(dist: str) -> str | None:
    """The installed version of distribution `dist`, or None when it is not installed."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@cache
def git_commit() -> str | None:
    """HEAD of the checkout sweepgrok runs from, or None outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@cache
def provenance(device: str) -> dict[str, str | None]:
    """Provenance columns of a run row (ray's version is read from metadata, not imported)."""
    return {
        "sweepgrok_version": package_version("sweepgrok"),
        "git_commit": git_commit(),
        "torch_version": package_version("torch"),
        "ray_version": package_version("ray"),
        "host": socket.gethostname(),
        "device": device,
    }
