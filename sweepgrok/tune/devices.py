"""The device a Ray trial trains on: the GPU Ray assigned it, else the CPU.

Ray gives a trial that asks for `resources.gpu` a GPU id (``ray.get_gpu_ids()``) and sets the
worker's ``CUDA_VISIBLE_DEVICES`` to it, so that torch's ``cuda`` is that GPU. A trial that asks
for none is not accounted for on any GPU: Ray (2.60) then leaves ``CUDA_VISIBLE_DEVICES`` as the
node has it, and ``train.device: auto`` would put every such trial on the node's first GPU
behind the scheduler's back. In a trial, auto is therefore cuda only when Ray assigned a GPU
and torch finds CUDA (a logical GPU, ``ray start --num-gpus 2`` on a CPU machine, has none).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrialDevice:
    """Where a trial trains and why."""

    device: str
    """cpu or cuda: the train.device the trainer is built with."""
    gpu_ids: str | None
    """Ray's GPU ids of the trial, comma-separated ("1", "0,1"); None without a GPU."""
    note: str | None = None
    """Why the trial does not use the GPU Ray assigned (logged once), else None."""


class NoCudaInTrial(RuntimeError):
    """train.device: cuda in a trial whose process finds no CUDA device."""


def resolve(
    requested: str, gpu_ids: Sequence[object], cuda: bool, visible: str | None
) -> TrialDevice:
    """The device of a trial that asked for `requested` (auto, cpu, cuda) and was given
    `gpu_ids` by Ray, in a process where torch finds CUDA (`cuda`) or not; `visible` is its
    CUDA_VISIBLE_DEVICES (for the messages). Raises NoCudaInTrial for cuda without CUDA."""
    ids = ",".join(str(i) for i in gpu_ids) or None
    if requested == "cpu":
        return TrialDevice("cpu", ids)
    if requested == "cuda":
        if not cuda:
            raise NoCudaInTrial(
                f"train.device: cuda, but torch finds no CUDA device in this trial (Ray GPU "
                f"ids: {ids or 'none'}, CUDA_VISIBLE_DEVICES={visible}): use train.device: auto"
            )
        return TrialDevice("cuda", ids)
    if ids is None:
        return TrialDevice("cpu", None)
    if not cuda:
        note = (
            f"Ray assigned GPU {ids} to this trial (CUDA_VISIBLE_DEVICES={visible}), but torch "
            "finds no CUDA device (a logical GPU, or a CPU-only torch): training on the CPU"
        )
        return TrialDevice("cpu", ids, note)
    return TrialDevice("cuda", ids)


def trial_device(requested: str) -> TrialDevice:
    """`resolve` for this Ray worker process; logs the note (once per trial: one call each)."""
    import ray
    import torch

    found = resolve(
        requested,
        ray.get_gpu_ids(),
        torch.cuda.is_available(),
        os.environ.get("CUDA_VISIBLE_DEVICES"),
    )
    if found.note:
        log.warning("%s", found.note)
    return found
