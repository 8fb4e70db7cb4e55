"""The GeomDR penalty, its schedule and subsample against hand-computed values (the warm
solver: test_geomdr_solver.py; the evaluation's value: test_geomdr_tail_value.py)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import diag_cov_data, random_rotation, torch_gen

from sweepgrok.config.trial import GeomDRConfig, GeomDRPenalty
from sweepgrok.train.geomdr import (
    geomdr_lambda,
    geomdr_loss,
    geomdr_penalty,
    subsample_indices,
)
from sweepgrok.train.geometry import covariance, covariance_spectrum

# --- GeomDR penalty ----------------------------------------------------------------------------


def test_penalty_equals_tail_sum_of_diag_4321() -> None:
    z = diag_cov_data([4.0, 3.0, 2.0, 1.0])
    expected = {0: 10.0, 1: 6.0, 2: 3.0, 3: 1.0, 4: 0.0, 9: 0.0}
    for target, tail in expected.items():
        assert geomdr_penalty(z, target).item() == pytest.approx(tail, abs=1e-10)


def test_penalty_is_zero_when_rank_at_most_target() -> None:
    basis = random_rotation(10)[:, :3]
    z = torch.randn(200, 3, generator=torch_gen(), dtype=torch.float64) @ basis.T  # rank 3
    scale = covariance(z).trace().item()
    for target in (3, 4, 8):
        assert abs(geomdr_penalty(z, target).item()) < 1e-10 * scale
    assert geomdr_penalty(z, 2).item() > 0.01 * scale
    # N - 1 <= d*: a 5-sample covariance has rank <= 4, so d* = 4 leaves an empty tail.
    assert geomdr_penalty(torch.randn(5, 10, generator=torch_gen()), 4).item() == 0.0


@pytest.mark.parametrize(("n", "d"), [(12, 5), (5, 9)])  # d x d and N x N eigenproblems
def test_penalty_gradient_matches_finite_differences(n: int, d: int) -> None:
    z = torch.randn(2, n, d, generator=torch_gen(), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: geomdr_penalty(x, 2), (z,))


def _reference_penalty(z: torch.Tensor, target: int) -> torch.Tensor:
    """The plain path: tail of eigvalsh of the d x d covariance, autograd all the way."""
    eigs = torch.linalg.eigvalsh(covariance(z))  # ascending
    return eigs[..., : z.shape[-1] - target].sum(-1)


@pytest.mark.parametrize(("n", "d"), [(40, 9), (6, 11)])
def test_penalty_fast_backward_equals_plain_autograd(n: int, d: int) -> None:
    z0 = torch.randn(3, n, d, generator=torch_gen(), dtype=torch.float64)
    weights = torch.tensor([1.0, -0.5, 2.0], dtype=torch.float64)
    grads = []
    for fn in (geomdr_penalty, _reference_penalty):
        z = z0.clone().requires_grad_(True)
        value = fn(z, 3)
        (value * weights).sum().backward()
        grads.append((value.detach(), z.grad))
    torch.testing.assert_close(grads[0][0], grads[1][0])
    torch.testing.assert_close(grads[0][1], grads[1][1])
    with torch.no_grad():  # the value-only path (evaluation) agrees too
        torch.testing.assert_close(geomdr_penalty(z0, 3), grads[1][0])


def _grad(z: torch.Tensor, target: int) -> torch.Tensor:
    z = z.clone().requires_grad_(True)
    geomdr_penalty(z, target).sum().backward()
    assert z.grad is not None
    return z.grad


def test_penalty_gradient_finite_for_repeated_and_zero_eigenvalues() -> None:
    x = torch.randn(20, 4, generator=torch_gen())
    dup = torch.cat([x, x, torch.zeros(20, 3)], dim=1)  # repeated columns and a null space
    iso = diag_cov_data([1.0] * 7).float()  # all eigenvalues equal: a tie across every cut
    for z in (dup, iso, torch.zeros(6, 5), torch.ones(6, 5)):
        for target in (0, 1, 2, 3):
            assert torch.isfinite(geomdr_penalty(z, target)).all()
            assert torch.isfinite(_grad(z, target)).all()
    # At the isotropic tie the value is still the tail sum: 7 - 2 equal eigenvalues of 1.
    assert geomdr_penalty(iso, 2).item() == pytest.approx(5.0, abs=1e-5)


def test_penalty_gradient_descends_the_tail() -> None:
    # One small step against the gradient shrinks the tail (the penalty does what it says).
    z = torch.randn(40, 6, generator=torch_gen(), dtype=torch.float64)
    g = _grad(z, 2)
    assert geomdr_penalty(z - 1e-2 * g, 2).item() < geomdr_penalty(z, 2).item()


def test_batched_penalty_equals_per_member() -> None:
    zs = torch.randn(3, 64, 12, generator=torch_gen(), dtype=torch.float64)
    zs[1] *= torch.linspace(0.1, 3.0, 12, dtype=torch.float64)  # members differ in shape
    torch.testing.assert_close(
        geomdr_penalty(zs, 5), torch.stack([geomdr_penalty(z, 5) for z in zs])
    )


# --- GeomDR penalty kinds: tail, tail_fraction, trace -----------------------------------------


def _axis_cloud(offset: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> torch.Tensor:
    """Six points +-e1, +-2 e2, +-3 e3 (plus an offset): Z~^T Z~ = diag(2, 8, 18), N - 1 = 5,
    so the covariance is diag(0.4, 1.6, 3.6) by hand: trace 5.6."""
    rows = [[1, 0, 0], [-1, 0, 0], [0, 2, 0], [0, -2, 0], [0, 0, 3], [0, 0, -3]]
    return torch.tensor(rows, dtype=torch.float64) + torch.tensor(offset, dtype=torch.float64)


@pytest.mark.parametrize("offset", [(0.0, 0.0, 0.0), (5.0, -1.0, 2.0)])
def test_penalty_kinds_by_hand_on_an_axis_cloud(offset: tuple[float, float, float]) -> None:
    z = _axis_cloud(offset)  # mu = 3.6, 1.6, 0.4
    expected: dict[GeomDRPenalty, dict[int, float]] = {
        "tail": {0: 5.6, 1: 2.0, 2: 0.4, 3: 0.0},
        "tail_fraction": {0: 1.0, 1: 2.0 / 5.6, 2: 0.4 / 5.6, 3: 0.0},
        "trace": {0: 5.6, 1: 5.6, 2: 5.6, 3: 5.6, 50: 5.6},  # d* is ignored
    }
    for kind, by_target in expected.items():
        for target, value in by_target.items():
            for grad in (False, True):  # the value-only and the training path
                got = geomdr_penalty(z.clone().requires_grad_(grad), target, kind)
                assert got.item() == pytest.approx(value, abs=1e-12), (kind, target, grad)


def test_penalty_kinds_on_a_2d_cloud_by_hand() -> None:
    # The corners of a 2 x 2 square: variance (4 * 1^2) / 3 = 4/3 on each axis, no covariance.
    z = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]], dtype=torch.float64)
    assert geomdr_penalty(z, 1, "tail").item() == pytest.approx(4 / 3)
    assert geomdr_penalty(z, 1, "tail_fraction").item() == pytest.approx(0.5)
    assert geomdr_penalty(z, 1, "trace").item() == pytest.approx(8 / 3)


def test_tail_is_the_default_and_unchanged() -> None:
    z = torch.randn(3, 40, 9, generator=torch_gen(), dtype=torch.float64)
    for target in (0, 3, 9):
        assert torch.equal(geomdr_penalty(z, target), geomdr_penalty(z, target, "tail"))
        torch.testing.assert_close(geomdr_penalty(z, target), _reference_penalty(z, target))
    assert GeomDRConfig().penalty == "tail"


def test_trace_equals_the_eigenvalue_sum() -> None:
    # trace is computed as ||Z~||_F^2 / (N - 1), without an eigensolver: the same number.
    for n, d in ((40, 9), (6, 11)):
        z = torch.randn(2, n, d, generator=torch_gen(n), dtype=torch.float64)
        torch.testing.assert_close(
            geomdr_penalty(z, 3, "trace"), covariance_spectrum(z).sum(-1), rtol=1e-12, atol=0
        )


def test_tail_fraction_is_scale_free_and_tail_and_trace_scale_with_the_square() -> None:
    z = torch.randn(50, 8, generator=torch_gen(), dtype=torch.float64)
    factors: dict[GeomDRPenalty, float] = {"tail_fraction": 1.0, "tail": 100.0, "trace": 100.0}
    for kind, factor in factors.items():
        small, big = geomdr_penalty(z, 3, kind), geomdr_penalty(10 * z, 3, kind)
        assert small.item() > 0
        torch.testing.assert_close(big, factor * small, rtol=1e-10, atol=0)


def test_tail_fraction_of_a_constant_representation_is_zero_with_a_zero_gradient() -> None:
    z = torch.full((6, 4), 3.0, dtype=torch.float64, requires_grad=True)
    value = geomdr_penalty(z, 1, "tail_fraction")
    value.backward()
    assert value.item() == 0.0 and z.grad is not None and (z.grad == 0).all()


@pytest.mark.parametrize("kind", ["tail_fraction", "trace"])
@pytest.mark.parametrize(("n", "d"), [(12, 5), (5, 9)])
def test_control_gradients_match_finite_differences(kind: GeomDRPenalty, n: int, d: int) -> None:
    z = torch.randn(2, n, d, generator=torch_gen(), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: geomdr_penalty(x, 2, kind), (z,))


@pytest.mark.parametrize("kind", ["tail", "tail_fraction", "trace"])
def test_penalty_kinds_are_per_member(kind: GeomDRPenalty) -> None:
    zs = torch.randn(3, 30, 10, generator=torch_gen(), dtype=torch.float64)
    zs[1] *= torch.linspace(0.1, 3.0, 10, dtype=torch.float64)  # members differ in shape
    zs[2] *= 10.0  # and in scale
    each = torch.stack([geomdr_penalty(z, 4, kind) for z in zs])
    torch.testing.assert_close(geomdr_penalty(zs, 4, kind), each)
    # geomdr_loss (the training loss and the logged geomdr_loss column) sums the chosen kind
    # over the layers: a second layer 2 * zs adds the same fraction, or 4x the tail / trace.
    cfg = GeomDRConfig(enabled=True, target_dim=4, penalty=kind)
    second = 1.0 if kind == "tail_fraction" else 4.0
    torch.testing.assert_close(geomdr_loss([zs, 2 * zs], cfg), each * (1 + second))


def test_penalty_rejects_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="tail_fraction"):
        geomdr_penalty(torch.randn(5, 3), 1, "fraction")  # type: ignore[arg-type]


# --- schedule ----------------------------------------------------------------------------------


def test_lambda_schedule() -> None:
    cfg = GeomDRConfig(enabled=True, start_step=2000, lambda_max=0.4, ramp_steps=1000)
    assert geomdr_lambda(0, cfg) == 0.0
    assert geomdr_lambda(1999, cfg) == 0.0
    assert geomdr_lambda(2000, cfg) == pytest.approx(0.0)
    assert geomdr_lambda(2500, cfg) == pytest.approx(0.2)
    assert geomdr_lambda(2250, cfg) == pytest.approx(0.4 * (1 - math.cos(math.pi / 4)) / 2)
    assert geomdr_lambda(3000, cfg) == pytest.approx(0.4)
    assert geomdr_lambda(90_000, cfg) == pytest.approx(0.4)


def test_lambda_step_ramp_and_disabled() -> None:
    step = GeomDRConfig(enabled=True, start_step=10, lambda_max=0.3, ramp_steps=0)
    assert geomdr_lambda(9, step) == 0.0
    assert geomdr_lambda(10, step) == pytest.approx(0.3)
    off = GeomDRConfig(enabled=False, start_step=0, lambda_max=0.3, ramp_steps=0)
    assert geomdr_lambda(100, off) == 0.0


# --- subsample ---------------------------------------------------------------------------------


def test_subsample_indices() -> None:
    assert subsample_indices(100, 1.0, torch_gen(), "cpu") is None
    a = subsample_indices(2800, 0.1, torch_gen(3), "cpu")
    b = subsample_indices(2800, 0.1, torch_gen(3), "cpu")
    assert a is not None and b is not None
    assert torch.equal(a, b)  # reproducible from the generator's seed
    assert a.shape == (280,) and a.dtype == torch.int64
    assert a.unique().numel() == 280 and a.min() >= 0 and a.max() < 2800
    g = torch_gen(3)
    first, second = subsample_indices(2800, 0.1, g, "cpu"), subsample_indices(2800, 0.1, g, "cpu")
    assert first is not None and second is not None and not torch.equal(first, second)
    tiny = subsample_indices(10, 0.01, torch_gen(), "cpu")
    assert tiny is not None and tiny.numel() == 2  # a covariance needs 2 rows



def test_geomdr_penalty_skips_a_member_whose_eigensolver_returns_nan(monkeypatch):
    # float32 LAPACK eigh returned NaN on a finite, nearly degenerate Gram in a real run
    # (d* 64 of 256, tail ~1e-5): that member must skip the step, the others must not notice.
    z = torch.randn(3, 40, 6, dtype=torch.float64, requires_grad=True)
    want = geomdr_penalty(z.detach().clone().requires_grad_(True), 2)
    real = torch.linalg.eigh

    def flaky(a):
        evals, evecs = real(a)
        evals, evecs = evals.clone(), evecs.clone()
        evals[1, -1] = float("nan")
        evecs[1, 0, -1] = float("nan")
        return evals, evecs

    monkeypatch.setattr(torch.linalg, "eigh", flaky)
    got = geomdr_penalty(z, 2)
    got.sum().backward()
    assert got[1] == 0 and torch.allclose(got[[0, 2]], want[[0, 2]])
    assert torch.isfinite(z.grad).all() and (z.grad[1] == 0).all() and (z.grad[0] != 0).any()


def test_geomdr_penalty_survives_an_eigensolver_that_raises(monkeypatch):
    z = torch.randn(2, 30, 5, requires_grad=True)
    want = geomdr_penalty(z.detach().double().requires_grad_(True), 2).float()
    real = torch.linalg.eigh
    calls = []

    def fails_in_float32(a):
        calls.append(a.dtype)
        if a.dtype == torch.float32:
            raise torch.linalg.LinAlgError("failed to converge")
        return real(a)

    monkeypatch.setattr(torch.linalg, "eigh", fails_in_float32)
    got = geomdr_penalty(z, 2)
    got.sum().backward()
    assert calls == [torch.float32, torch.float64]  # retried in float64
    assert torch.allclose(got, want, atol=1e-4) and torch.isfinite(z.grad).all()

    def always_fails(a):
        raise torch.linalg.LinAlgError("failed to converge")

    monkeypatch.setattr(torch.linalg, "eigh", always_fails)
    z.grad = None
    got = geomdr_penalty(z, 2)
    got.sum().backward()
    assert (got == 0).all() and (z.grad == 0).all()  # skipped this step, no crash
