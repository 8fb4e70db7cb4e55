"""Tensor operations shared by training and evaluation of a batched ensemble.

Every tensor has a leading member axis E (one member per init seed, see ``models``); nothing
here mixes members or reads a value back to the host.
"""

from __future__ import annotations

import torch
from torch import Tensor


def take(t: Tensor, idx: Tensor) -> Tensor:
    """Per-member rows: t (E, N, ...) and idx (E, B) -> (E, B, ...)."""
    view = idx.view(*idx.shape, *([1] * (t.dim() - 2))).expand(*idx.shape, *t.shape[2:])
    return t.gather(1, view)


def member_finite(z: Tensor) -> Tensor:
    """(E, ...) -> (E,) bool: the member's tensor is entirely finite."""
    return torch.isfinite(z).flatten(1).all(1)


def finite(z: Tensor) -> Tensor:
    """z with non-finite entries set to 0.

    A diverged member's NaNs would make eigh raise for the whole batch: zero them (the member
    is recorded as NaN / diverged at this evaluation anyway)."""
    return torch.nan_to_num(z, nan=0.0, posinf=0.0, neginf=0.0)
