"""A trainer for Ray GPU tests: each trial records what GPU it was given, waits until as many
trials run as should fit at once, then trains for real.

Handed to ``launch_grid(train_fn=...)``. Trials talk through files in a shared folder (no Ray
actor: launch_grid starts Ray itself): ``in/<run>`` while a trial runs, ``done/<run>`` after,
``seen/<run>`` the trials running beside it once the expected number ran together. Ray workers
cannot import this module (tests/ is not a package on their path), so ``ship_by_value`` makes
cloudpickle send it with the function.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HOLD_S = 120.0
"""Longest a trial waits for the others (far above the few seconds it takes; then it fails)."""


def ship_by_value() -> None:
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def gauged(folder: Path, total: int, cap: int) -> Callable[..., Any]:
    """sweepgrok.train.trainer.train behind a gauge: each of the `total` trials waits until
    min(cap, trials not yet done) trials run at once, records them, then trains."""
    ship_by_value()
    for sub in ("in", "done", "seen"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return functools.partial(_gauged_train, folder=folder, total=total, cap=cap)


def _write(path: Path, value: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)  # readers never see half a file


def _running(folder: Path) -> list[dict[str, Any]]:
    out = []
    for path in (folder / "in").iterdir():
        if path.name.startswith("."):
            continue
        try:
            out.append(json.loads(path.read_text()))
        except FileNotFoundError:  # it finished meanwhile
            continue
    return out


def _gauged_train(
    cfg: Any, sink: Any = None, *, folder: Path, total: int, cap: int, run_ids: Any, **kw: Any
) -> Any:
    import ray

    from sweepgrok.train.trainer import train

    me = run_ids[0]
    _write(
        folder / "in" / me,
        {
            "run": me,
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "gpu_ids": ",".join(str(i) for i in ray.get_gpu_ids()),
            "device": cfg.train.device,
        },
    )
    deadline = time.monotonic() + HOLD_S
    while True:
        running = _running(folder)
        done = len(list((folder / "done").iterdir()))
        if len(running) >= min(cap, total - done):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(running)} trials ran together, never {cap}")
        time.sleep(0.05)  # polling the others' files
    _write(folder / "seen" / me, running)
    try:
        return train(cfg, sink, run_ids=run_ids, **kw)
    finally:
        os.replace(folder / "in" / me, folder / "done" / me)
