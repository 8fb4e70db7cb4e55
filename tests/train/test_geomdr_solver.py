"""geomdr.solver subspace: the warm-started top-d* subspace against the exact eigh, in value and
gradient, per member, with its state in the checkpoint."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_each_refuses, checkpoint_without, tiny_config
from typer.testing import CliRunner

from sweepgrok.cli import app
from sweepgrok.config.trial import ConfigError, GeomDRConfig, GeomDRPenalty, from_flat
from sweepgrok.store.sink import ListSink
from sweepgrok.train.geomdr import WarmSubspaces, geomdr_loss, geomdr_penalty, top_subspace
from sweepgrok.train.geometry import covariance_spectrum
from sweepgrok.train.trainer import CheckpointError, Trainer, train

F64 = torch.float64


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _cloud(spectrum: torch.Tensor, n: int, seed: int = 0, members: int = 1) -> torch.Tensor:
    """(members, n, d) Gaussian rows with covariance ~ R diag(spectrum) R^T, R random."""
    d = spectrum.shape[0]
    rot = torch.linalg.qr(torch.randn(members, d, d, generator=_gen(seed), dtype=F64)).Q
    white = torch.randn(members, n, d, generator=_gen(seed + 1), dtype=F64)
    return (white * spectrum.sqrt()) @ rot.mT


def _random_basis(members: int, d: int, k: int, seed: int = 5) -> torch.Tensor:
    return torch.linalg.qr(torch.randn(members, d, k, generator=_gen(seed), dtype=F64)).Q


def _exact_tail(z: torch.Tensor, k: int) -> torch.Tensor:
    return covariance_spectrum(z)[..., k:].sum(-1)


def _grad(z: torch.Tensor, k: int, kind: GeomDRPenalty, basis: torch.Tensor | None):
    z = z.clone().requires_grad_(True)
    value = geomdr_penalty(z, k, kind, basis)
    (value * torch.arange(1.0, value.numel() + 1, dtype=F64).view_as(value)).sum().backward()
    assert z.grad is not None
    return value.detach(), z.grad


# ---- the solver ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spectrum",
    [torch.cat([torch.full((4,), 4.0), torch.rand(20, generator=_gen(3), dtype=F64)]),
     1.0 / torch.arange(1, 25, dtype=F64)],  # random, and a power law (trained-like)
    ids=["random", "power-law"],
)
def test_warm_steps_from_a_random_basis_reach_the_exact_tail(spectrum):
    z = _cloud(spectrum, n=200, members=3)
    basis = _random_basis(3, 24, 4)
    exact = _exact_tail(z, 4)
    errors = []
    for _ in range(60):
        basis = top_subspace(z, 4, basis)
        warm = geomdr_penalty(z, 4, "tail", basis)
        # Ky Fan: no orthonormal basis holds more variance than the top eigenvectors.
        assert (warm >= exact - 1e-12).all()
        errors.append(((warm - exact) / exact).max().item())
    # Geometric convergence at the rate of the gap at the cut; the power law's is narrow
    # (mu_5 / mu_4 = 0.92 for one member), so 60 steps leave ~1e-7 there.
    assert errors[-1] < 1e-6
    assert errors[10] < errors[0] / 10  # it converges, not merely ends close


def test_one_warm_step_per_change_tracks_a_drifting_trained_like_spectrum():
    # Representations that drift a little every step, as weights do under AdamW; the spectrum
    # decays as a power law beyond a 4-dimensional top, as a trained layer's does.
    spectrum = torch.cat([torch.tensor([8.0, 6.0, 5.0, 4.0], dtype=F64),
                          1.0 / torch.arange(2, 30, dtype=F64)])
    z = _cloud(spectrum, n=300, members=2)
    drift = torch.randn(2, 32, 32, generator=_gen(9), dtype=F64) * 2e-3
    basis = top_subspace(z, 4)  # the first penalized step: exact
    torch.testing.assert_close(geomdr_penalty(z, 4, "tail", basis), _exact_tail(z, 4))
    for _ in range(50):
        z = z + z @ drift
        basis = top_subspace(z, 4, basis)
        exact = _exact_tail(z, 4)
        torch.testing.assert_close(geomdr_penalty(z, 4, "tail", basis), exact, rtol=1e-4, atol=0)


@pytest.mark.parametrize("kind", ["tail", "tail_fraction"])
@pytest.mark.parametrize(("n", "d"), [(40, 9), (6, 11)])  # d x d and N x N eigenproblems
def test_gradient_at_a_converged_subspace_equals_eighs(kind, n, d):
    z = torch.randn(3, n, d, generator=_gen(), dtype=F64)
    z[..., :3] *= 3.0  # a clear gap at the cut: converged to rounding in 100 steps
    basis = _random_basis(3, d, 3)
    for _ in range(100):
        basis = top_subspace(z, 3, basis)
    value, grad = _grad(z, 3, kind, basis)
    value_eigh, grad_eigh = _grad(z, 3, kind, None)
    torch.testing.assert_close(value, value_eigh, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(grad, grad_eigh, rtol=1e-8, atol=1e-10)


def test_cold_start_is_the_exact_eigenspace():
    z = torch.randn(2, 50, 8, generator=_gen(), dtype=F64)
    basis = top_subspace(z, 3)
    torch.testing.assert_close(basis.mT @ basis, torch.eye(3, dtype=F64).expand(2, 3, 3))
    torch.testing.assert_close(geomdr_penalty(z, 3, "tail", basis), geomdr_penalty(z, 3))


def test_members_are_refined_independently():
    z = torch.randn(3, 30, 10, generator=_gen(), dtype=F64)
    z[1] *= torch.linspace(0.1, 3.0, 10, dtype=F64)
    start = _random_basis(3, 10, 4)
    each = torch.stack([top_subspace(z[i], 4, start[i]) for i in range(3)])
    torch.testing.assert_close(top_subspace(z, 4, start), each)


def test_a_non_finite_basis_restarts_from_the_axes():
    z = torch.randn(2, 30, 6, generator=_gen(), dtype=F64)
    start = _random_basis(2, 6, 2)
    start[1] = torch.nan
    basis = top_subspace(z, 2, start)
    torch.testing.assert_close(basis[0], top_subspace(z[0], 2, start[0]))  # untouched
    assert torch.equal(basis[1], torch.eye(6, 2, dtype=F64))
    exact = top_subspace(z, 2)
    for _ in range(100):
        basis = top_subspace(z, 2, basis)
    torch.testing.assert_close(basis @ basis.mT, exact @ exact.mT)  # the same span again


def test_the_penalty_at_any_basis_is_the_plain_formula_with_autograd():
    # The written-out value and gradient (Z~ never formed) against trace(C) - trace(Q^T C Q)
    # through autograd, at a basis far from the eigenvectors and with a mean in the rows.
    z = torch.randn(2, 30, 7, generator=_gen(2), dtype=F64) + torch.linspace(-2, 3, 7, dtype=F64)
    basis = _random_basis(2, 7, 3)
    value, grad = _grad(z, 3, "tail", basis)
    plain = z.clone().requires_grad_(True)
    zc = plain - plain.mean(dim=-2, keepdim=True)
    c = zc.mT @ zc / (30 - 1)
    want = c.diagonal(dim1=-2, dim2=-1).sum(-1) - (basis.mT @ c @ basis).diagonal(
        dim1=-2, dim2=-1).sum(-1)
    (want * torch.tensor([1.0, 2.0], dtype=F64)).sum().backward()
    torch.testing.assert_close(value, want.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad, plain.grad, rtol=1e-10, atol=1e-12)


def test_the_penalty_at_a_basis_in_float32_keeps_float32_accuracy_with_a_mean():
    # Z~ is never formed: trace(C) = (||Z||^2 - N ||mean||^2) / (N-1) cancels in float32, by
    # about (1 + N ||mean||^2 / ||Z~||^2) times the error with Z~ formed. ReLU-like rows
    # (mean^2 / variance 0.5 per unit) against float64: 3.1e-6 here (2.0e-6 with Z~ formed),
    # within 1e-5; the gradient (which forms Z - mean per element) at float32 rounding.
    g = _gen(4)
    z64 = torch.randn(2, 2000, 64, generator=g, dtype=F64) + 0.7
    basis = _random_basis(2, 64, 4)
    v32, g32 = _grad(z64.float(), 4, "tail", basis.float())
    v64, g64 = _grad(z64, 4, "tail", basis)
    torch.testing.assert_close(v32.double(), v64, rtol=1e-5, atol=0)
    torch.testing.assert_close(g32.double(), g64, rtol=1e-4, atol=1e-8)


def test_a_basis_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match="basis must be"):
        geomdr_penalty(torch.randn(20, 6), 2, "tail", torch.zeros(6, 3))


# ---- the state the trainer keeps ----------------------------------------------------------


def test_warm_subspaces_keep_one_basis_per_layer_and_member():
    z = torch.randn(3, 40, 8, generator=_gen(), dtype=F64)
    cfg = GeomDRConfig(enabled=True, target_dim=2)
    warm = WarmSubspaces()
    first = geomdr_loss([z, 2 * z], cfg, warm=warm)
    torch.testing.assert_close(first, geomdr_loss([z, 2 * z], cfg))  # cold start: exact
    assert set(warm.bases) == {0, 1} and warm.bases[0].shape == (3, 8, 2)
    warm.select(torch.tensor([0, 2]))
    assert warm.bases[1].shape == (2, 8, 2)
    restored = WarmSubspaces()
    restored.load_state(warm.state())
    assert all(torch.equal(restored.bases[i], warm.bases[i]) for i in (0, 1))
    for bad in (None, {"bases": {0: [1.0]}}, {"bases": {"0": torch.zeros(1, 2, 1)}}):
        with pytest.raises(ValueError, match="not a GeomDR subspace state"):
            WarmSubspaces().load_state(bad)


def test_trace_and_empty_tails_need_no_basis():
    z = torch.randn(2, 6, 4, generator=_gen(), dtype=F64)
    warm = WarmSubspaces()
    for kind, k in (("trace", 2), ("tail", 0), ("tail", 5)):  # d* >= N - 1 = 5: empty tail
        cfg = GeomDRConfig(enabled=True, target_dim=k, penalty=kind)
        torch.testing.assert_close(geomdr_loss([z], cfg, warm=warm), geomdr_loss([z], cfg))
    assert warm.bases == {}


# ---- config key ---------------------------------------------------------------------------


def test_solver_key_is_checked_and_eigh_is_the_default():
    assert from_flat({}).geomdr.solver == "eigh"
    with pytest.raises(ConfigError) as err:
        from_flat({"geomdr.solver": "lobpcg"})
    assert "geomdr.solver: must be one of eigh, subspace, got 'lobpcg'" in str(err.value)


def test_bad_solver_in_a_trial_file_exits_2(tmp_path):
    path = tmp_path / "trial.yaml"
    path.write_text("geomdr: {solver: power}\n")
    assert_each_refuses(CliRunner(), app, [["validate", str(path)]], path,
                        ["geomdr.solver: must be one of eigh, subspace"])


# ---- the trainer --------------------------------------------------------------------------

TINY = tiny_config(
    {"task.p": 23, "model.arch": "mlp", "model.n_layers": 2, "train.max_steps": 20,
     "train.eval_every": 10, "train.stop_after_grok": False, "geometry.enabled": False,
     "train.threads": 1, "geomdr.enabled": True, "geomdr.start_step": 0, "geomdr.ramp_steps": 0,
     "geomdr.lambda_max": 0.1, "geomdr.target_dim": 4, "train.seeds": [0, 1]},
    # An MLP without geometry: neither key is read; device auto runs on a GPU where there is one.
    defaults=("model.n_heads", "geometry.sample", "train.device"),
)


def test_the_warm_penalty_follows_eigh_along_a_training_run():
    # Along a real (tiny) GeomDR run, one warm step per training step keeps the warm penalty at
    # the exact one of the same representations (the trained-like spectra of the trainer).
    trainer = Trainer(from_flat(TINY))
    cfg, warm = trainer.cfg.geomdr, WarmSubspaces()
    for step in range(1, 21):
        hidden: list[torch.Tensor] = []
        trainer.model(trainer.train_x, hidden=hidden)
        hidden = [h.detach() for h in hidden]
        tracked, exact = geomdr_loss(hidden, cfg, warm=warm), geomdr_loss(hidden, cfg)
        assert (tracked >= exact * (1 - 1e-5)).all()  # Ky Fan, up to float32 rounding
        torch.testing.assert_close(tracked, exact, rtol=2e-3, atol=0)
        trainer.step = step
        trainer._train_step(0.1)


def test_resume_without_the_subspace_state_is_refused(tmp_path):
    cfg = from_flat({**TINY, "geomdr.solver": "subspace"})
    removed = checkpoint_without(cfg, "geomdr_subspace", tmp_path, step=10)
    assert set(removed["bases"]) == {0, 1}
    with pytest.raises(CheckpointError, match="not a GeomDR subspace state"):
        train(cfg, ListSink(), resume_from=tmp_path)
