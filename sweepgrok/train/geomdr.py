"""The GeomDR regularizer (paper 2, "How to Tame Grokking"): penalty, solver, schedule, loss.

Everything GeomDR lives here, from the config section ``geomdr`` to the tensor ops: the
penalty of one layer (``geomdr_penalty``), the top-d* subspace it needs (exact eigh or one
warm subspace-iteration step, ``top_subspace`` and ``WarmSubspaces``), the row subsample
(``subsample_indices``), the schedule ``lambda(t)`` (``geomdr_lambda``) and the sum over a
batched ensemble's regularized layers (``geomdr_loss``), which the trainer adds to the task
loss and the evaluation records as ``geomdr_loss``. The spectra it is built on are in
``sweepgrok.train.geometry``.

Definitions (docs/statistics.md):

- GeomDR loss per layer: ``sum_{j > d*} mu_j`` (variance outside the top d* directions of the
  covariance of the layer's representations); total ``L = L_task + lambda(t) * sum over
  regularized layers``. Two controls replace it on request (geomdr.penalty): its share of the
  total variance, and the total variance itself.
- Top-d* subspace: exact (eigh) or refined from the last step's basis by one step of
  subspace iteration (geomdr.solver); ``WarmSubspaces`` keeps the basis between steps.
- Schedule: ``lambda(t) = 0`` before ``t_s``, then
  ``lambda_max * (1 - cos(pi * min(1, (t - t_s) / T_ramp))) / 2``.

Every function takes an optional leading batch shape ``...`` (E members in lockstep); nothing
here syncs with the host during training. Where the paper is silent, the choices made here are
written in each function's docstring.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, get_args

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from sweepgrok.config.trial import GeomDRConfig, GeomDRPenalty
from sweepgrok.train.ensemble import finite, take
from sweepgrok.train.geometry import (
    centred,
    covariance,
    robust_eigh,
    robust_eigvalsh,
    small_gram,
)

__all__ = [
    "TAIL_RECOMPUTE",
    "WarmSubspaces",
    "geomdr_lambda",
    "geomdr_loss",
    "geomdr_penalty",
    "subsample_indices",
    "top_subspace",
    "uses_subspace",
]


class _TailVariance(torch.autograd.Function):
    """``trace(C) - sum_{j <= d*} mu_j`` of centred ``zc`` (..., N, d), with a closed-form
    backward.

    With ``V`` the top-d* eigenvectors of C, ``dP/dC = I - V V^T``, so
    ``dP/dZ~ = 2 / (N-1) * (Z~ - (Z~ V) V^T)``: two thin (N x d x d*) products instead of
    autograd's two full (N x d x d) products through ``Z~^T Z~`` plus the eigh backward. That
    is what made the unsubsampled penalty cost ~3x a plain step; see benchmarks/bench_geomdr.
    In the N x N Gram form the same projection is ``(U U^T) Z~`` with U the top eigenvectors
    of ``Z~ Z~^T`` (``Z~ V = U S``). Only eigenvectors of the top d*, the largest and best
    separated eigenvalues, enter: ties or zeros elsewhere are harmless, and a tie across the
    cut gives one valid subgradient. No eigenvalue differences are ever divided by.
    """

    @staticmethod
    def forward(ctx: Any, zc: Tensor, target_dim: int) -> Tensor:
        n, d = zc.shape[-2], zc.shape[-1]
        evals, evecs = robust_eigh(small_gram(zc))  # ascending
        evals, top = evals[..., -target_dim:], evecs[..., -target_dim:]  # (..., min(N, d), d*)
        # float32 LAPACK eigh can return NaN for a finite, nearly degenerate Gram (seen when
        # GeomDR has squeezed the tail to ~0). Such a member skips the penalty for this step
        # (value and gradient 0) instead of poisoning its weights; no host sync needed.
        ok = torch.isfinite(evals).all(-1) & torch.isfinite(top).flatten(-2).all(-1)
        top = torch.where(ok[..., None, None], top, 0.0)
        ctx.save_for_backward(zc, top, ok)
        ctx.wide = n < d  # top lives on the sample side (N x N Gram)
        return torch.where(ok, _total_variance(zc) - evals.sum(dim=-1), 0.0)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        zc, top, ok = ctx.saved_tensors
        inside = top @ (top.mT @ zc) if ctx.wide else (zc @ top) @ top.mT
        scale = torch.where(ok, grad, 0.0) * (2.0 / (zc.shape[-2] - 1))
        return scale[..., None, None] * (zc - inside), None


class _TailOutsideBasis(torch.autograd.Function):
    """``trace(C) - trace(Q^T C Q)`` of ``z`` (..., N, d) for a constant orthonormal basis Q
    (..., d, d*), with the gradient written out: ``2/(N-1) (Z~ - (Z~ Q) Q^T)``.

    Z~ (N x d) is never formed: every pass over the (N, d) activations costs about as much as
    a thin product, and these passes were most of what the warm solver added to a plain step
    (docs/speed.md). ``Z~ Q = Z Q - 1 (mean Q)`` (centred on the N x d* side); ``trace(C) =
    (||Z||^2 - N ||mean||^2) / (N-1)`` (two read-only passes). In float32 that difference
    cancels: the value's rounding error is about (1 + N ||mean||^2 / ||Z~||^2) times the error
    with Z~ formed, 1.5x for ReLU-like units (mean^2 / variance ~0.5; measured 3.1e-6 against
    2.0e-6 relative at N = 2000, d = 64). The gradient is not affected: the backward forms
    ``s (Z - 1 mean)`` per element (one pass) and subtracts ``s (Z~Q) Q^T`` in place (one GEMM).
    """

    @staticmethod
    def forward(ctx: Any, z: Tensor, q: Tensor) -> Tensor:
        n = z.shape[-2]
        mean = z.mean(dim=-2, keepdim=True)
        zq = z @ q - mean @ q
        ctx.save_for_backward(z, mean, zq, q)
        total = torch.linalg.vector_norm(z, dim=(-2, -1)).square()
        total = total - n * mean.square().sum(dim=(-2, -1))
        return (total - zq.square().sum(dim=(-2, -1))) / (n - 1)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        z, mean, zq, q = ctx.saved_tensors
        (n, d), k = z.shape[-2:], q.shape[-1]
        scale = (grad * (2.0 / (n - 1)))[..., None, None]
        out = torch.addcmul(-mean * scale, z, scale).contiguous()  # s (Z - 1 mean)
        left = (zq * scale).reshape(-1, n, k)  # s folded into the N x d* factor
        out.view(-1, n, d).baddbmm_(left, q.mT.reshape(-1, k, d), alpha=-1.0)
        return out, None


def geomdr_penalty(
    z: Tensor, target_dim: int, kind: GeomDRPenalty = "tail", basis: Tensor | None = None
) -> Tensor:
    """GeomDR loss of one layer from the covariance eigenvalues mu_j of ``z`` (..., N, d).

    ``kind`` (config key geomdr.penalty) picks what is penalized:

    - ``tail``: ``sum_{j > d*} mu_j``, the paper's loss (``_tail_variance``);
    - ``tail_fraction``: ``sum_{j > d*} mu_j / sum_j mu_j``, the share of the variance outside
      the top d*: rescaling ``z`` by c scales both sums by c^2, so only the dimension counts;
    - ``trace``: ``sum_j mu_j``, the total variance, computed as ``||Z~||_F^2 / (N-1)`` (the
      trace of C, which equals the eigenvalue sum; no eigensolver). d* is ignored: the scale
      control, the same penalty mechanism without a dimension target.

    ``basis`` (..., d, d*), orthonormal columns (``top_subspace``), replaces the eigensolver of
    tail and tail_fraction: the top-d* sum is taken as ``trace(Q^T C Q)``, Q held constant
    (see ``_tail_variance``). Ignored where no eigenvalue is needed (``uses_subspace`` false).

    Returns (...,), differentiable in ``z`` (first order; no double backward). The eigensolver
    runs in z's dtype: cast z (``z.double()``) to get float64; the gradient flows back
    through the cast.
    """
    if target_dim < 0:
        raise ValueError(f"target_dim must be >= 0, got {target_dim}")
    if kind not in get_args(GeomDRPenalty):
        raise ValueError(f"unknown GeomDR penalty {kind!r}: allowed {get_args(GeomDRPenalty)}")
    if z.shape[-2] < 2:  # one sample has no spread (and N - 1 = 0): 0, as the tail always was
        return z.new_zeros(z.shape[:-2])
    if kind == "trace":
        return _total_variance(centred(z))
    tail = _tail_variance(z, target_dim, basis)
    if kind == "tail":
        return tail
    # tail_fraction. A constant representation (dead units) has total variance 0 and an empty
    # tail: 0/0 would be NaN and poison the weights. Clamping at the smallest normal float makes
    # it 0 (zero gradient) and leaves every representable nonzero variance untouched, so the
    # fraction stays scale-free.
    total = _total_variance(centred(z))
    return tail / total.clamp_min(torch.finfo(total.dtype).tiny)


def _total_variance(zc: Tensor) -> Tensor:
    """``trace(C) = ||Z~||_F^2 / (N-1)`` of centred ``zc`` (..., N, d) -> (...,)."""
    return zc.square().sum(dim=(-2, -1)) / (zc.shape[-2] - 1)


def uses_subspace(n: int, d: int, target_dim: int, kind: GeomDRPenalty) -> bool:
    """Whether the penalty ``kind`` of N x d representations needs the top-d* eigenspace:
    tail or tail_fraction with ``0 < d* < min(d, N - 1)`` (otherwise the tail is the whole
    variance, or exactly empty)."""
    return kind != "trace" and 0 < target_dim < min(d, n - 1)


def top_subspace(z: Tensor, target_dim: int, start: Tensor | None = None) -> Tensor:
    """An orthonormal basis (..., d, d*) of the top-d* eigenspace of the covariance C of ``z``
    (..., N, d); no gradient.

    ``start`` None: the exact eigenvectors (eigh of the d x d covariance). Otherwise one step of
    subspace iteration from ``start`` (the last step's basis): ``Q = qr(C start)``, computed as
    ``Z~^T (Z~ start)`` (2 N d d* multiply-adds; C, N d^2, is never formed). Each step shrinks
    the part of the basis outside the top-d* eigenspace by ``mu_{d*+1} / mu_{d*}``; warm
    started from the last training step, whose C differs a little, one step tracks it. A
    basis that is not finite (eigh failed, overflow) is replaced by the first d* coordinate
    axes, from which the iteration recovers: no host sync is needed to detect it.
    """
    z = z.detach()
    if start is None:
        return _finite_or_axes(robust_eigh(covariance(z))[1][..., -target_dim:])
    zs = z @ start  # Z~ start is Z start centred over the rows: Z~ (N x d) is never formed
    return _refined(z, zs - zs.mean(dim=-2, keepdim=True))


def _refined(z: Tensor, zq: Tensor) -> Tensor:
    """One subspace-iteration step: ``qr(C Q)`` from ``zq = Z~ Q`` (..., N, d*), computed as
    ``Z^T (Z~ Q)``, since ``Z~^T Y = Z^T Y`` for any row-centred Y and the 1 / (N-1) does not
    change the span: 2 N d d* multiply-adds with the product, C (N d^2) never formed."""
    # (Z~Q)^T Z, transposed: the same product, about twice as fast as Z^T (Z~Q) on CPU BLAS.
    return _finite_or_axes(torch.linalg.qr((zq.mT @ z.detach()).mT).Q)


def _finite_or_axes(q: Tensor) -> Tensor:
    """``q`` (..., d, d*), with each member's basis that is not finite replaced by the first d*
    coordinate axes (no host sync to detect it; the iteration recovers from the axes)."""
    axes = torch.eye(*q.shape[-2:], dtype=q.dtype, device=q.device)
    return torch.where(torch.isfinite(q).flatten(-2).all(-1)[..., None, None], q, axes)


def _tail_variance(z: Tensor, target_dim: int, basis: Tensor | None = None) -> Tensor:
    """``sum_{j > d*} mu_j`` of the covariance of ``z`` (..., N, d) -> (...,).

    Computed as ``trace(C) - sum_{j <= d*} mu_j``, which equals the tail sum, because:

    - the trace is ``||Z~||_F^2 / (N-1)``: exact, no eigensolver;
    - only the top d* eigenpairs are used; the gradient ``2/(N-1) Z~ (I - V_top V_top^T)`` is
      written out (``_TailVariance``), so it never divides by eigenvalue gaps (the NaN/inf of
      the eigh backward at repeated eigenvalues) and costs thin products only. Repeated or
      zero eigenvalues, even a tie across the d* cut, give a finite gradient (a subgradient);
    - the eigenproblem is the smaller Gram matrix (N x N when N < d), so a subsample is cheap.

    0 (no gradient) when d* >= d or d* >= N - 1: the covariance has rank <= min(d, N - 1), so
    the tail is exactly empty. With a gradient, rounding can make the value a few ulps below 0
    when the tail is ~0; it is not clamped, so the gradient stays the true one. Value only
    (evaluation, no gradient): `_tail_value`, finite and >= 0.

    With ``basis`` Q (..., d, d*) orthonormal, the top-d* sum is ``trace(Q^T C Q) =
    ||Z~ Q||_F^2 / (N-1)`` with Q constant, and autograd gives ``2/(N-1) Z~ (I - Q Q^T)``,
    thin products only. By Ky Fan's principle the top-d* sum is the maximum of
    ``trace(Q^T C Q)`` over orthonormal Q, so the value is never below the exact tail; where
    span Q is the top-d* eigenspace it is the maximizer, the derivative of the maximum is the
    derivative at the maximizer with Q held fixed (Danskin), and ``Q Q^T = V V^T``: value and
    gradient are those of eigh. An error of angle theta in the span costs O(theta^2) in the
    value and O(theta) in the gradient.
    """
    n, d = z.shape[-2], z.shape[-1]
    if target_dim >= d or target_dim >= n - 1:
        return z.new_zeros(z.shape[:-2])
    if target_dim == 0:
        return _total_variance(centred(z))
    if basis is not None:
        if basis.shape[-2:] != (d, target_dim):
            raise ValueError(f"basis must be (..., {d}, {target_dim}), got {tuple(basis.shape)}")
        given: Tensor = _TailOutsideBasis.apply(z, basis.detach().expand(*z.shape[:-2], d, -1))
        return given
    zc = centred(z)
    if not (torch.is_grad_enabled() and z.requires_grad):
        return _tail_value(zc, target_dim)
    out: Tensor = _TailVariance.apply(zc, target_dim)
    return out


TAIL_RECOMPUTE = 1e-2
"""Value only: a tail below this share of the trace is recomputed in float64 (`_tail_value`)."""


def _tail_value(zc: Tensor, target_dim: int) -> Tensor:
    """The tail of centred ``zc`` (..., N, d), value only (evaluation, 0 < d* < min(d, N-1)):
    a finite number >= 0 for every finite ``zc``.

    First ``trace(C) - top-d* sum`` in zc's dtype (eigenvalues without eigenvectors, about half
    the eigh cost). Two things break it in float32, seen on division mod 97 once GeomDR had
    squeezed the tail: LAPACK's eigvalsh can return NaN for a finite, nearly degenerate Gram
    (the training path masks that member's step, `_TailVariance`; this one had no guard), and
    the difference cancels (~d eps trace of rounding) to a slightly negative value when the
    tail is ~0. Members whose value is not finite or below `TAIL_RECOMPUTE` of the trace are
    recomputed as the sum of their smallest squared singular values in float64 (`_tail_f64`):
    no difference is taken, so the value is >= 0. The others keep their bits.
    """
    total = _total_variance(zc)
    top = robust_eigvalsh(small_gram(zc))[..., -target_dim:]
    tail = total - top.sum(dim=-1)
    redo = ~torch.isfinite(tail) | (tail < TAIL_RECOMPUTE * total)
    if not bool(redo.any()):  # a host sync: evaluation only
        return tail
    tail = tail.clone()
    tail[redo] = _tail_f64(zc[redo], target_dim).to(tail.dtype)
    return tail


def _tail_f64(zc: Tensor, target_dim: int) -> Tensor:
    """``sum_{j > d*} s_j^2 / (N-1)`` from the singular values s of centred ``zc`` (B, N, d) in
    float64: every term a square, so >= 0; a small singular value is accurate to eps ||Z~||,
    not eps ||Z~||^2 as through the Gram. If the SVD does not converge, the float64 Gram's
    smallest eigenvalues, each clamped at 0 (their negatives are rounding)."""
    z64 = zc.double()
    try:
        s = torch.linalg.svdvals(z64)  # descending
        return s[..., target_dim:].square().sum(dim=-1) / (zc.shape[-2] - 1)
    except torch.linalg.LinAlgError:
        low = robust_eigvalsh(small_gram(z64))[..., :-target_dim]  # ascending
        return low.clamp_min(0.0).sum(dim=-1)


def geomdr_lambda(step: int, cfg: GeomDRConfig) -> float:
    """lambda(t): 0 if disabled or ``t < t_s``; else the cosine ramp to ``lambda_max``.

    ``lambda_max * (1 - cos(pi * min(1, (t - t_s) / T_ramp))) / 2``, so lambda(t_s) = 0,
    lambda(t_s + T_ramp/2) = lambda_max/2 and lambda = lambda_max from t_s + T_ramp on.
    ``T_ramp = 0`` is a step: lambda_max at every ``t >= t_s``.
    """
    if not cfg.enabled or step < cfg.start_step:
        return 0.0
    if cfg.ramp_steps == 0:
        return float(cfg.lambda_max)
    x = min(1.0, (step - cfg.start_step) / cfg.ramp_steps)
    return float(cfg.lambda_max * (1.0 - math.cos(math.pi * x)) / 2.0)


def subsample_indices(
    n: int, fraction: float, generator: torch.Generator, device: torch.device | str | None = None
) -> Tensor | None:
    """A fresh random subset of ``max(2, round(fraction * n))`` row indices out of n, or None.

    None when ``fraction >= 1`` (use the whole batch, no gather). Drawn with ``generator`` on
    the generator's own device (so a CPU generator is reproducible whatever ``device`` is),
    then moved to ``device`` and sorted (ascending gathers are friendlier to memory). At least
    2 rows, because a covariance needs N >= 2.
    """
    if fraction >= 1.0:
        return None
    m = min(n, max(2, round(fraction * n)))
    idx = torch.randperm(n, generator=generator, device=generator.device)[:m]
    return idx.sort().values.to(device)


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
        basis = top_subspace(z, target_dim, old)
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
        subsets = [subsample_indices(n, cfg.subsample, g, hidden[0].device) for g in gens]
        idx = None if subsets[0] is None else torch.stack([s for s in subsets if s is not None])
    total = hidden[0].new_zeros(e)
    for i in layers:
        h = hidden[i] if idx is None else take(hidden[i], idx)
        basis = None
        rows, width = h.shape[-2], h.shape[-1]
        if warm is not None and uses_subspace(rows, width, cfg.target_dim, cfg.penalty):
            # No finite() here: it costs a step ~10% at subsample 1.0, and the warm solver has
            # no eigh to raise on a diverged member's NaN: that member gets a NaN penalty (its
            # loss is NaN already) and a fresh basis (the axes), the others are untouched.
            basis = warm.refine(i, h, cfg.target_dim)
        else:
            h = finite(h)
        total = total + geomdr_penalty(h, cfg.target_dim, cfg.penalty, basis)
    return total
