"""The logged GeomDR tail (evaluation: value only, no gradient) is a finite number >= 0.

Two failures seen on division mod 97 once GeomDR had squeezed the tail: float32 eigvalsh
returning NaN for a finite, nearly degenerate Gram, and ``trace - top-d* sum`` cancelling to
a slightly negative value. Inputs are built with known singular values, so the expected tails
are computed by hand.
"""

from __future__ import annotations

import math

import pytest
import torch

from sweepgrok.config.trial import GeomDRConfig
from sweepgrok.train import geomdr
from sweepgrok.train.evaluation import _geomdr_eval
from sweepgrok.train.geometry import small_gram

N, D, K = 301, 32, 4  # N - 1 = 300 divides the hand-computed tails evenly


def with_singular_values(s: list[float], seed: int = 0) -> torch.Tensor:
    """A float32 (N, D) matrix whose centred form has singular values `s` (len D) exactly in
    float64, plus an offset per column (the centring removes it)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(N, D, generator=g, dtype=torch.float64)
    u = torch.linalg.qr(a - a.mean(0)).Q  # orthonormal columns, each summing to 0
    v = torch.linalg.qr(torch.randn(D, D, generator=g, dtype=torch.float64)).Q
    z = u @ torch.diag(torch.tensor(s, dtype=torch.float64)) @ v.T
    return (z + torch.randn(D, generator=g, dtype=torch.float64)).float()


def tail(z: torch.Tensor, kind: str = "tail") -> torch.Tensor:
    with torch.no_grad():
        return geomdr.geomdr_penalty(z, K, kind)  # type: ignore[arg-type]


def test_a_tiny_tail_is_positive_and_accurate() -> None:
    """Top 4 singular values 100, the other 28 equal 0.003: tail = 28 x 0.003^2 / 300 =
    8.4e-7 (~6e-9 of the trace 4 x 10^4 / 300). The float32 formula logged before, trace -
    top sum, gives -1.5e-5 here (the seed is picked for it), as on division mod 97."""
    z = with_singular_values([100.0] * K + [0.003] * (D - K), seed=2)
    want = 28 * 0.003**2 / 300
    zc = z - z.mean(0)
    top = torch.linalg.eigvalsh(small_gram(zc))[-K:].sum()
    assert (geomdr._total_variance(zc) - top).item() < 0
    got = tail(z).item()
    assert got > 0 and math.isfinite(got)
    # The float32 entries of z move each small singular value by ~1e-6 x 100.
    assert got == pytest.approx(want, rel=1e-3)
    frac = tail(z, "tail_fraction").item()
    assert frac == pytest.approx(want / (4 * 1e4 / 300 + want), rel=1e-3)


def test_a_degenerate_covariance_gives_a_tail_of_zero() -> None:
    """Rank 2 (< d* = 4) with dead units: the tail is exactly 0 in exact arithmetic; a
    constant representation has no variance at all."""
    z = with_singular_values([5.0, 3.0] + [0.0] * (D - 2))
    z[:, :10] = 0.0  # dead units: the rank stays 2
    got = tail(z).item()
    assert 0.0 <= got <= 1e-10 * geomdr._total_variance(z - z.mean(0)).item()
    constant = torch.ones(N, D)
    assert tail(constant).item() == 0.0
    assert tail(constant, "tail_fraction").item() == 0.0


def test_a_nan_from_the_eigensolver_is_recomputed(monkeypatch: pytest.MonkeyPatch) -> None:
    """float32 LAPACK returning NaN for a finite Gram (as logged at three evaluations of seed
    1): the member's tail comes from float64 singular values instead. Tail = 28 x 1 / 300."""
    z = with_singular_values([100.0] * K + [1.0] * (D - K))
    eigvalsh = torch.linalg.eigvalsh

    def nan_in_float32(g: torch.Tensor) -> torch.Tensor:
        out = eigvalsh(g)
        return torch.full_like(out, math.nan) if g.dtype == torch.float32 else out

    monkeypatch.setattr(torch.linalg, "eigvalsh", nan_in_float32)
    assert tail(z).item() == pytest.approx(28 / 300, rel=1e-5)


def test_packed_members_recompute_only_those_that_need_it() -> None:
    """A well-spread member keeps the float32 formula's bits (its share of the trace is above
    TAIL_RECOMPUTE); a squeezed one beside it is recomputed."""
    spread = with_singular_values([float(D - j) for j in range(D)], seed=1)
    squeezed = with_singular_values([100.0] * K + [0.1] * (D - K), seed=2)
    got = tail(torch.stack([spread, squeezed]))
    zc = spread - spread.mean(0)
    old = geomdr._total_variance(zc) - torch.linalg.eigvalsh(small_gram(zc))[-K:].sum()
    assert got[0].item() == old.item()
    assert got[1].item() == pytest.approx(28 * 0.01 / 300, rel=1e-3)


def test_the_evaluation_logs_a_finite_tail_per_member(monkeypatch: pytest.MonkeyPatch) -> None:
    """evaluation's GeomDR column over two layers of two members, one layer squeezed and the
    eigensolver failing in float32: every value finite and >= 0, the sum of the layers."""
    layer0 = torch.stack(
        [with_singular_values([100.0] * K + [0.1] * (D - K), seed=s) for s in (3, 4)]
    )
    layer1 = torch.stack(
        [with_singular_values([10.0] * K + [1.0] * (D - K), seed=s) for s in (5, 6)]
    )
    eigvalsh = torch.linalg.eigvalsh
    monkeypatch.setattr(
        torch.linalg,
        "eigvalsh",
        lambda g: (
            torch.full_like(eigvalsh(g), math.nan) if g.dtype == torch.float32 else eigvalsh(g)
        ),
    )
    cfg = GeomDRConfig(enabled=True, target_dim=K)
    got = _geomdr_eval([layer0, layer1], cfg, torch.zeros(2))
    assert got.shape == (2,)
    assert got.tolist() == pytest.approx([28 * 0.01 / 300 + 28 / 300] * 2, rel=1e-3)
