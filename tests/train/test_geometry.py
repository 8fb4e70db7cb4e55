"""Geometry measurements (covariance spectra, D_eff, rho, Fourier shares) against
hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import diag_cov_data, random_rotation, torch_gen

from sweepgrok.train.geometry import (
    above_chance,
    covariance,
    covariance_spectrum,
    effective_dimension,
    fourier_concentration,
    knn_distance,
    participation_ratio,
)

# --- covariance and effective dimension -------------------------------------------------------


def test_covariance_matches_torch_cov() -> None:
    z = torch.randn(50, 6, generator=torch_gen(), dtype=torch.float64)
    torch.testing.assert_close(covariance(z), torch.cov(z.T))


def test_hand_built_covariance_is_diag_4321() -> None:
    z = diag_cov_data([4.0, 3.0, 2.0, 1.0])
    r = random_rotation(4)
    torch.testing.assert_close(
        r.T @ covariance(z) @ r, torch.diag(torch.tensor([4.0, 3, 2, 1]).double())
    )
    torch.testing.assert_close(covariance_spectrum(z), torch.tensor([4.0, 3, 2, 1]).double())


def test_participation_ratio_hand_values() -> None:
    assert participation_ratio(torch.tensor([5.0, 0.0, 0.0])).item() == pytest.approx(1.0)
    assert participation_ratio(torch.tensor([2.0, 2.0, 2.0, 2.0])).item() == pytest.approx(4.0)
    # (3+1)^2 / (9+1) = 1.6
    assert participation_ratio(torch.tensor([3.0, 1.0])).item() == pytest.approx(1.6)
    assert participation_ratio(torch.zeros(4)).item() == 0.0


def test_isotropic_gaussian_gives_about_d() -> None:
    d = 16
    z = torch.randn(4000, d, generator=torch_gen())
    deff = effective_dimension(z).item()
    # Upside-down PR (sum mu^2 / (sum mu)^2) would give ~1/d here.
    assert abs(deff - d) < 0.1 * d


def test_rank_one_cloud_gives_one() -> None:
    z = torch.randn(500, 1, generator=torch_gen()) * torch.randn(1, 16, generator=torch_gen(1))
    # Upside-down PR gives 1 here too: the isotropic test above is what tells them apart.
    assert effective_dimension(z).item() == pytest.approx(1.0, abs=1e-4)


def test_rank_k_cloud_gives_about_k() -> None:
    k, d = 3, 16
    basis = random_rotation(d)[:, :k].float()
    z = torch.randn(3000, k, generator=torch_gen()) @ basis.T
    assert abs(effective_dimension(z).item() - k) < 0.1 * k


def test_effective_dimension_is_scale_and_shift_invariant() -> None:
    z = torch.randn(300, 8, generator=torch_gen()) * torch.linspace(0.5, 2.0, 8)
    base = effective_dimension(z)
    torch.testing.assert_close(effective_dimension(7.5 * z + 3.0), base, rtol=1e-4, atol=0)


def test_spectrum_via_small_gram_when_n_below_d() -> None:
    z = torch.randn(10, 40, generator=torch_gen(), dtype=torch.float64)
    eigs = covariance_spectrum(z)
    assert eigs.shape == (40,)
    ref = torch.linalg.eigvalsh(covariance(z)).flip(-1).clamp_min(0)
    torch.testing.assert_close(eigs, ref, atol=1e-10, rtol=1e-8)
    assert (eigs[:-1] >= eigs[1:]).all()


# --- kNN distance ------------------------------------------------------------------------------


def test_knn_distance_on_unit_circle_by_hand() -> None:
    # Angles 0, 60, 180 degrees; chords 2 sin(delta/2): 0-60 = 1, 60-180 = sqrt(3), 0-180 = 2.
    # Radius 3: rho normalizes the rows first, so the radius must not matter.
    ang = torch.tensor([0.0, 60.0, 180.0], dtype=torch.float64).deg2rad()
    pts = 3.0 * torch.stack([ang.cos(), ang.sin()], dim=1)
    s3 = math.sqrt(3.0)
    # k=1: nearest of each point: 1, 1, sqrt(3).
    assert knn_distance(pts, 1).item() == pytest.approx((2 + s3) / 3)
    # k=2: means (1+2)/2, (1+s3)/2, (2+s3)/2 -> overall 1 + sqrt(3)/3.
    assert knn_distance(pts, 2).item() == pytest.approx(1 + s3 / 3)


def test_knn_distance_rejects_k_too_large() -> None:
    with pytest.raises(ValueError, match="k < N"):
        knn_distance(torch.randn(3, 2), 3)


# --- batched input equals per-member results ---------------------------------------------------


def test_batched_measurements_equal_per_member() -> None:
    zs = torch.randn(3, 64, 12, generator=torch_gen(), dtype=torch.float64)
    zs[1] *= torch.linspace(0.1, 3.0, 12, dtype=torch.float64)  # members differ in shape
    torch.testing.assert_close(
        effective_dimension(zs), torch.stack([effective_dimension(z) for z in zs])
    )
    torch.testing.assert_close(knn_distance(zs, 4), torch.stack([knn_distance(z, 4) for z in zs]))
    frac, freqs = fourier_concentration(zs[:, :31], 3)
    for i in range(3):
        f, q = fourier_concentration(zs[i, :31], 3)
        torch.testing.assert_close(frac[i], f)
        assert torch.equal(freqs[i], q)


# --- Fourier concentration ---------------------------------------------------------------------


def test_fourier_finds_planted_frequency() -> None:
    p, k = 97, 7
    x = torch.arange(p, dtype=torch.float64)
    phases = torch.rand(16, generator=torch_gen(), dtype=torch.float64) * 2 * math.pi
    amps = torch.rand(16, generator=torch_gen(1), dtype=torch.float64) + 0.5
    w = amps * torch.cos(2 * math.pi * k * x[:, None] / p + phases) + 5.0  # mean is ignored
    w = w + 0.01 * torch.randn(p, 16, generator=torch_gen(2), dtype=torch.float64)
    frac, freqs = fourier_concentration(w, 1)
    assert freqs.tolist() == [k]
    assert frac.item() > 0.99


def test_fourier_energy_shares_by_hand() -> None:
    # Amplitudes 2 at k=3 and 1 at k=5: energies 4:1, so the top frequency holds 4/5.
    p = 31
    x = torch.arange(p, dtype=torch.float64)
    w = torch.stack(
        [2 * torch.cos(2 * math.pi * 3 * x / p), torch.sin(2 * math.pi * 5 * x / p)], dim=1
    )
    frac, freqs = fourier_concentration(w, 1)
    assert frac.item() == pytest.approx(0.8)
    frac2, freqs2 = fourier_concentration(w, 2)
    assert freqs2.tolist() == [3, 5] and frac2.item() == pytest.approx(1.0)
    assert freqs.dtype == torch.int64


def test_fourier_nyquist_counts_once() -> None:
    # p = 8. Energies follow Parseval (p * sum of squares): cos(pi x) = +-1 has 8, all at the
    # Nyquist k = 4 (its own mirror); cos(2 pi x / 8) has 4, split between k = 1 and 7. So
    # k = 4 holds 2/3; counting the Nyquist twice would give 4/5.
    x = torch.arange(8, dtype=torch.float64)
    w = torch.stack([torch.cos(math.pi * x), torch.cos(2 * math.pi * x / 8)], dim=1)
    frac, freqs = fourier_concentration(w, 1)
    assert freqs.tolist() == [4]
    assert frac.item() == pytest.approx(2 / 3)


def test_fourier_constant_embedding_is_zero() -> None:
    frac, _ = fourier_concentration(torch.ones(11, 4), 2)
    assert frac.item() == 0.0


def test_fourier_above_chance_by_hand() -> None:
    # p = 47: 23 frequencies, top 8: chance share 8/23; a share of 8/23 -> 0, 1 -> 1.
    frac = torch.tensor([8 / 23, 1.0, (8 / 23 + 1) / 2])
    assert above_chance(frac, 8, 47).tolist() == pytest.approx([0.0, 1.0, 0.5])
    assert torch.isnan(above_chance(torch.tensor([1.0]), 3, 7)).all()  # 3 of 3: no chance left


def test_fourier_above_chance_is_near_zero_at_init_and_one_for_pure_frequencies() -> None:
    g = torch.Generator().manual_seed(0)
    for p in (47, 113):
        noise = torch.randn(64, p, 128, generator=g)
        frac, _ = fourier_concentration(noise, 8)
        assert 0.0 < above_chance(frac, 8, p).mean().item() < 0.08
        t = torch.arange(p, dtype=torch.float64)[:, None]
        freqs = torch.arange(1, 9, dtype=torch.float64)[None, :]
        pure = torch.cat([torch.cos(2 * math.pi * freqs * t / p)] * 4, dim=1)  # (p, 32)
        frac, _ = fourier_concentration(pure, 8)
        assert above_chance(frac, 8, p).item() == pytest.approx(1.0)
