"""Evaluation by name: the per-layer weight norm against hand computations, the restricted and
excluded losses against the whole table's logits, and the rows."""

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_config

from sweepgrok.config.tasks import operation_table, with_eq
from sweepgrok.config.trial import from_flat
from sweepgrok.store.sink import GEOMETRY_SCHEMA, ListSink
from sweepgrok.train import evaluation
from sweepgrok.train import fourier_losses as fl
from sweepgrok.train.models import build_model
from sweepgrok.train.progress_measures import LAYER_GROUPS
from sweepgrok.train.trainer import Trainer, train

TINY = tiny_config(
    {"task.p": 11, "model.d_model": 4, "model.d_mlp": 8, "model.n_layers": 2,
     "train.max_steps": 10, "train.eval_every": 5, "train.stop_after_grok": False,
     "geometry.sample": 16, "geometry.knn_k": 3, "train.seeds": [0, 1]},
    defaults=("train.device",),  # a GPU where there is one
)
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
    torch.testing.assert_close(got, torch.tensor(want, device=got.device), rtol=1e-6, atol=0.0)


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


def test_restricted_and_excluded_losses_reuse_the_split_logits():
    # The evaluation builds the p^2 pairs' logits from its train and test forwards; the losses
    # must equal those of the logits of the whole operation table computed afresh.
    trainer = Trainer(from_flat({**TINY, "task.name": "sub"}))
    measures = _measure(trainer)
    table, answers = operation_table("sub", 11)
    x = with_eq(table, 11).expand(2, -1, -1).to(trainer.device)  # both members: whole table
    answers = answers.to(trainer.device)
    with torch.no_grad():
        logits = trainer.model(x)
    freqs = measures.freqs["key_freqs"]
    torch.testing.assert_close(freqs, fl.key_frequencies(trainer.model.token_embedding))
    restricted, excluded = fl.restricted_and_excluded_logits(logits, answers.expand(2, -1), freqs)
    for member in (0, 1):
        rows = {(int(a), int(b)) for a, b, _ in trainer.test_x[member].tolist()}
        test = torch.tensor([(int(a), int(b)) in rows for a, b in table.tolist()],
                            device=trainer.device)
        want_r = F.cross_entropy(restricted[member, test], answers[test])
        want_e = F.cross_entropy(excluded[member, ~test], answers[~test])
        got = measures.member
        torch.testing.assert_close(got["restricted_loss"][member], want_r, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got["excluded_loss"][member], want_e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("extra", [
    {"model.arch": "mlp"}, {"task.name": "mul"}, {"task.name": "div"}, {"task.name": "s5"},
], ids=["mlp", "mul", "div", "s5"])
def test_restricted_and_excluded_losses_are_null_where_they_do_not_apply(extra):
    measures = _measure(Trainer(from_flat({**TINY, **extra})))
    names = {*measures.member, *measures.freqs}
    assert "test_loss" in names  # absent from the rows, so null in Parquet:
    assert not names & {"restricted_loss", "excluded_loss", "key_freqs"}


def test_key_freqs_rows_leave_out_the_padding():
    host = evaluation.Measures({"restricted_loss": [0.5, 2.0]}, {},
                               {"key_freqs": [[4.0, 1.0, 0.0], [0.0, 0.0, 0.0]]})
    metrics, _ = evaluation.rows(host, ["a", "b"], 10, {})
    assert [(m["key_freqs"], m["restricted_loss"]) for m in metrics] == [("4,1", 0.5), ("", 2.0)]
