"""Pure measurements of representation geometry, and the GeomDR loss with its schedule (paper 2).

Every function takes an optional leading batch shape ``...``: E independent seeds trained in
lockstep as one batched model give ``z`` of shape ``(E, N, d)`` and results of shape ``(E,)``.
Nothing here keeps state, syncs with the host or reads a config beyond the values passed in.

Definitions (docs/statistics.md, paper 2 "How to Tame Grokking"):

- Representations of a layer: ``Z`` (N x d). Centre: ``Z~ = Z - mean``. Covariance
  ``C = Z~^T Z~ / (N - 1)``, eigenvalues ``mu_1 >= ... >= mu_d``.
- Effective dimension (participation ratio): ``D_eff = (sum mu_i)^2 / sum mu_i^2``. Isotropic
  data in d dimensions gives ~d; a rank-1 cloud gives 1 (a public snippet computes the
  reciprocal; the tests pin the direction).
- Local neighbourhood distance ``rho``: mean Euclidean distance to the k nearest neighbours of
  the L2-normalized representations.
- GeomDR loss per layer: ``sum_{j > d*} mu_j`` (variance outside the top d* directions);
  total ``L = L_task + lambda(t) * sum over regularized layers``. Two controls replace it on
  request (geomdr.penalty): its share of the total variance, and the total variance itself.
- Top-d* subspace: exact (eigh) or refined from the last step's basis by one step of
  subspace iteration (geomdr.solver); the caller keeps the basis (``ensemble.WarmSubspaces``).
- Schedule: ``lambda(t) = 0`` before ``t_s``, then
  ``lambda_max * (1 - cos(pi * min(1, (t - t_s) / T_ramp))) / 2``.
- Collapse onset: first evaluation where D_eff falls below a stated fraction of its running max.

Where the paper is silent, the choices made here are written in each function's docstring.
"""

from __future__ import annotations

import math
from typing import Any, get_args

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from sweepgrok.config.trial import GeomDRConfig, GeomDRPenalty

__all__ = [
    "above_chance",
    "covariance",
    "covariance_spectrum",
    "effective_dimension",
    "fourier_concentration",
    "frequency_energy",
    "geomdr_lambda",
    "geomdr_penalty",
    "knn_distance",
    "participation_ratio",
    "subsample_indices",
    "top_subspace",
    "uses_subspace",
]


def _centred(z: Tensor) -> Tensor:
    """``z - mean`` over the sample axis (-2); needs at least two samples for ``/(N-1)``."""
    if z.dim() < 2:
        raise ValueError(f"expected z of shape (..., N, d), got {tuple(z.shape)}")
    if z.shape[-2] < 2:
        raise ValueError(f"need at least 2 samples to estimate a covariance, got N={z.shape[-2]}")
    return z - z.mean(dim=-2, keepdim=True)


def _small_gram(zc: Tensor) -> Tensor:
    """The smaller of ``Z~^T Z~`` (d x d) and ``Z~ Z~^T`` (N x N), divided by N-1, symmetrized.

    Both have the same nonzero eigenvalues, so spectra and the GeomDR tail can be taken from
    whichever is smaller: with a 10% subsample of a 2,800-example batch and d = 512 the N x N
    form is a 280 x 280 eigenproblem instead of 512 x 512. Symmetrizing removes the rounding
    asymmetry of the matmul, so eigvalsh (which reads one triangle) sees exactly what it sums.
    """
    n, d = zc.shape[-2], zc.shape[-1]
    g = zc @ zc.mT if n < d else zc.mT @ zc
    g = g / (n - 1)
    return (g + g.mT) / 2


def covariance(z: Tensor) -> Tensor:
    """Sample covariance ``C = Z~^T Z~ / (N - 1)`` of ``z`` (..., N, d) -> (..., d, d).

    Rows are samples, columns are features; centred on the per-batch-member mean.
    """
    zc = _centred(z)
    c = zc.mT @ zc / (z.shape[-2] - 1)
    return (c + c.mT) / 2


def covariance_spectrum(z: Tensor) -> Tensor:
    """Eigenvalues ``mu_1 >= ... >= mu_d`` of the covariance of ``z`` (..., N, d) -> (..., d).

    Clamped at 0: the covariance is positive semi-definite, and the tiny negative values an
    eigensolver returns for its null space are rounding, not signal. When N < d the spectrum
    is computed from the N x N Gram matrix (same nonzero eigenvalues, cheaper) and padded with
    the exact zeros of the null space.
    """
    zc = _centred(z)
    eigs = _robust_eigvalsh(_small_gram(zc)).flip(-1).clamp_min(0.0)
    pad = z.shape[-1] - eigs.shape[-1]
    if pad > 0:
        eigs = torch.cat([eigs, eigs.new_zeros(*eigs.shape[:-1], pad)], dim=-1)
    return eigs


def participation_ratio(eigs: Tensor) -> Tensor:
    """``(sum mu)^2 / sum mu^2`` over the last axis of ``eigs`` (..., d) -> (...,).

    Scale invariant; d for a flat spectrum, 1 for a single nonzero eigenvalue. The paper does
    not define the all-zero spectrum (a constant representation); we return 0 there, which
    reads as "collapsed" and keeps NaN out of the Parquet columns.
    """
    s1 = eigs.sum(dim=-1)
    s2 = eigs.square().sum(dim=-1)
    safe = torch.where(s2 > 0, s2, torch.ones_like(s2))
    return torch.where(s2 > 0, s1.square() / safe, torch.zeros_like(s1))


def effective_dimension(z: Tensor) -> Tensor:
    """D_eff of the representations ``z`` (..., N, d) -> (...,): the participation ratio of the
    covariance spectrum."""
    return participation_ratio(covariance_spectrum(z))


def knn_distance(z: Tensor, k: int) -> Tensor:
    """rho: mean Euclidean distance to the k nearest neighbours of the L2-normalized rows.

    ``z`` (..., N, d) -> (...,). Each row is divided by its norm (a zero row stays zero), the
    point itself is excluded from its neighbours, and the mean runs over the k neighbours and
    then over all N points. The paper is silent on the outer average; we use the plain mean
    over points. Needs ``1 <= k < N``.
    """
    n = z.shape[-2]
    if not 1 <= k < n:
        raise ValueError(f"knn_distance needs 1 <= k < N (got k={k}, N={n})")
    u = torch.nn.functional.normalize(z, dim=-1)
    flat = u.reshape(-1, n, z.shape[-1])
    # cdist switches to the matmul form for large N (fast; error ~1e-4 near distance 0 in
    # float32), which is immaterial for an average over k neighbours.
    dist = torch.cdist(flat, flat)
    self_mask = torch.eye(n, dtype=torch.bool, device=z.device)
    dist = dist.masked_fill(self_mask, math.inf)
    nearest = dist.topk(k, dim=-1, largest=False).values
    return nearest.mean(dim=(-2, -1)).reshape(z.shape[:-2])


def frequency_energy(w: Tensor) -> tuple[Tensor, Tensor]:
    """Fourier energy of an embedding per frequency, and whether it has any beyond rounding.

    ``w`` (..., p, d) is the token embedding restricted to the p operand tokens (drop the ``=``
    row before calling). The DFT runs along the vocabulary axis; the energy of frequency k is
    ``sum_d |W_hat[k]|^2 + |W_hat[p-k]|^2`` (a real embedding's k and p-k are one cosine/sine
    pair), for k = 1..p//2; k = 0 (the mean over tokens) is left out. Returns
    ``(energy (..., p//2), has (...,) bool)``: entry k-1 is frequency k; ``has`` is false when
    the non-mean energy is at rounding level (a constant embedding carries no signal: by
    Parseval the energy of all frequencies is p * sum w^2, and FFT rounding is ~eps of that).
    """
    p = w.shape[-2]
    n_freq = p // 2
    if n_freq < 1:
        raise ValueError(f"Fourier measures need p >= 2 rows, got {p}")
    w = w if w.is_floating_point() else w.float()
    spec = torch.fft.rfft(w, dim=-2)
    power = spec.abs().square().sum(dim=-1)[..., 1 : n_freq + 1]  # (..., p//2), k = 1..p//2
    # rfft keeps k only; its mirror p-k carries equal energy, except the Nyquist k = p/2.
    pair = torch.full((n_freq,), 2.0, dtype=power.dtype, device=power.device)
    if p % 2 == 0:
        pair[-1] = 1.0
    energy = power * pair
    floor = torch.finfo(power.dtype).eps * p * w.square().sum(dim=(-2, -1))
    return energy, energy.sum(dim=-1) > floor


def fourier_concentration(w: Tensor, top: int) -> tuple[Tensor, Tensor]:
    """Share of the embedding's Fourier energy in its ``top`` strongest frequencies.

    ``w`` (..., p, d): the operand rows of the embedding; energy per frequency k = 1..p//2 as
    in ``frequency_energy``. Returns ``(frac (...,), freqs (..., top) int64)``: the energy
    share of the strongest ``top`` frequencies, and those frequencies sorted by energy,
    strongest first.

    Paper 1 uses the FFT qualitatively; the scalar summary is our choice. ``top`` is capped at
    p//2 (there are no more frequencies). An embedding with no non-mean energy (beyond
    rounding) gives frac 0. The measure is meaningful for Z_p tasks only (token index = group
    element).
    """
    energy, has = frequency_energy(w)
    vals, idx = energy.topk(min(top, energy.shape[-1]), dim=-1)
    total = energy.sum(dim=-1)
    safe = torch.where(has, total, torch.ones_like(total))
    frac = torch.where(has, vals.sum(dim=-1) / safe, torch.zeros_like(total))
    return frac, (idx + 1).to(torch.int64)


def above_chance(frac: Tensor, top: int, p: int) -> Tensor:
    """A Fourier concentration ``frac`` rescaled so that chance is 0 and ``top`` pure
    frequencies are 1: ``(frac - c) / (1 - c)`` with ``c = top / (p // 2)``, the share of any
    ``top`` frequencies when the energy is spread evenly over the ``p // 2`` frequencies.

    The raw share has a floor of about ``c`` at random init (0.35 at p = 47, top 8), so raw
    values are not comparable across p. At random init (Gaussian, d_model 128) the rescaled
    value is 0.02-0.05, slightly above 0 because the ``top`` strongest of noisy energies exceed
    their even share; an embedding built from ``top`` frequencies gives 1. ``top`` >= p // 2
    leaves nothing to concentrate: NaN.
    """
    chance = min(top, p // 2) / max(p // 2, 1)
    if chance >= 1.0:
        return torch.full_like(frac, math.nan)
    return (frac - chance) / (1.0 - chance)


def _robust_eigh(g: Tensor) -> tuple[Tensor, Tensor]:
    """eigh that does not raise: LAPACK may fail to converge on a nearly degenerate Gram
    (seen in float32 once GeomDR squeezed the tail to ~0). Retry in float64; if that fails
    too, return NaN, which _TailVariance turns into "skip the penalty for this step"."""
    try:
        return torch.linalg.eigh(g)
    except torch.linalg.LinAlgError:
        pass
    try:
        evals, evecs = torch.linalg.eigh(g.double())
        return evals.to(g.dtype), evecs.to(g.dtype)
    except torch.linalg.LinAlgError:
        nan = torch.full_like(g, math.nan)
        return nan[..., 0], nan


def _robust_eigvalsh(g: Tensor) -> Tensor:
    """eigvalsh with the fallbacks of _robust_eigh (NaN when even float64 fails)."""
    try:
        return torch.linalg.eigvalsh(g)
    except torch.linalg.LinAlgError:
        return _robust_eigh(g)[0]


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
        evals, evecs = _robust_eigh(_small_gram(zc))  # ascending
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
        return _total_variance(_centred(z))
    tail = _tail_variance(z, target_dim, basis)
    if kind == "tail":
        return tail
    # tail_fraction. A constant representation (dead units) has total variance 0 and an empty
    # tail: 0/0 would be NaN and poison the weights. Clamping at the smallest normal float makes
    # it 0 (zero gradient) and leaves every representable nonzero variance untouched, so the
    # fraction stays scale-free.
    total = _total_variance(_centred(z))
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
        return _finite_or_axes(_robust_eigh(covariance(z))[1][..., -target_dim:])
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
        return _total_variance(_centred(z))
    if basis is not None:
        if basis.shape[-2:] != (d, target_dim):
            raise ValueError(f"basis must be (..., {d}, {target_dim}), got {tuple(basis.shape)}")
        given: Tensor = _TailOutsideBasis.apply(z, basis.detach().expand(*z.shape[:-2], d, -1))
        return given
    zc = _centred(z)
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
    top = _robust_eigvalsh(_small_gram(zc))[..., -target_dim:]
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
        low = _robust_eigvalsh(_small_gram(z64))[..., :-target_dim]  # ascending
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
