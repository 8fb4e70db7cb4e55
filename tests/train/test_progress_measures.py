"""Progress measures (sweepgrok.train.progress_measures) against hand computations: per-group
weight norms,
logit norm, softmax-collapse share, attention entropy per head, test-split D_eff; their rows
per member, and a Parquet folder of both architectures read back by pandas and DuckDB."""

import math

import duckdb
import pandas as pd
import pytest
import torch
from conftest import tiny_config

from sweepgrok.config.trial import from_flat
from sweepgrok.store.sink import (
    GEOMETRY_SCHEMA,
    METRICS_SCHEMA,
    ListSink,
    ParquetSink,
    read_geometry,
)
from sweepgrok.train import evaluation
from sweepgrok.train import progress_measures as progress
from sweepgrok.train.geometry import effective_dimension
from sweepgrok.train.trainer import Trainer, train

TINY = tiny_config(
    {"task.p": 11, "model.d_model": 4, "model.d_mlp": 8, "model.n_layers": 2,
     "train.max_steps": 10, "train.eval_every": 5, "train.stop_after_grok": False,
     "geometry.sample": 16, "geometry.knn_k": 3, "train.seeds": [0, 1]},
    defaults=("train.device",),  # a GPU where there is one
)
FILL = (2.0, -0.5)  # every parameter of member 0, of member 1
# Entries per group of one member, by hand (d = 4, d_mlp = 8, p = 11 so 11 classes and a
# vocabulary of 12 with the = token; the MLP embeds only the 11 operands).
TRANSFORMER_GROUPS = {"weight_norm_embed": 12 * 4, "weight_norm_pos": 3 * 4,
                      "weight_norm_unembed": 4 * 11}
LAYER_GROUPS = {"weight_norm_q": 16, "weight_norm_k": 16, "weight_norm_v": 16,
                "weight_norm_o": 16, "weight_norm_mlp_in": 4 * 8 + 8,
                "weight_norm_mlp_out": 8 * 4 + 4}
MLP_GROUPS = {"weight_norm_embed": 11 * 4, "weight_norm_unembed": 8 * 11 + 11}


def _cfg(arch: str = "transformer", **extra):
    """TINY for `arch` (the Transformer with layernorm: its gains and biases are parameters)."""
    norm = {"model.norm": "layernorm"} if arch == "transformer" else {}
    return from_flat({**TINY, **norm, "model.arch": arch, **extra})


def _measure(trainer: Trainer) -> evaluation.Measures:
    return evaluation.measure(trainer.model, trainer.cfg, (trainer.train_x, trainer.train_y),
                              (trainer.test_x, trainer.test_y),
                              (trainer.geo_idx, trainer.geo_test_idx))


def _fill(trainer: Trainer, values: tuple[float, ...]) -> None:
    with torch.no_grad():
        for p in trainer.model.parameters():
            for member, value in enumerate(values):
                p[member] = value


@pytest.mark.parametrize("arch", ["transformer", "mlp"])
def test_group_weight_norms_of_constant_parameters(arch):
    trainer = Trainer(_cfg(arch))
    _fill(trainer, FILL)
    got = _measure(trainer)
    groups = TRANSFORMER_GROUPS if arch == "transformer" else MLP_GROUPS
    # Every one of the n entries of a group equals c: its norm is |c| sqrt(n), per member.
    for name, n in groups.items():
        want = torch.tensor([abs(c) * math.sqrt(n) for c in FILL])
        torch.testing.assert_close(got.member[name], want, rtol=1e-6, atol=0.0)
    for name, n in LAYER_GROUPS.items():
        if arch == "mlp":
            assert name not in got.layer  # null: the MLP's layer has no such parts
            continue
        want = torch.tensor([[abs(c) * math.sqrt(n)] * 2 for c in FILL])
        torch.testing.assert_close(got.layer[name], want, rtol=1e-6, atol=0.0)
    assert ("weight_norm_pos" in got.member) == (arch == "transformer")


def test_groups_and_layers_partition_the_weights():
    # Squares add up: the whole-model groups, the embedding norm's gain and bias and every
    # layer make the global weight_norm; within a layer, the six groups and the two norms'.
    trainer = Trainer(_cfg())
    got = _measure(trainer)
    model = trainer.model
    norm_embed = progress.weight_norm(model.norm_embed.parameters())
    total = sum(got.member[n] ** 2 for n in TRANSFORMER_GROUPS) + norm_embed**2
    total = total + got.layer["weight_norm"].square().sum(1)
    torch.testing.assert_close(total.sqrt(), got.member["weight_norm"], rtol=1e-5, atol=0.0)
    for i, block in enumerate(model.blocks):
        norms = [block.norm_attn.parameters(), block.norm_mlp.parameters()]
        rest = sum(progress.weight_norm(p) ** 2 for p in norms)
        parts = sum(got.layer[n][:, i] ** 2 for n in LAYER_GROUPS) + rest
        torch.testing.assert_close(parts.sqrt(), got.layer["weight_norm"][:, i], rtol=1e-5,
                                   atol=0.0)


def _constant_logits(trainer: Trainer, bias: list[float]) -> None:
    """MLP with every weight 0: each example's logits are the readout bias `bias`."""
    _fill(trainer, (0.0, 0.0))
    with torch.no_grad():
        trainer.model.b_u[:] = torch.tensor(bias)


def test_logit_norm_and_collapse_share_by_hand():
    cfg = _cfg("mlp")
    trainer = Trainer(cfg)
    bias = [0.0] * 11
    bias[3] = 30.0  # class 3 wins by 30: its float32 loss log(1 + 10 e^-30) rounds to 0
    _constant_logits(trainer, bias)
    got = _measure(trainer).member
    torch.testing.assert_close(got["logit_norm"], torch.tensor([30.0, 30.0]))
    # Exactly the training examples labelled 3 have collapsed (the others' loss is 30).
    want = (trainer.train_y == 3).double().mean(1)
    assert want.min() > 0
    torch.testing.assert_close(got["collapse_share"].double(), want)
    # In float64 the same loss is 4.7e-13, not 0: the share is a float32 fact.
    assert math.log1p(10 * math.exp(-30.0)) > 0
    # StableMax keeps a loss: log((31 + 10) / 31) for the winners, nothing collapses.
    trainer = Trainer(_cfg("mlp", **{"optim.loss": "stablemax"}))
    _constant_logits(trainer, bias)
    assert _measure(trainer).member["collapse_share"].tolist() == [0.0, 0.0]


def test_progress_functions_on_hand_tensors():
    logits = torch.tensor([[[3.0, 4.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, 2.0]]])
    torch.testing.assert_close(progress.logit_norm(logits), torch.tensor([2.5, 1.5]))
    losses = torch.tensor([[0.0, 1e-30, 0.0, 2.0]])
    assert progress.collapse_share(losses).tolist() == [0.5]
    with pytest.raises(ValueError, match="float32"):
        progress.collapse_share(losses.double())
    # (E=1, N=2, H=2, S=3): one-hot (0 nats), an even split of two (log 2), uniform (log 3).
    w = torch.tensor([[[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]],
                       [[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]]]])
    got = progress.attention_entropy([w, w])
    want = torch.tensor([[0.0, (math.log(2) + math.log(3)) / 2]] * 2).unsqueeze(0)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("attention", ["uniform", "zero_queries"])
def test_uniform_attention_has_entropy_log_3(attention):
    extra = {"model.attention": "uniform"} if attention == "uniform" else {}
    trainer = Trainer(_cfg(**extra, **{"model.n_layers": 3}))
    if attention == "zero_queries":
        with torch.no_grad():  # scores q.k = 0: softmax gives 1/3 to each position
            for block in trainer.model.blocks:
                block.w_q.zero_()
    got = _measure(trainer).layer["attn_entropy"]
    assert got.shape == (2, 3, 2)  # members, layers, heads
    torch.testing.assert_close(got, torch.full((2, 3, 2), math.log(3)), rtol=1e-6, atol=0.0)


def test_attention_weights_of_both_forward_paths_agree():
    trainer = Trainer(_cfg(**{"model.n_layers": 3}))
    fast: list[torch.Tensor] = []
    plain: list[torch.Tensor] = []
    with torch.no_grad():
        trainer.model(trainer.train_x, attn=fast)
        trainer.model(trainer.train_x, attn=plain, fast=False)
    assert len(fast) == len(plain) == 3
    for f, p in zip(fast, plain, strict=True):
        assert f.shape == (2, trainer.train_x.shape[1], 2, 3)
        torch.testing.assert_close(f, p)
        torch.testing.assert_close(f.sum(-1), torch.ones_like(f[..., 0]))
        assert f.std() > 0.01  # not uniform: the test above is not the only case


@pytest.mark.parametrize("arch", ["transformer", "mlp"])
def test_test_split_deff_on_its_fixed_subsample(arch):
    trainer = Trainer(_cfg(arch))
    n_test = trainer.test_x.shape[1]
    assert trainer.geo_test_idx.shape == (2, min(16, n_test))  # the training split's rule
    assert int(trainer.geo_test_idx.max()) < n_test
    assert not torch.equal(trainer.geo_test_idx[0], trainer.geo_test_idx[1])  # per member
    got = _measure(trainer)
    hidden: list[torch.Tensor] = []
    with torch.no_grad():
        trainer.model(trainer.test_x, hidden=hidden, fast=False)
    for member in (0, 1):
        rows = trainer.geo_test_idx[member]
        want = [float(effective_dimension(h[member, rows].double())) for h in hidden]
        assert got.layer["deff_test"][member].tolist() == pytest.approx(want, rel=1e-4)
        assert float(got.member["deff_test"][member]) == pytest.approx(want[-1], rel=1e-4)
    off = Trainer(_cfg(arch, **{"geometry.enabled": False}))
    assert "deff_test" not in _measure(off).member  # null without geometry


def test_rows_per_member_equal_single_seed_runs():
    # Batched seeds carry each member's own values, as a run of that seed alone does.
    cfg = _cfg()
    batched = ListSink()
    train(cfg, batched)
    names = [*LAYER_GROUPS, "attn_entropy", "deff_test"]
    alone = ListSink()
    train(cfg.member(cfg.train.seed_list[1]), alone)  # the second member: its slot, not 0's
    run_id = alone.runs[0]["run_id"]
    mine = [g for g in batched.geometry if g["run_id"] == run_id]
    assert len(mine) == len(alone.geometry) == 3 * 2  # evaluations x layers
    for g, w in zip(mine, alone.geometry, strict=True):
        for name in names:
            assert g[name] == pytest.approx(w[name], rel=1e-4, abs=1e-6)
    got = next(m for m in batched.metrics if m["run_id"] == run_id and m["step"] == 10)
    for name in (*TRANSFORMER_GROUPS, "logit_norm", "collapse_share", "deff_test"):
        assert got[name] == pytest.approx(alone.metrics[-1][name], rel=1e-4, abs=1e-6)
    first = next(m for m in batched.metrics if m["run_id"] != run_id and m["step"] == 10)
    assert first["weight_norm_embed"] != pytest.approx(got["weight_norm_embed"])


def test_both_architectures_in_one_parquet_folder(tmp_path):
    # One fixed schema: the MLP's rows hold nulls where the Transformer's hold values.
    sink = ParquetSink(tmp_path)
    for arch in ("transformer", "mlp"):
        train(_cfg(arch, **{"train.seeds": [0]}), sink)
    metrics = pd.read_parquet(tmp_path / "metrics")
    assert list(metrics.columns) == METRICS_SCHEMA.names
    assert metrics["weight_norm_pos"].isna().sum() == 3  # the MLP's three evaluations
    assert metrics[["logit_norm", "collapse_share", "deff_test"]].notna().all().all()
    geometry = read_geometry(tmp_path)
    assert list(geometry.columns) == GEOMETRY_SCHEMA.names
    heads = geometry["attn_entropy"].dropna()
    assert len(heads) == 3 * 2 and all(len(h) == 2 for h in heads)  # evals x layers, 2 heads
    query = (f"select count(*), count(attn_entropy), max(len(attn_entropy)), "
             f"count(weight_norm_q) from '{tmp_path}/geometry/*.parquet'")
    assert duckdb.sql(query).fetchall()[0] == (12, 6, 2, 6)
