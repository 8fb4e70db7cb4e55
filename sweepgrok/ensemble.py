"""Tensor operations shared by training and evaluation of a batched ensemble.

Every tensor has a leading member axis E (one member per init seed, see ``models``); nothing
here mixes members or reads a value back to the host.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from sweepgrok import geometry as geo
from sweepgrok.config import GeomDRConfig


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


def geomdr_loss(
    hidden: Sequence[Tensor], cfg: GeomDRConfig, gens: Sequence[torch.Generator] | None = None
) -> Tensor:
    """GeomDR penalty of kind cfg.penalty, per layer, summed over cfg.layers (else all): (E,).

    hidden: each layer's representations (E, N, d). With `gens` (one per member, training) the
    covariance is estimated on a fresh subset of cfg.subsample of the rows drawn from the
    member's generator; without (evaluation) on all rows."""
    layers = cfg.layers if cfg.layers is not None else range(len(hidden))
    e, n = hidden[0].shape[:2]
    idx = None
    if gens is not None:
        subsets = [geo.subsample_indices(n, cfg.subsample, g, hidden[0].device) for g in gens]
        idx = None if subsets[0] is None else torch.stack([s for s in subsets if s is not None])
    total = hidden[0].new_zeros(e)
    for i in layers:
        h = hidden[i] if idx is None else take(hidden[i], idx)
        total = total + geo.geomdr_penalty(finite(h), cfg.target_dim, cfg.penalty)
    return total
