"""The benchmarks' definitions: the FLOP floor against hand-computed counts, and the reference
loop against sweepgrok's model (a speed-up is only a speed-up if both compute the same thing).
Speeds themselves are never asserted here (see benchmarks/)."""

import pytest
import torch

from benchmarks.bench_trainer import P1, P2, RefMLP, RefTransformer, step_flops
from benchmarks.run import discover, quick_argv
from sweepgrok.config import Config, from_flat
from sweepgrok.models import build_model
from sweepgrok.tasks import make_split


def _cfg(overrides: dict) -> Config:
    return from_flat({**overrides, "train.device": "cpu"})


def _n_train(cfg: Config) -> int:
    return make_split(cfg.task, cfg.task.data_seed).train_x.shape[0]


def test_floor_of_the_paper1_model_at_z113():
    # d = 128, d_mlp = 512, C = 113, V = 114 tokens with '=', R = 3 V = 342 table rows.
    # Per example (readout only): W_O 128^2 + MLP 2 * 128 * 512 + unembed 128 * 113 = 161,920.
    # Tables: K and V over R rows (2 * 342 * 128^2), Q over the 114 '=' rows (114 * 128^2),
    # scores 114 x 342 x 128: 11,206,656 + 1,867,776 + 4,990,464 = 18,064,896.
    cfg = _cfg({**P1, "model.norm": "none"})
    n = _n_train(cfg)
    assert n == 3831  # round(0.3 * 113^2 = 3,830.7)
    forward_macs = 3831 * 161_920 + 18_064_896
    assert step_flops(cfg, n) == 6 * forward_macs == 3_830_282_496
    assert step_flops(cfg, n, members=8) == 8 * 3_830_282_496


def test_floor_with_uniform_attention_has_no_per_example_w_o():
    # Per example: MLP 131,072 + unembed 14,464; tables: V and V @ W_O over 342 rows.
    cfg = _cfg({**P1, "model.attention": "uniform"})
    assert step_flops(cfg, 3830) == 6 * (3830 * 145_536 + 2 * 342 * 128 * 128) == 3_411_657_216


def test_floor_of_the_paper2_mlp_at_mod97():
    # 2 hidden layers of 512: the second 512^2 and the readout 512 * 97 per example; the
    # first layer is two (97, 128) @ (128, 512) tables, 97 * 256 * 512 = 12,713,984 MACs.
    cfg = _cfg(P2)
    n = _n_train(cfg)
    assert n == 2823  # round(0.3 * 97^2 = 2,822.7)
    assert step_flops(cfg, n) == 6 * (2823 * 311_808 + 12_713_984) == 5_357_687_808


def test_floor_of_a_two_layer_transformer():
    # First block: all 3 positions through W_O and the MLP (3 * (d^2 + 2 d f)), tables K, V
    # and Q over all R rows plus R x R scores; last block: K, V at 3 positions (6 d^2), Q and
    # W_O at the readout (2 d^2), MLP (2 d f); unembed d C.
    d, f, c, r = 16, 32, 7, 3 * 8
    cfg = _cfg({"task.p": 7, "model.d_model": d, "model.d_mlp": f, "model.n_heads": 2,
                "model.n_layers": 2})
    per_example = 3 * (d * d + 2 * d * f) + 6 * d * d + 2 * d * d + 2 * d * f + d * c
    tables = 2 * r * d * d + r * d * d + r * r * d
    assert step_flops(cfg, 10) == 6 * (10 * per_example + tables)


def _copy_into_reference(ref: RefTransformer, model) -> None:
    """Member 0 of sweepgrok's ensemble into the notebook-style module (nn.Linear stores
    weights as (out, in); sweepgrok as (in, out))."""
    block = model.blocks[0]
    with torch.no_grad():
        ref.embed.weight.copy_(model.w_e[0])
        ref.pos.copy_(model.w_pos[0])
        for lin, w in ((ref.q, block.w_q), (ref.k, block.w_k), (ref.v, block.w_v),
                       (ref.o, block.w_o), (ref.mlp_in, block.w_in), (ref.mlp_out, block.w_out),
                       (ref.unembed, model.unembed.w_u)):
            lin.weight.copy_(w[0].T)
        ref.mlp_in.bias.copy_(block.b_in[0])
        ref.mlp_out.bias.copy_(block.b_out[0])
        for ln, norm in zip(ref.ln, (model.norm_embed, block.norm_attn, block.norm_mlp),
                            strict=True):
            if isinstance(ln, torch.nn.LayerNorm):
                ln.weight.copy_(norm.gain[0])
                ln.bias.copy_(norm.bias[0])


@pytest.mark.parametrize(("norm", "attention"), [
    ("none", "softmax"), ("layernorm", "softmax"), ("sphere", "softmax"), ("layernorm", "uniform"),
])
def test_reference_transformer_computes_sweepgrok_model(norm, attention):
    cfg = _cfg({"task.p": 11, "model.d_model": 16, "model.n_heads": 2, "model.d_mlp": 32,
                "model.norm": norm, "model.attention": attention})
    model = build_model(cfg, [3]).double()
    ref = RefTransformer(cfg).double()
    _copy_into_reference(ref, model)
    x = make_split(cfg.task, 0).train_x
    want = model(x.unsqueeze(0))[0]
    got = ref(x)[:, -1]  # the notebook reads the last position of every-position logits
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_reference_mlp_computes_sweepgrok_model():
    cfg = _cfg({"task.p": 11, "model.arch": "mlp", "model.n_layers": 2, "model.d_model": 8,
                "model.d_mlp": 16})
    model = build_model(cfg, [5]).double()
    ref = RefMLP(cfg).double()
    with torch.no_grad():
        ref.embed.weight.copy_(model.w_e[0])
        for lin, w, b in zip(ref.layers, model.weights, model.biases, strict=True):
            lin.weight.copy_(w[0].T)
            lin.bias.copy_(b[0])
        ref.readout.weight.copy_(model.w_u[0].T)
        ref.readout.bias.copy_(model.b_u[0])
    x = make_split(cfg.task, 0).train_x
    torch.testing.assert_close(ref(x)[:, -1], model(x.unsqueeze(0))[0], rtol=1e-10, atol=1e-10)


def test_run_finds_every_benchmark_and_its_quick_arguments():
    names = discover()
    assert names[:3] == ["bench_trainer", "bench_seeds", "bench_ray"]
    assert set(names) == {"bench_trainer", "bench_seeds", "bench_ray", "bench_geomdr",
                          "bench_analysis", "bench_progress", "bench_fourier_losses"}
    assert quick_argv("bench_seeds") == ["--quick"]
    assert quick_argv("bench_fourier_losses") == ["--quick"]
