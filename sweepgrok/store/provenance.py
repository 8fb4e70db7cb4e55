"""Where a run came from: package versions, git commit and whether the checkout had uncommitted
changes, torch's build, host, device and what the device is (stored in every run row).

What a rerun must match to repeat a run bit for bit: the code (``git_commit`` and ``git_dirty``),
torch (``torch_version``, ``torch_build``) and the kernels the device runs (``device_name``:
the GPU's name, or the CPU's model, its vector-instruction flags and the kernel width torch
dispatches to, with any environment override of it). Last-bit differences of the CPU's kernel
width moved grok steps in this project's own reruns (analysis/REPRODUCTION.md).
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path

SUMMARY_PROVENANCE = (
    "git_commit",
    "git_dirty",
    "sweepgrok_version",
    "torch_version",
    "torch_build",
    "device",
    "device_name",
)
"""The provenance columns a run summary (a report's runs.csv) keeps from the runs/ rows."""

CPU_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
"""The CPU flags named in `device_name`: the vector instructions torch's CPU kernels use."""

KERNEL_ENV = ("ATEN_CPU_CAPABILITY", "MKL_CBWR")
"""Environment variables that change the CPU kernels torch and MKL pick (named when set)."""


def package_version(dist: str) -> str | None:
    """The installed version of distribution `dist`, or None when it is not installed."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


HERE = Path(__file__).resolve().parent
"""A folder of the checkout sweepgrok runs from."""


def _git(*args: str, cwd: Path = HERE) -> str | None:
    """stdout of `git args` in the checkout at `cwd` (None outside one, or without git)."""
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


@cache
def git_commit() -> str | None:
    """HEAD of the checkout sweepgrok runs from, or None outside a git checkout."""
    out = _git("rev-parse", "HEAD")
    return out.strip() or None if out is not None else None


def checkout_dirty(folder: Path) -> bool | None:
    """Whether tracked files of the git checkout holding `folder` differ from its HEAD
    (uncommitted changes: HEAD alone does not name the code that ran), or None outside a git
    checkout. Untracked files do not count: a sweep folder or a note beside the code is not
    the code."""
    out = _git("status", "--porcelain", "--untracked-files=no", cwd=folder)
    return None if out is None else bool(out.strip())


@cache
def git_dirty() -> bool | None:
    """`checkout_dirty` of the checkout sweepgrok runs from."""
    return checkout_dirty(HERE)


def torch_build() -> str:
    """torch's build: its git revision, CUDA and cuDNN versions ('cpu only' without CUDA)."""
    import torch

    parts = [f"git {str(torch.version.git_version)[:12]}"]
    if torch.version.cuda:
        parts.append(f"cuda {torch.version.cuda}")
        if torch.backends.cudnn.is_available():
            parts.append(f"cudnn {torch.backends.cudnn.version()}")
    else:
        parts.append("cpu only")
    return ", ".join(parts)


def cpu_model() -> tuple[str, list[str]]:
    """(the CPU's model name, its CPU_FLAGS present) from /proc/cpuinfo; the platform's
    processor string and no flags where that file does not exist (not Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine() or "unknown CPU", []
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    model = fields.get("model name") or platform.machine() or "unknown CPU"
    flags = set(fields.get("flags", "").split())
    return model, [f for f in CPU_FLAGS if f in flags]


def device_name(device: str) -> str:
    """What `device` is: a CUDA device's name; for the CPU its model, flags, the kernel width
    torch dispatches to and any KERNEL_ENV override, e.g. 'AMD EPYC 7B12 (avx avx2 fma; torch
    kernels AVX2)'."""
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    model, flags = cpu_model()
    notes = [" ".join(flags)] if flags else []
    notes.append(f"torch kernels {torch.backends.cpu.get_cpu_capability()}")
    notes += [f"{k}={os.environ[k]}" for k in KERNEL_ENV if os.environ.get(k)]
    return f"{model} ({'; '.join(notes)})"


@cache
def provenance(device: str) -> dict[str, str | bool | None]:
    """Provenance columns of a run row (ray's version is read from metadata, not imported)."""
    return {
        "sweepgrok_version": package_version("sweepgrok"),
        "git_commit": git_commit(),
        "git_dirty": git_dirty(),
        "torch_version": package_version("torch"),
        "torch_build": torch_build(),
        "ray_version": package_version("ray"),
        "host": socket.gethostname(),
        "device": device,
        "device_name": device_name(device),
    }
