"""Pure measurements of representation geometry: covariance spectra, D_eff, rho, Fourier shares.

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
- Collapse onset: first evaluation where D_eff falls below a stated fraction of its running max.

The GeomDR regularizer built on these spectra is ``sweepgrok.train.geomdr``. Where the paper is
silent, the choices made here are written in each function's docstring.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "above_chance",
    "centred",
    "covariance",
    "covariance_spectrum",
    "effective_dimension",
    "fourier_concentration",
    "frequency_energy",
    "knn_distance",
    "participation_ratio",
    "robust_eigh",
    "robust_eigvalsh",
    "small_gram",
]


def centred(z: Tensor) -> Tensor:
    """``z - mean`` over the sample axis (-2); needs at least two samples for ``/(N-1)``."""
    if z.dim() < 2:
        raise ValueError(f"expected z of shape (..., N, d), got {tuple(z.shape)}")
    if z.shape[-2] < 2:
        raise ValueError(f"need at least 2 samples to estimate a covariance, got N={z.shape[-2]}")
    return z - z.mean(dim=-2, keepdim=True)


def small_gram(zc: Tensor) -> Tensor:
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
    zc = centred(z)
    c = zc.mT @ zc / (z.shape[-2] - 1)
    return (c + c.mT) / 2


def covariance_spectrum(z: Tensor) -> Tensor:
    """Eigenvalues ``mu_1 >= ... >= mu_d`` of the covariance of ``z`` (..., N, d) -> (..., d).

    Clamped at 0: the covariance is positive semi-definite, and the tiny negative values an
    eigensolver returns for its null space are rounding, not signal. When N < d the spectrum
    is computed from the N x N Gram matrix (same nonzero eigenvalues, cheaper) and padded with
    the exact zeros of the null space.
    """
    zc = centred(z)
    eigs = robust_eigvalsh(small_gram(zc)).flip(-1).clamp_min(0.0)
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


def robust_eigh(g: Tensor) -> tuple[Tensor, Tensor]:
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


def robust_eigvalsh(g: Tensor) -> Tensor:
    """eigvalsh with the fallbacks of robust_eigh (NaN when even float64 fails)."""
    try:
        return torch.linalg.eigvalsh(g)
    except torch.linalg.LinAlgError:
        return robust_eigh(g)[0]
