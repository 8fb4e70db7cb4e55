"""Evaluation by name: the per-layer weight norm against hand computations, and its rows."""

import math

import pytest
import torch

from sweepgrok import evaluation
from sweepgrok.config import from_flat
from sweepgrok.models import build_model
from sweepgrok.progress import LAYER_GROUPS
from sweepgrok.sink import GEOMETRY_SCHEMA, ListSink
from sweepgrok.trainer import Trainer, train

TINY = {
    "task.p": 11, "task.train_fraction": 0.6, "model.d_model": 4, "model.n_heads": 2,
    "model.d_mlp": 8, "model.n_layers": 2, "train.max_steps": 10, "train.eval_every": 5,
    "train.early_evals": False, "train.stop_after_grok": False, "geometry.sample": 16,
    "geometry.knn_k": 3, "train.seeds": [0, 1],
}
# Parameters of one layer of one member, counted by hand (d = 4, d_mlp = 8):
# Transformer block: W_Q, W_K, W_V, W_O 4 * 4 * 4 = 64, W_in 4 * 8 = 32, b_in 8, W_out 8 * 4
# = 32, b_out 4; layernorm adds a gain and a bias of 4 after attention and after the MLP.
BLOCK = 64 + 32 + 8 + 32 + 4 + 4 * 4
# MLP: the first hidden layer reads the two concatenated embeddings (8 -> 8) + bias 8; the
# second 8 -> 8 + bias 8.
MLP_LAYER = 8 * 8 + 8


def _measure(trainer: Trainer) -> evaluation.Measures:
    return evaluation.measure(trainer.model, trainer.cfg, (trainer.train_x, trainer.train_y),
                              (trainer.test_x, trainer.test_y),
                              (trainer.geo_idx, trainer.geo_test_idx))


@pytest.mark.parametrize(("extra", "count", "prefixes"), [
    ({"model.norm": "layernorm"}, BLOCK, ("blocks.0.", "blocks.1.")),
    ({"model.arch": "mlp"}, MLP_LAYER, (".0", ".1")),
], ids=["transformer", "mlp"])
def test_layer_weight_norm_of_constant_parameters(extra, count, prefixes):
    trainer = Trainer(from_flat({**TINY, **extra}))
    fill = {(0, 0): 1.0, (0, 1): 0.5, (1, 0): 2.0, (1, 1): -3.0}  # (member, layer) -> value
    for name, p in trainer.model.named_parameters():
        for layer, prefix in enumerate(prefixes):
            if name.startswith(prefix) or name.endswith(prefix):
                for member in (0, 1):
                    p.data[member] = fill[member, layer]
    got = _measure(trainer).layer["weight_norm"]
    # Every one of the `count` entries of a layer equals c: the norm is |c| sqrt(count).
    want = [[abs(fill[m, layer]) * math.sqrt(count) for layer in (0, 1)] for m in (0, 1)]
    torch.testing.assert_close(got, torch.tensor(want), rtol=1e-6, atol=0.0)


def test_layer_weight_norm_rows_without_geometry():
    cfg = from_flat({**TINY, "geometry.enabled": False})
    sink = ListSink()
    train(cfg, sink)
    assert {(g["step"], g["layer"]) for g in sink.geometry} == {
        (s, layer) for s in (0, 5, 10) for layer in (0, 1)}
    for g in sink.geometry:
        # No deff, rho, top_eig_frac or deff_test: geometry is off.
        assert set(g) == {"run_id", "step", "layer", "weight_norm", *LAYER_GROUPS, "attn_entropy"}
        assert set(g) <= set(GEOMETRY_SCHEMA.names)
    # At step 0 the parameters are the init: sum the squares of each block's entries.
    model = build_model(cfg)
    for g in (g for g in sink.geometry if g["step"] == 0):
        member = cfg.train.seed_list.index(next(
            r["train.seed"] for r in sink.runs if r["run_id"] == g["run_id"]))
        block = f"blocks.{g['layer']}."
        squares = sum(float(v) ** 2 for n, p in model.named_parameters() if n.startswith(block)
                      for v in p.detach()[member].flatten())
        assert g["weight_norm"] == pytest.approx(math.sqrt(squares), rel=1e-5)
    # The layers are part of the whole model: their squares sum below the total's.
    total = {(m["run_id"], m["step"]): m["weight_norm"] for m in sink.metrics}
    for (run_id, step), norm in total.items():
        layers = [g["weight_norm"] for g in sink.geometry
                  if g["run_id"] == run_id and g["step"] == step]
        assert 0 < sum(w * w for w in layers) < norm * norm


def test_fourier_of_the_effective_unembedding_and_above_chance():
    # Sphere: logits = tau * cos(h, w_c), so the class rows count by direction only. Scaling
    # one class row must not change the measure; on the raw rows it would.
    trainer = Trainer(from_flat({**TINY, "model.norm": "sphere", "geometry.fourier_top": 2}))
    before = _measure(trainer).member
    with torch.no_grad():
        trainer.model.unembed.w_u[:, :, 3] *= 50.0  # (E, d, C): class 3's row, longer
    after = _measure(trainer).member
    torch.testing.assert_close(after["fourier_unembed_frac"], before["fourier_unembed_frac"])
    # above chance = (frac - 2/5) / (1 - 2/5) for p = 11 (5 frequencies), top 2.
    for name in ("fourier", "fourier_unembed"):
        want = (after[f"{name}_frac"] - 0.4) / 0.6
        torch.testing.assert_close(after[f"{name}_above_chance"], want)
