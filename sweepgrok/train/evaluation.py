"""What the trainer measures at an evaluation, by name, and the metrics/ and geometry/ rows.

``measure`` returns device tensors keyed by the column they fill (E = active members):

- ``member``: (E,) each, one metrics/ column (one row per run and step);
- ``layer``: (E, L) each, one geometry/ column (one row per run, step and layer; layer i is
  the hidden representation after block / hidden layer i); (E, L, H) for a list column (one
  value per attention head);
- ``freqs``: (E, K) integer tensors, one metrics/ text column of comma-separated ints (0
  entries, padding, left out).

A new measurement is one entry in ``measure`` plus its column in ``sweepgrok.store.columns``.
A measurement that does not apply (to the task, or to a plugin model that lacks what it reads)
is left out, its column null; ``not_measured`` says which, for the trainer's log line.
``to_host`` copies everything in one host sync (one per evaluation: on a GPU every read stalls
the launch queue); ``rows`` builds the rows from the names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sweepgrok.config.trial import Config, GeomDRConfig, GeometryConfig, LossName
from sweepgrok.train import fourier_losses as fl
from sweepgrok.train import geometry as geo
from sweepgrok.train import progress_measures as progress
from sweepgrok.train.accelerators import per_example_loss
from sweepgrok.train.ensemble import finite, member_finite, take
from sweepgrok.train.geomdr import geomdr_loss
from sweepgrok.train.models import MLP, Transformer

NAN_IS_NULL = frozenset({"geomdr_loss", "fourier_above_chance", "fourier_unembed_above_chance"})
"""Member metrics whose NaN means 'not measured' (GeomDR off, or a diverged member; no
frequencies left above the top ones): written as null. Every other NaN is a value (a diverged
run's loss)."""


@dataclass
class Measures:
    """One evaluation's measurements by column name (see the module docstring for shapes).

    On the device from ``measure``; plain Python lists (per member first) from ``to_host``."""

    member: dict[str, Any]
    layer: dict[str, Any]
    freqs: dict[str, Any]


def not_measured(model: nn.Module, cfg: Config) -> list[str]:
    """The measurements an evaluation of `model` on `cfg` leaves out, and why (a plugin model,
    or a task whose tokens are not Z_p); empty for a built-in model on a Z_p task."""
    out = []
    builtin = isinstance(model, Transformer | MLP)
    if not builtin:
        out.append("per-group and per-layer weight norms (weight_norm_embed, _pos, _unembed, "
                   "geometry/ weight_norm and its groups): a plugin model's parameter groups "
                   "are unknown")
    if not cfg.task.spec.cyclic:
        out.append(f"Fourier measures (fourier_*, key_freqs): task {cfg.task.name} is not Z_p")
    elif not all(hasattr(model, a) for a in FOURIER_READS):
        out.append("Fourier measures (fourier_*, key_freqs): the model has no "
                   + " or ".join(FOURIER_READS))
    return out


FOURIER_READS = ("token_embedding", "class_unembedding")
"""What the Fourier measures read of a model: (E, n_tokens, d) and (E, n_classes, d)."""


def _fourier_applies(model: nn.Module, cfg: Config) -> bool:
    return cfg.task.spec.cyclic and all(hasattr(model, a) for a in FOURIER_READS)


@torch.no_grad()
def measure(
    model: nn.Module,
    cfg: Config,
    train: tuple[Tensor, Tensor],
    test: tuple[Tensor, Tensor],
    geo_idx: tuple[Tensor, Tensor],
) -> Measures:
    """Losses, accuracies, norms, GeomDR loss, progress measures and (geometry.enabled)
    representation geometry of every member. train / test: (x (E, N, 3), y (E, N)); geo_idx:
    the fixed rows (E, G) of the training set and of the test set on which geometry is
    measured."""
    hidden: list[Tensor] = []
    test_hidden: list[Tensor] | None = [] if cfg.geometry.enabled else None
    attn: list[Tensor] | None = [] if isinstance(model, Transformer) else None
    member: dict[str, Tensor] = {}
    loss = cfg.optim.loss
    train_stats = _split_stats(model, *train, hidden, loss, attn)
    member["train_loss"], member["train_acc"] = train_stats.loss, train_stats.acc
    test_stats = _split_stats(model, *test, test_hidden, loss)
    member["test_loss"], member["test_acc"] = test_stats.loss, test_stats.acc
    member["weight_norm"] = progress.weight_norm(model.parameters())
    member["geomdr_loss"] = _geomdr_eval(hidden, cfg.geomdr, train_stats.loss)
    layer: dict[str, Tensor] = {}
    if isinstance(model, Transformer | MLP):
        layer["weight_norm"] = _layer_weight_norm(model)
    member.update(_progress(model, train_stats, attn, layer))
    freqs: dict[str, Tensor] = {}
    if fourier_losses_apply(cfg) and isinstance(model, Transformer):
        freqs["key_freqs"] = fl.key_frequencies(model.token_embedding)
        member["restricted_loss"], member["excluded_loss"] = _fourier_losses(
            (train_stats.logits, train[1]), (test_stats.logits, test[1]), freqs["key_freqs"], loss)
    if cfg.geometry.enabled and hidden:  # a plugin model may give no hidden representation
        layer.update(_geometry(hidden, geo_idx[0], cfg.geometry))
        # The last hidden representation's, beside the losses (all layers are in geometry/).
        member["deff"], member["rho"] = layer["deff"][:, -1], layer["rho"][:, -1]
        if test_hidden and geo_idx[1].shape[1] >= 2:  # a covariance needs two points
            layer["deff_test"] = _deff(test_hidden, geo_idx[1])
            member["deff_test"] = layer["deff_test"][:, -1]
        if _fourier_applies(model, cfg):  # Fourier measures need token index = element of Z_p
            top = cfg.geometry.fourier_top
            for name, w in (("fourier", cast(Tensor, model.token_embedding)),
                            ("fourier_unembed", _effective_unembedding(model, cfg))):
                frac, freqs[f"{name}_freqs"] = geo.fourier_concentration(w, top)
                member[f"{name}_frac"] = frac
                member[f"{name}_above_chance"] = geo.above_chance(frac, top, w.shape[-2])
    return Measures(member, layer, freqs)


def _effective_unembedding(model: nn.Module, cfg: Config) -> Tensor:
    """(E, C, d): the class rows as the logits see them: unit rows for the cosine unembedding
    (logits = tau * cos(h, w_c) ignore the rows' lengths), the raw rows otherwise."""
    rows = cast(Tensor, model.class_unembedding)
    if cfg.model.arch == "transformer" and cfg.model.unembed_resolved == "cosine":
        return F.normalize(rows, dim=-1)
    return rows


def to_host(measures: Measures) -> Measures:
    """Every tensor of `measures` as Python lists, read back in one host sync.

    Each is flattened per member and cast to float64 (exact for float32 values and for the
    frequency ints), concatenated to (E, total) and copied once."""
    groups = (measures.member, measures.layer, measures.freqs)
    tensors = [t for g in groups for t in g.values()]
    if not tensors:
        return Measures({}, {}, {})
    e = tensors[0].shape[0]
    flat = torch.cat([t.reshape(e, -1).double() for t in tensors], 1).cpu()
    out: list[dict[str, Any]] = []
    col = 0
    for group in groups:
        host: dict[str, Any] = {}
        for name, t in group.items():
            width = t[0].numel()
            values = flat[:, col : col + width]
            col += width
            if t.dim() == 1:
                host[name] = values[:, 0].tolist()
            else:  # per member: (L,) for a layer column, (L, H) for a per-head list column
                host[name] = values.reshape(e, *t.shape[1:]).tolist()
        out.append(host)
    return Measures(*out)


def rows(
    host: Measures, run_ids: Sequence[str], step: int, common: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """metrics/ rows (one per member, with the `common` columns such as lr) and geometry/ rows
    (one per member and layer) of measures read back by ``to_host``; member slot i is run_ids[i]."""
    metrics: list[dict[str, Any]] = []
    geometry: list[dict[str, Any]] = []
    n_layers = len(next(iter(host.layer.values()))[0]) if host.layer else 0
    for slot, run_id in enumerate(run_ids):
        key = {"run_id": run_id, "step": step}
        row: dict[str, Any] = {**key, **common}
        for name, values in host.member.items():
            v = values[slot]
            row[name] = None if name in NAN_IS_NULL and not math.isfinite(v) else v
        for name, values in host.freqs.items():
            # 0 pads a member's shorter list (key_freqs): frequency 0 is never listed.
            row[name] = ",".join(str(int(f)) for f in values[slot] if f > 0)
        metrics.append(row)
        for layer in range(n_layers):
            geometry.append({**key, "layer": layer,
                             **{name: values[slot][layer] for name, values in host.layer.items()}})
    return metrics, geometry


# ---- the measurements ---------------------------------------------------------------------


@dataclass
class _SplitStats:
    """One split's forward pass: the logits (E, N, C), the float32 loss of each example
    (optim.loss; (E, N)), its mean and the accuracy (argmax), (E,) each."""

    logits: Tensor
    per_example: Tensor
    loss: Tensor
    acc: Tensor


def _split_stats(
    model: nn.Module, x: Tensor, y: Tensor, hidden: list[Tensor] | None, loss: LossName,
    attn: list[Tensor] | None = None,
) -> _SplitStats:
    """The forward pass of each member on (x, y), collecting `hidden` and (Transformer)
    `attn` when they are lists."""
    logits = model(x, hidden=hidden) if attn is None else model(x, hidden=hidden, attn=attn)
    acc = (logits.argmax(-1) == y).float().mean(1)
    per = per_example_loss(logits.float(), y, loss)
    return _SplitStats(logits, per, per.mean(1), acc)


def _progress(
    model: nn.Module, train: _SplitStats, attn: list[Tensor] | None,
    layer: dict[str, Tensor],
) -> dict[str, Tensor]:
    """The progress measures (sweepgrok.train.progress_measures) on the training split: the
    metrics/ ones
    returned, the per-layer ones added to `layer`."""
    member = progress.group_weight_norms(model)
    member["logit_norm"] = progress.logit_norm(train.logits)
    member["collapse_share"] = progress.collapse_share(train.per_example)
    layer.update(progress.layer_group_weight_norms(model))
    if attn:
        layer["attn_entropy"] = progress.attention_entropy(attn)
    return member


def fourier_losses_apply(cfg: Config) -> bool:
    """Whether an evaluation measures the restricted and excluded losses: a Transformer on an
    additive Z_p task (add, sub). The paper's circuit is a Transformer's; the MLP is left out."""
    return cfg.model.arch == "transformer" and cfg.task.spec.additive


def _fourier_losses(
    train: tuple[Tensor, Tensor], test: tuple[Tensor, Tensor], freqs: Tensor, loss: LossName
) -> tuple[Tensor, Tensor]:
    """Restricted loss on the test split and excluded loss on the training split (optim.loss),
    (E,) each, from the logits and labels of both splits, which together are all p^2 pairs
    (sweepgrok.train.fourier_losses; freqs (E, K) the key frequencies)."""
    n = train[1].shape[1]
    logits, answers = torch.cat([train[0], test[0]], 1), torch.cat([train[1], test[1]], 1)
    restricted, excluded = fl.restricted_and_excluded_logits(logits, answers, freqs)
    return (per_example_loss(restricted[:, n:], test[1], loss).mean(1),
            per_example_loss(excluded[:, :n], train[1], loss).mean(1))


def _layer_weight_norm(model: Transformer | MLP) -> Tensor:
    """L2 norm of each layer's parameters, per member: (E, L). Layer i is the one whose output
    is hidden representation i: Transformer block i (attention, MLP, norms), MLP hidden layer
    i (weight, bias); the embeddings and the readout belong to no layer."""
    if isinstance(model, Transformer):
        layers = [list(block.parameters()) for block in model.blocks]
    else:
        layers = [[w, b] for w, b in zip(model.weights, model.biases, strict=True)]
    return torch.stack([progress.weight_norm(params) for params in layers], 1)


def _geomdr_eval(hidden: list[Tensor], cfg: GeomDRConfig, like: Tensor) -> Tensor:
    """The GeomDR loss (of kind geomdr.penalty, the one trained on) on the whole training set:
    (E,), NaN (shaped and typed as `like`, (E,)) when GeomDR is off or the member's last
    representation is not finite."""
    if not cfg.enabled or not hidden:
        return torch.full_like(like, math.nan)
    return torch.where(member_finite(hidden[-1]), geomdr_loss(hidden, cfg), math.nan)


def _sample_spectrum(h: Tensor, idx: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The rows `idx` (E, G) of one layer's representation h (E, N, d), non-finite values
    zeroed; whether each member's rows were finite (E,); their covariance eigenvalues in
    float64, descending (E, d)."""
    z = take(h, idx)
    ok = member_finite(z)
    z = finite(z)
    return z, ok, geo.covariance_spectrum(z.double())


def _deff(hidden: list[Tensor], idx: Tensor) -> Tensor:
    """Per layer, D_eff of the rows `idx` (E, G): (E, L); NaN for a member whose
    representation is not finite."""
    out = []
    for h in hidden:
        _, ok, eigs = _sample_spectrum(h, idx)
        out.append(torch.where(ok, geo.participation_ratio(eigs).to(h.dtype), math.nan))
    return torch.stack(out, 1)


def _geometry(hidden: list[Tensor], geo_idx: Tensor, cfg: GeometryConfig) -> dict[str, Tensor]:
    """Per layer, on the fixed subsample: D_eff, rho and the top-eigenvalue fraction, (E, L)
    each; NaN for a member whose representation is not finite."""
    cols: dict[str, list[Tensor]] = {"deff": [], "rho": [], "top_eig_frac": []}
    for h in hidden:
        z, ok, eigs = _sample_spectrum(h, geo_idx)
        values = {
            "deff": geo.participation_ratio(eigs).to(h.dtype),
            "rho": geo.knn_distance(z, cfg.knn_k),
            "top_eig_frac": (eigs[..., 0] / eigs.sum(-1).clamp_min(1e-30)).to(h.dtype),
        }
        for name, v in values.items():
            cols[name].append(torch.where(ok, v, math.nan))
    return {name: torch.stack(vs, 1) for name, vs in cols.items()}
