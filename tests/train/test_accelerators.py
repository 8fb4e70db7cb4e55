"""The accelerators' math against hand computations (StableMax loss, perpendicular gradient,
Grokfast EMA and MA), per member; their config keys; the filter state through a checkpoint."""

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_each_refuses, checkpoint_without, tiny_config
from typer.testing import CliRunner

from sweepgrok.cli import app
from sweepgrok.config.trial import ConfigError, GrokfastConfig, from_flat
from sweepgrok.store.sink import ListSink
from sweepgrok.train.accelerators import (
    GradFilter,
    log_stablemax,
    per_example_loss,
    perpendicular_grad_,
)
from sweepgrok.train.trainer import CheckpointError, train

# ---- StableMax ------------------------------------------------------------------------------


def test_stablemax_loss_by_hand():
    # s([0, 1, -1]) = [1, 2, 1/2], sum 3.5: p = [2/7, 4/7, 1/7].
    z = torch.tensor([[[0.0, 1.0, -1.0]] * 3], requires_grad=True)  # (E=1, N=3, C=3)
    y = torch.tensor([[0, 1, 2]])
    loss = per_example_loss(z, y, "stablemax")
    assert loss[0].tolist() == pytest.approx([math.log(3.5), math.log(1.75), math.log(7.0)])
    # d/dz_j of -log p_0 = s'(z_j) / 3.5 - [j = 0] s'(z_0) / s(z_0); s' = 1 for x >= 0 (also at
    # 0: both sides agree) and 1 / (1 - x)^2 = 1/4 at -1.
    loss[0, 0].backward()
    assert z.grad is not None
    assert z.grad[0, 0].tolist() == pytest.approx([1 / 3.5 - 1, 1 / 3.5, 0.25 / 3.5])


def test_stablemax_stays_finite_where_softmax_collapses():
    z = torch.tensor([[[-1e30, 0.0, 60.0, 1e30]]], requires_grad=True)
    y = torch.tensor([[2]])
    # float32 softmax rounds p to exactly 1: the loss (and every gradient) is exactly 0.
    assert F.cross_entropy(z[0].detach()[:, :3], y[0]).item() == 0.0
    stable = per_example_loss(z, y, "stablemax")
    stable.sum().backward()
    assert z.grad is not None
    assert torch.isfinite(stable).all() and torch.isfinite(z.grad).all()
    assert stable.item() == pytest.approx(math.log((1e30 + 1) / 61), rel=1e-5)
    assert log_stablemax(torch.tensor([-3.0, 3.0])).exp().sum().item() == pytest.approx(1.0)


def test_cross_entropy_is_the_default_loss():
    z, y = torch.randn(2, 5, 7), torch.randint(0, 7, (2, 5))
    want = torch.stack([F.cross_entropy(z[e], y[e], reduction="none") for e in range(2)])
    assert torch.equal(per_example_loss(z, y, "cross_entropy"), want)
    assert from_flat({}).optim.loss == "cross_entropy"


# ---- perpendicular gradient ----------------------------------------------------------------


def _param(w, g) -> torch.nn.Parameter:
    p = torch.nn.Parameter(torch.tensor(w))
    p.grad = torch.tensor(g)
    return p


def test_perpendicular_grad_by_hand_per_member():
    # Member 0: w = [[1, 0], [1, 1]], ||w||^2 = 3; g = [[2, 0], [0, 1]], g.w = 3: g - 1 * w.
    # Member 1: w = 0 (a bias at init): g stays.
    p = _param([[[1.0, 0.0], [1.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]]],
               [[[2.0, 0.0], [0.0, 1.0]], [[5.0, -1.0], [2.0, 3.0]]])
    perpendicular_grad_([p])
    assert p.grad is not None
    assert p.grad.tolist() == [[[1.0, 0.0], [-1.0, 0.0]], [[5.0, -1.0], [2.0, 3.0]]]
    assert (p.grad[0] * p[0]).sum().item() == 0.0  # perpendicular to the member's weights


def test_perpendicular_grad_members_do_not_mix():
    torch.manual_seed(0)
    w, g = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    both = _param(w.tolist(), g.tolist())
    alone = _param(w[:1].tolist(), g[:1].tolist())
    other = _param([w[0].tolist(), (w[1] * 7).tolist()], [g[0].tolist(), (-g[1]).tolist()])
    for p in (both, alone, other):
        perpendicular_grad_([p])
    assert both.grad is not None and alone.grad is not None and other.grad is not None
    assert torch.allclose(both.grad[0], alone.grad[0], atol=1e-6)
    assert torch.allclose(other.grad[0], alone.grad[0], atol=1e-6)


# ---- Grokfast ------------------------------------------------------------------------------


def _run(filt: GradFilter, grads: list[list[list[float]]]) -> list[list[list[float]]]:
    """Feed one (E, 2) gradient per step through the filter; the filtered gradients."""
    p = torch.nn.Parameter(torch.zeros(len(grads[0]), 2))
    out = []
    for g in grads:
        p.grad = torch.tensor(g)
        filt.apply_([p])
        out.append(p.grad.tolist())
    return out


def _filter(**kw) -> GradFilter:
    return GradFilter(GrokfastConfig(**kw))


def test_grokfast_ema_two_steps_by_hand():
    # h1 = g1 = [1, 2] -> g1 + 2 h1 = [3, 6]; h2 = 0.5 h1 + 0.5 [3, 0] = [2, 1] -> [7, 2].
    got = _run(_filter(kind="ema", alpha=0.5, lam=2.0), [[[1.0, 2.0]], [[3.0, 0.0]]])
    assert got == [[[3.0, 6.0]], [[7.0, 2.0]]]


def test_grokfast_ma_waits_for_a_full_window():
    # window 2, lam 1: step 1 unchanged; then g + mean of the last two raw gradients.
    got = _run(_filter(kind="ma", window=2, lam=1.0),
               [[[1.0, 2.0]], [[3.0, 4.0]], [[5.0, 6.0]]])
    assert got == [[[1.0, 2.0]], [[5.0, 7.0]], [[9.0, 11.0]]]


def test_grokfast_none_leaves_gradients():
    assert _run(_filter(), [[[1.0, 2.0]], [[3.0, 4.0]]]) == [[[1.0, 2.0]], [[3.0, 4.0]]]


@pytest.mark.parametrize("kind", ["ema", "ma"])
def test_grokfast_members_do_not_mix(kind):
    torch.manual_seed(1)
    g = torch.randn(5, 2, 2)  # 5 steps, E = 2
    both = _run(_filter(kind=kind, window=3), g.tolist())
    alone = _run(_filter(kind=kind, window=3), g[:, :1].tolist())
    other = _run(_filter(kind=kind, window=3), torch.stack([g[:, 0], 9 * g[:, 1]], 1).tolist())
    assert [s[0] for s in both] == [s[0] for s in alone] == [s[0] for s in other]


@pytest.mark.parametrize("kind", ["ema", "ma"])
def test_grokfast_compaction_and_state_round_trip(kind, tmp_path):
    torch.manual_seed(2)
    g = torch.randn(6, 2, 2)
    whole = _run(_filter(kind=kind, window=3), g[:, 1:].tolist())  # member 1 alone
    filt = _filter(kind=kind, window=3)
    _run(filt, g[:3].tolist())
    filt.select(torch.tensor([1]))  # member 0 ended
    torch.save(filt.state(), tmp_path / "f.pt")
    resumed = _filter(kind=kind, window=3)
    resumed.load_state(torch.load(tmp_path / "f.pt", weights_only=True))
    assert _run(resumed, g[3:, 1:].tolist()) == whole[3:]


def test_grokfast_skips_parameters_without_gradient():
    filt = _filter(kind="ema")
    unused = torch.nn.Parameter(torch.ones(1, 2))
    filt.apply_([unused])
    assert unused.grad is None and filt.slow == {} and filt.seen == 1


# ---- config keys ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flat", "message"),
    [({"grokfast.kind": "sma"}, "grokfast.kind: must be one of none, ema, ma, got 'sma'"),
     ({"optim.loss": "mse"}, "optim.loss: must be one of cross_entropy, stablemax, got 'mse'"),
     ({"grokfast.alpha": 1.0}, "grokfast.alpha: must be < 1, got 1.0"),
     ({"grokfast.alpha": -0.1}, "grokfast.alpha: must be >= 0, got -0.1"),
     ({"grokfast.lam": -1.0}, "grokfast.lam: must be >= 0, got -1.0"),
     ({"grokfast.lam": 1e4}, "grokfast.lam: must be <= 1000, got 10000.0"),
     ({"grokfast.window": 0}, "grokfast.window: must be >= 1, got 0"),
     ({"grokfast.window": 1001}, "grokfast.window: must be <= 1000, got 1001"),
     ({"optim.perpendicular_grad": 1}, "optim.perpendicular_grad: must be true or false, got 1"),
     ({"grokfast.lamda": 1.0}, "allowed keys in 'grokfast' are kind, alpha, lam, window")],
)
def test_bad_accelerator_keys_are_named(flat, message):
    with pytest.raises(ConfigError) as err:
        from_flat(flat)
    assert message in str(err.value)


def test_bad_kind_in_a_trial_file_exits_2(tmp_path):
    path = tmp_path / "trial.yaml"
    path.write_text("grokfast: {kind: fast}\n")
    assert_each_refuses(CliRunner(), app, [["validate", str(path)]], path,
                        ["grokfast.kind: must be one of none, ema, ma"])


def test_defaults_are_off():
    cfg = from_flat({})
    assert cfg.grokfast.kind == "none" and not cfg.optim.perpendicular_grad


# ---- the trainer ---------------------------------------------------------------------------

TINY = tiny_config(
    {"task.p": 11, "train.max_steps": 10, "train.eval_every": 5, "train.stop_after_grok": False,
     "geometry.enabled": False, "train.threads": 1},
    # Without geometry the sample is not read; device auto runs on a GPU where there is one.
    defaults=("geometry.sample", "train.device"),
)


def test_each_accelerator_changes_the_trajectory():
    def final_loss(**kw):
        sink = ListSink()
        train(from_flat({**TINY, **kw}), sink)
        return sink.metrics[-1]["train_loss"]

    base = final_loss()
    for kw in ({"grokfast.kind": "ema"}, {"grokfast.kind": "ma", "grokfast.window": 5},
               {"optim.loss": "stablemax"}, {"optim.perpendicular_grad": True}):
        assert final_loss(**kw) != base, kw


def test_resume_without_the_filter_state_is_refused(tmp_path):
    cfg = from_flat({**TINY, "grokfast.kind": "ema"})
    checkpoint_without(cfg, "grokfast", tmp_path, step=5)
    with pytest.raises(CheckpointError, match="not a Grokfast filter state"):
        train(cfg, ListSink(), resume_from=tmp_path)
