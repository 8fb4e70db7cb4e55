"""Tensor operations shared by training and evaluation of a batched ensemble.

Every tensor has a leading member axis E (one member per init seed, see ``models``); nothing
here mixes members or reads a value back to the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from sweepgrok.config.trial import GeomDRConfig
from sweepgrok.train import geometry as geo


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


class WarmSubspaces:
    """Each regularized layer's top-d* covariance basis from the last training step, per member
    (geomdr.solver subspace): the start of the next step's subspace iteration."""

    def __init__(self) -> None:
        self.bases: dict[int, Tensor] = {}
        """Layer index -> (E, d, d*) orthonormal bases; a layer enters at its first penalty."""

    def refine(self, layer: int, z: Tensor, target_dim: int) -> Tensor:
        """The basis of `layer` refined on this step's representations z (E, N, d), kept.

        A layer's basis is updated in place once it exists: a captured CUDA graph reads and
        writes the same memory on every replay (the values are those of a fresh tensor)."""
        old = self.bases.get(layer)
        basis = geo.top_subspace(z, target_dim, old)
        if old is None or old.shape != basis.shape:
            self.bases[layer] = basis
            return basis
        return old.copy_(basis)

    def select(self, idx: Tensor) -> None:
        """Keep the members `idx` (the trainer's compaction)."""
        self.bases = {i: b.index_select(0, idx) for i, b in self.bases.items()}

    def state(self) -> dict[str, Any]:
        """Checkpoint state: plain ints and tensors (loadable with weights_only)."""
        return {"bases": dict(self.bases)}

    def load_state(self, state: Any) -> None:
        """Restore `state()`; ValueError if it is not one."""
        bases = state.get("bases") if isinstance(state, dict) else None
        if not (isinstance(bases, dict) and all(
                isinstance(k, int) and torch.is_tensor(v) and v.dim() == 3
                for k, v in bases.items())):
            raise ValueError("not a GeomDR subspace state")
        self.bases = dict(bases)


def geomdr_loss(
    hidden: Sequence[Tensor],
    cfg: GeomDRConfig,
    gens: Sequence[torch.Generator] | None = None,
    warm: WarmSubspaces | None = None,
) -> Tensor:
    """GeomDR penalty of kind cfg.penalty, per layer, summed over cfg.layers (else all): (E,).

    hidden: each layer's representations (E, N, d). With `gens` (one per member, training) the
    covariance is estimated on a fresh subset of cfg.subsample of the rows drawn from the
    member's generator; without (evaluation) on all rows. With `warm`, the top-d* directions
    come from its bases, refined one subspace-iteration step on this step's rows; without, from
    eigh."""
    layers = cfg.layers if cfg.layers is not None else range(len(hidden))
    e, n = hidden[0].shape[:2]
    idx = None
    if gens is not None:
        subsets = [geo.subsample_indices(n, cfg.subsample, g, hidden[0].device) for g in gens]
        idx = None if subsets[0] is None else torch.stack([s for s in subsets if s is not None])
    total = hidden[0].new_zeros(e)
    for i in layers:
        h = hidden[i] if idx is None else take(hidden[i], idx)
        basis = None
        rows, width = h.shape[-2], h.shape[-1]
        if warm is not None and geo.uses_subspace(rows, width, cfg.target_dim, cfg.penalty):
            # No finite() here: it costs a step ~10% at subsample 1.0, and the warm solver has
            # no eigh to raise on a diverged member's NaN: that member gets a NaN penalty (its
            # loss is NaN already) and a fresh basis (the axes), the others are untouched.
            basis = warm.refine(i, h, cfg.target_dim)
        else:
            h = finite(h)
        total = total + geo.geomdr_penalty(h, cfg.target_dim, cfg.penalty, basis)
    return total
