"""The fast forward path computes the plain path's function: same logits, hidden streams, loss
and gradients, for every norm, attention, unembedding, depth and ensemble size."""

import itertools
import typing

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_config

from sweepgrok.config.tasks import make_split
from sweepgrok.config.trial import Attention, NormName, Unembed, from_flat
from sweepgrok.train.models import build_model

SMALL = tiny_config({"task.p": 11, "task.train_fraction": 0.5, "model.n_heads": 4})
CASES = list(itertools.product(
    typing.get_args(NormName), typing.get_args(Attention),
    [u for u in typing.get_args(Unembed) if u != "auto"],  # auto is one of the other two
    [1, 2], [1, 3],
))


def _inputs(cfg, e):
    """Each member gets its own split (different rows per member, as in the trainer)."""
    splits = [make_split(cfg.task, s) for s in range(e)]
    x = torch.stack([s.train_x for s in splits])
    y = torch.stack([s.train_y for s in splits])
    return x, y


def _run(model, x, y, fast):
    hidden = []
    logits = model(x, hidden=hidden, fast=fast)
    e, n, c = logits.shape
    per = F.cross_entropy(logits.reshape(e * n, c), y.reshape(-1), reduction="none")
    loss = per.view(e, n).mean(1).sum()  # the trainer's loss
    params = list(model.parameters())
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return logits, hidden, loss, grads


def _compare(norm, attention, unembed, layers, e, dtype, rtol, atol):
    cfg = from_flat({**SMALL, "model.norm": norm, "model.attention": attention,
                     "model.unembed": unembed, "model.n_layers": layers})
    model = build_model(cfg, list(range(10, 10 + e))).to(dtype)
    x, y = _inputs(cfg, e)
    fast, plain = _run(model, x, y, True), _run(model, x, y, False)
    torch.testing.assert_close(fast[0], plain[0], rtol=rtol, atol=atol)
    assert len(fast[1]) == len(plain[1]) == layers
    for a, b in zip(fast[1], plain[1], strict=True):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol)
    torch.testing.assert_close(fast[2], plain[2], rtol=rtol, atol=atol)
    names = [n for n, _ in model.named_parameters()]
    for name, ga, gb in zip(names, fast[3], plain[3], strict=True):
        if ga is None or gb is None:  # uniform attention never uses W_Q, W_K
            assert ga is None and gb is None and attention == "uniform", name
            assert name.rsplit(".", 1)[-1] in ("w_q", "w_k"), name
            continue
        scale = gb.abs().max().clamp_min(1.0)
        torch.testing.assert_close(ga / scale, gb / scale, rtol=rtol, atol=atol, msg=name)


@pytest.mark.parametrize(("norm", "attention", "unembed", "layers", "e"), CASES)
def test_transformer_fast_path_float32(norm, attention, unembed, layers, e):
    _compare(norm, attention, unembed, layers, e, torch.float32, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("norm", "attention", "unembed", "layers", "e"), CASES)
def test_transformer_fast_path_float64(norm, attention, unembed, layers, e):
    _compare(norm, attention, unembed, layers, e, torch.float64, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("layers", "e"), [(1, 1), (2, 3), (3, 1)])
def test_mlp_fast_path(layers, e, dtype):
    cfg = from_flat({**SMALL, "model.arch": "mlp", "model.n_layers": layers})
    model = build_model(cfg, list(range(e))).to(dtype)
    x, y = _inputs(cfg, e)
    fast, plain = _run(model, x, y, True), _run(model, x, y, False)
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-10,
                                                                          "atol": 1e-12}
    torch.testing.assert_close(fast[0], plain[0], **tol)
    for a, b in zip(fast[1] + list(fast[3]), plain[1] + list(plain[3]), strict=True):
        torch.testing.assert_close(a, b, **tol)


def test_fast_path_is_exact_for_any_tokens_at_any_position():
    """The tables cover every (position, token): inputs off the [a, b, =] pattern agree too."""
    cfg = from_flat({**SMALL, "model.norm": "layernorm"})
    model = build_model(cfg, [0, 1]).double()
    x = torch.randint(0, cfg.task.n_tokens + 1, (2, 40, 3))
    torch.testing.assert_close(model(x), model(x, fast=False), rtol=1e-10, atol=1e-12)


def test_fast_path_members_do_not_mix():
    """Member 1's logits and gradients do not depend on member 0's parameters."""
    cfg = from_flat({**SMALL, "model.norm": "rmsnorm"})
    model = build_model(cfg, [0, 1])
    x, _ = _inputs(cfg, 2)
    before = model(x)[1].detach().clone()
    with torch.no_grad():
        for p in model.parameters():
            p[0].normal_()
    torch.testing.assert_close(model(x)[1], before, rtol=0, atol=0)


@pytest.mark.parametrize(("norm", "layers", "e"), [("layernorm", 1, 1), ("sphere", 1, 3),
                                                   ("none", 2, 3), ("rmsnorm", 2, 1)])
def test_per_example_scores_compute_the_plain_path(monkeypatch, norm, layers, e):
    """The scores of each example from its own query and key rows (the CUDA variant of the
    table path, forced here on the CPU) give the plain path's function, gradients included."""
    import sweepgrok.train.models as models

    monkeypatch.setattr(models, "per_example_scores", lambda table, idx: True)
    _compare(norm, "softmax", "linear", layers, e, torch.float64, rtol=1e-10, atol=1e-12)


def test_per_example_scores_give_the_table_paths_attention_weights(monkeypatch):
    import sweepgrok.train.models as models

    cfg = from_flat({**SMALL, "model.norm": "layernorm"})
    model = build_model(cfg, [3, 4]).double()
    x, _ = _inputs(cfg, 2)
    table_attn: list[torch.Tensor] = []
    model(x, attn=table_attn)
    monkeypatch.setattr(models, "per_example_scores", lambda table, idx: True)
    rows_attn: list[torch.Tensor] = []
    model(x, attn=rows_attn)
    assert len(rows_attn) == len(table_attn) == 1
    torch.testing.assert_close(rows_attn[0], table_attn[0], rtol=1e-12, atol=1e-14)


def test_per_example_scores_are_used_only_on_cuda_while_gathers_are_products():
    from sweepgrok.train.models import ONE_HOT_BYTES, per_example_scores

    table = torch.zeros(2, 342, 128)
    assert not per_example_scores(table, torch.zeros(2, 3830, 3, dtype=torch.long))
    if torch.cuda.is_available():
        small = torch.zeros(2, 3830, 3, dtype=torch.long, device="cuda")
        assert per_example_scores(table.cuda(), small)
        n = ONE_HOT_BYTES // (342 * 4) + 1  # one index more than the one-hot bound allows
        assert not per_example_scores(table.cuda(), torch.zeros(n, dtype=torch.long,
                                                                 device="cuda").view(1, n, 1))
