"""Progress measures of training, per member (E members), from the model and its logits.

Pure functions of device tensors, read back with the rest of an evaluation
(sweepgrok.train.evaluation):

- weight norms per parameter group: the token embedding, the positional embedding and the
  unembedding (whole model, (E,) each), and per Transformer layer the attention matrices W_Q,
  W_K, W_V, W_O and the MLP's input (W_in, b_in) and output (W_out, b_out) ((E, L) each);
- the logit norm: mean over examples of the L2 norm of an example's logit vector;
- the softmax-collapse share (Prieto et al. 2025, "Grokking at the edge of numerical
  stability"): the fraction of examples whose float32 loss is exactly 0, where the gradient of
  that example has vanished in floating point;
- the attention entropy per layer and head of the readout position's weights over the 3
  positions, in nats: log(3) for uniform attention, 0 for attention on one position.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

from sweepgrok.train.models import MLP, Block, Transformer

LAYER_GROUPS = {
    "weight_norm_q": ("w_q",),
    "weight_norm_k": ("w_k",),
    "weight_norm_v": ("w_v",),
    "weight_norm_o": ("w_o",),
    "weight_norm_mlp_in": ("w_in", "b_in"),
    "weight_norm_mlp_out": ("w_out", "b_out"),
}
"""geometry/ column -> the parameters of a Transformer block it covers (the block's norm gains
and biases are in no group; the layer's ``weight_norm`` covers them too)."""


def weight_norm(params: Iterable[Tensor]) -> Tensor:
    """L2 norm of each member's parameters, all taken together: (E,)."""
    return torch.stack([p.pow(2).flatten(1).sum(1) for p in params]).sum(0).sqrt()


def group_weight_norms(model: nn.Module) -> dict[str, Tensor]:
    """The whole-model groups, (E,) each: ``weight_norm_embed`` (the token embedding W_E, the
    ``=`` row included), ``weight_norm_unembed`` (the unembedding W_U; the MLP's readout bias
    too) and, Transformer only, ``weight_norm_pos`` (the positional embedding). The
    Transformer's embedding norm (layernorm/rmsnorm gain and bias) is in no group. None for
    a plugin model, whose parameter groups sweepgrok does not know."""
    if isinstance(model, Transformer):
        return {
            "weight_norm_embed": weight_norm([model.w_e]),
            "weight_norm_pos": weight_norm([model.w_pos]),
            "weight_norm_unembed": weight_norm([model.unembed.w_u]),
        }
    if not isinstance(model, MLP):
        return {}
    return {
        "weight_norm_embed": weight_norm([model.w_e]),
        "weight_norm_unembed": weight_norm([model.w_u, model.b_u]),
    }


def layer_group_weight_norms(model: nn.Module) -> dict[str, Tensor]:
    """Per Transformer block, the norms of LAYER_GROUPS, (E, L) each; none for the MLP, whose
    hidden layer is one weight and bias (geometry/'s ``weight_norm``)."""
    if not isinstance(model, Transformer):
        return {}
    blocks: list[Block] = list(model.blocks)  # type: ignore[arg-type]  # ModuleList of Blocks
    return {
        column: torch.stack(
            [weight_norm([getattr(block, name) for name in names]) for block in blocks], 1
        )
        for column, names in LAYER_GROUPS.items()
    }


def logit_norm(logits: Tensor) -> Tensor:
    """Mean over examples of ``||logits_n||_2``: logits (E, N, C) -> (E,)."""
    return torch.linalg.vector_norm(logits.float(), dim=-1).mean(1)


def collapse_share(per_example: Tensor) -> Tensor:
    """Fraction of examples whose loss is exactly 0 in float32: per_example (E, N) -> (E,).

    The loss must have been computed in float32 (cast the logits, not the loss: a float64
    loss that is tiny but nonzero would round to 0 here and count)."""
    if per_example.dtype != torch.float32:
        raise ValueError(f"collapse_share needs float32 losses, got {per_example.dtype}")
    return (per_example == 0).float().mean(1)


def attention_entropy(weights: list[Tensor]) -> Tensor:
    """Per layer and head, the mean over examples of ``-sum_s p_s log p_s`` (nats, 0 log 0 =
    0) of the readout position's attention weights: L tensors (E, N, H, S) -> (E, L, H)."""
    per_layer = [-torch.xlogy(w, w).sum(-1).mean(1) for w in weights]  # (E, H) each
    return torch.stack(per_layer, 1)
