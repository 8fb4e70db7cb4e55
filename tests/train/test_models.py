"""Models: hand-counted parameters, norms at all three points, uniform attention, cosine bound."""

import typing

import pytest
import torch
from conftest import tiny_config

from sweepgrok.config.tasks import make_split
from sweepgrok.config.trial import NormName, from_flat
from sweepgrok.train.models import Norm, build_model, gather_rows, gather_rows_one_hot, n_params

P1 = tiny_config({"task.p": 113, "model.d_model": 128, "model.n_heads": 4, "model.d_mlp": 512})
"""Paper 1's model sizes."""
SMALL = tiny_config({"task.p": 11})


# W_E 114*128 + W_pos 3*128 + QKVO 4*128^2 + MLP (128*512+512+512*128+128) + W_U 128*113
P1_PARAMS = 14592 + 384 + 65536 + 131712 + 14464
P1_NORM_PARAMS = {"none": 0, "sphere": 0, "rmsnorm": 3 * 128, "layernorm": 3 * 256}
"""Each norm's own parameters in paper 1's model: 3 gains (rmsnorm), 3 gains and biases."""


@pytest.mark.parametrize("norm", typing.get_args(NormName))
def test_paper1_parameter_counts(norm):
    model = build_model(from_flat({**P1, "model.norm": norm}), seeds=[0, 1])
    count = P1_PARAMS + P1_NORM_PARAMS[norm]  # a norm without its count here fails
    assert n_params(model) == count


def test_mlp_parameter_count():
    cfg = from_flat(tiny_config({"task.p": 97, "model.arch": "mlp", "model.d_model": 128,
                                 "model.d_mlp": 512, "model.n_layers": 2}))
    # W_E 97*128 + (256*512 + 512) + (512*512 + 512) + (512*97 + 97)
    assert n_params(build_model(cfg)) == 12416 + 131584 + 262656 + 49761


def _batch(cfg, e):
    split = make_split(cfg.task, 0)
    return split.train_x[:64].expand(e, -1, -1)


def test_member_init_depends_only_on_its_seed():
    cfg = from_flat(SMALL)
    joint, alone = build_model(cfg, [3, 5]), build_model(cfg, [5])
    for (name, a), b in zip(joint.named_parameters(), alone.parameters(), strict=True):
        assert torch.equal(a[1], b[0]), name
    x = _batch(cfg, 2)
    assert torch.allclose(joint(x)[1], alone(x[1:])[0], atol=1e-6)


@pytest.mark.parametrize("layers", [1, 2])
def test_sphere_stream_has_unit_norm_at_all_three_points(layers):
    cfg = from_flat({**SMALL, "model.norm": "sphere", "model.n_layers": layers})
    model = build_model(cfg, [0, 1])
    outs = []
    for mod in model.modules():
        if isinstance(mod, Norm):
            mod.register_forward_hook(lambda _m, _i, out: outs.append(out))
    for fast in (True, False):
        outs.clear()
        model(_batch(cfg, 2), fast=fast)
        assert len(outs) == 1 + 2 * layers  # after embed, after attn, after mlp (per block)
        for out in outs:
            assert torch.allclose(out.norm(dim=-1), torch.ones(()), atol=1e-5)


def test_cosine_logits_bounded_by_tau():
    cfg = from_flat({**SMALL, "model.norm": "sphere", "model.temperature": 10.0})
    logits = build_model(cfg, [0])(_batch(cfg, 1))
    assert logits.abs().max() <= 10.0 + 1e-4 and logits.abs().max() > 1.0
    assert cfg.model.unembed_resolved == "cosine"


def test_uniform_attention_weights_are_one_third():
    cfg = from_flat({**SMALL, "model.attention": "uniform", "model.norm": "layernorm"})
    model = build_model(cfg, [0])
    x = _batch(cfg, 1)
    # Plain path, by hand: every query averages the values of the 3 positions with weight 1/3.
    block = model.blocks[0]
    h = model.norm_embed(model.w_e[0][x[0]] + model.w_pos[0]).unsqueeze(0)
    v = h @ block.w_v[0]
    by_hand = (v.sum(dim=2, keepdim=True) / 3) @ block.w_o[0]
    assert torch.allclose(block.attention(h, last_only=False), by_hand.expand_as(h), atol=1e-5)
    # Scores are never computed: the queries and keys do not matter.
    before = model(x)
    with torch.no_grad():
        block.w_q.normal_()
        block.w_k.normal_()
    assert torch.equal(before, model(x))


def test_unknown_norm_kind_raises_instead_of_falling_back():
    with pytest.raises(ValueError, match=r"unknown norm 'batchnorm': one of none, layernorm"):
        Norm("batchnorm", 1, 4)
    norm = Norm("rmsnorm", 1, 4)
    h = torch.randn(1, 2, 4)
    assert torch.allclose(norm(h).pow(2).mean(-1), torch.ones(1, 2), atol=1e-4)  # rmsnorm
    norm.kind = "batchnorm"  # dispatch at call time does not fall into the rmsnorm branch
    with pytest.raises(ValueError, match="unknown norm 'batchnorm'"):
        norm(h)


def test_norm_eps_is_the_epsilon_of_rmsnorm_and_layernorm_against_a_hand_computation():
    """h = (0.003, 0.004), float64, gain 1: RMSNorm's mean square is 1.25e-5, so with eps 1e-5
    h_i / sqrt(2.25e-5) = (sqrt(0.4), sqrt(16 / 22.5)) = (0.6324555, 0.8432740), and with paper 1's
    notebook's 1e-8 h_i / sqrt(1.251e-5) = (0.8481889, 1.1309186). LayerNorm on (0.001, -0.001):
    mean 0, variance 1e-6, so h / sqrt(1.1e-5) = +-0.3015113 and h / sqrt(1.01e-6) = +-0.9950372."""
    h = torch.tensor([[[0.003, 0.004]]], dtype=torch.float64)
    rms = {eps: Norm("rmsnorm", 1, 2, eps).double() for eps in (1e-5, 1e-8)}
    assert rms[1e-5](h).flatten().tolist() == pytest.approx([0.6324555, 0.8432740], rel=1e-6)
    assert rms[1e-8](h).flatten().tolist() == pytest.approx([0.8481889, 1.1309186], rel=1e-6)
    centred = torch.tensor([[[0.001, -0.001]]], dtype=torch.float64)
    ln = {eps: Norm("layernorm", 1, 2, eps).double() for eps in (1e-5, 1e-8)}
    assert ln[1e-5](centred).flatten().tolist() == pytest.approx([0.3015113, -0.3015113], rel=1e-6)
    assert ln[1e-8](centred).flatten().tolist() == pytest.approx([0.9950372, -0.9950372], rel=1e-6)


def test_model_norm_eps_reaches_every_norm_of_the_model_and_defaults_to_1e_5():
    for flat, eps in (({}, 1e-5), ({"model.norm_eps": 1e-8}, 1e-8)):
        model = build_model(from_flat({**P1, "model.norm": "rmsnorm", **flat}), seeds=[0])
        norms = [m for m in model.modules() if isinstance(m, Norm)]
        assert len(norms) == 3 and all(n.eps == eps for n in norms)


@pytest.mark.parametrize("feature_shape", [(5,), (2, 3)], ids=["rows", "blocks"])
def test_one_hot_lookup_equals_index_select_with_its_gradient(feature_shape):
    # The CUDA lookup (a product with one-hot rows) against the index_select one, forward and
    # backward, on indices that repeat (as a model's do: every row is looked up many times).
    g = torch.Generator().manual_seed(0)
    table = torch.randn(3, 7, *feature_shape, generator=g, requires_grad=True)
    idx = torch.randint(0, 7, (3, 40, 2), generator=g)
    weights = torch.randn(3, 40, 2, *feature_shape, generator=g)
    plain = gather_rows(table, idx)
    (grad_plain,) = torch.autograd.grad((plain * weights).sum(), table)
    hot = gather_rows_one_hot(table, idx)
    (grad_hot,) = torch.autograd.grad((hot * weights).sum(), table)
    assert hot.shape == plain.shape == (3, 40, 2, *feature_shape)
    assert torch.equal(hot, plain)  # one term times 1 per output: exact
    torch.testing.assert_close(grad_hot, grad_plain, rtol=1e-6, atol=1e-6)
