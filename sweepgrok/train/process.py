"""Process-wide settings for training, set once by each entry point (the ``train`` command,
the Ray trainables, the benchmarks) through ``configure_process``; constructing or running a
Trainer changes nothing outside it."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

import torch

from sweepgrok.config.trial import TrainConfig


def configure_process(train: TrainConfig, default_threads: int | None = None) -> None:
    """Set what a process running `train`-configured trainers needs, for the whole process.

    - malloc keeps freed memory (``keep_freed_memory``);
    - torch intra-op threads: train.threads, else `default_threads` (e.g. a Ray trial's CPU
      share), else torch's default is left alone;
    - deterministic kernels (train.deterministic). warn_only: on CUDA, ops without a
      deterministic kernel warn instead of raising;
    - float32 matrix-product precision (train.matmul_precision: TF32 or not).
    """
    keep_freed_memory()
    threads = train.threads or default_threads
    if threads:
        torch.set_num_threads(threads)
    if train.deterministic:
        # cuBLAS picks its algorithms by the workspace it has; a fixed workspace per handle
        # and stream (PyTorch's documented setting for deterministic cuBLAS) keeps a captured
        # CUDA graph's products the eager step's. Read when cuBLAS first runs: a no-op on a
        # CPU, and where the caller set it or cuBLAS already ran.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(train.deterministic, warn_only=True)
    # Deterministic mode also fills every torch.empty with NaN (to expose reads of
    # uninitialised memory): one more kernel per allocation, which nothing here needs.
    torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]
    torch.set_float32_matmul_precision(train.matmul_precision)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters (malloc.h)
_malloc_tuned = False


def keep_freed_memory() -> bool:
    """Ask glibc malloc to keep freed large blocks for reuse (idempotent; False elsewhere).

    A training step allocates and frees the same large activations every step (8 seeds at
    Z_113: tensors of 8 x 3,830 x 512 floats, 63 MB). glibc serves blocks above its mmap
    threshold (at most 32 MB) with fresh mmap pages and unmaps them on free, so every step
    page-faults and zero-fills them again: measured 15k faults and +30 ms of system time per
    member per step at E = 8. Raising the mmap and trim thresholds to 1 GiB keeps them in the
    heap; the process then holds its peak step memory, which it needs every step anyway."""
    global _malloc_tuned
    if _malloc_tuned:
        return True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    ok = bool(mallopt(_M_MMAP_THRESHOLD, 1 << 30)) and bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))
    _malloc_tuned = ok
    return ok

