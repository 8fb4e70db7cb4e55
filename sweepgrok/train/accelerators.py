"""Published grokking accelerators beside the papers' levers: StableMax cross-entropy and the
perpendicular gradient (Prieto et al. 2025, "Grokking at the edge of numerical stability") and
the Grokfast gradient filter (Lee et al. 2024, "Grokfast: accelerated grokking by amplifying
slow gradients").

Every tensor has the leading member axis E (see ``models``): per-tensor reductions are per
member (``flatten(1)``), everything else is elementwise, so members never mix; nothing reads a
value back to the host.

Order in a training step: backward, Grokfast, perpendicular gradient, AdamW. Grokfast filters
the raw gradients, as in its paper (so its state is the same with or without the projection);
the projection comes last so that the gradient AdamW receives has no component along the
current weights, the property it exists for (Grokfast's amplified history was made of past
gradients, not perpendicular to the current weights).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from sweepgrok.config.trial import GrokfastConfig, LossName


def log_stablemax(z: Tensor) -> Tensor:
    """log p over the last axis with p_i = s(z_i) / sum_j s(z_j), s(x) = x + 1 for x >= 0 and
    1 / (1 - x) for x < 0 (StableMax: s replaces exp of the softmax).

    In log space: log s(x) = log1p(x) for x >= 0 and -log1p(-x) below, then a logsumexp of
    the log s. Each branch sees its input clamped to its own side, so the branch not taken stays
    finite (torch.where sends it a zero gradient, and zero times an infinite derivative would
    be NaN)."""
    log_s = torch.where(z >= 0, torch.log1p(z.clamp_min(0)), -torch.log1p(-z.clamp_max(0)))
    return log_s - torch.logsumexp(log_s, dim=-1, keepdim=True)


def per_example_loss(logits: Tensor, y: Tensor, kind: LossName) -> Tensor:
    """Loss of each example for each member: logits (E, N, C), labels y (E, N) -> (E, N).

    cross_entropy: -log softmax(z)_y; stablemax: -log_stablemax(z)_y."""
    if kind == "stablemax":
        return -log_stablemax(logits).gather(-1, y.unsqueeze(-1)).squeeze(-1)
    e, n, c = logits.shape
    return F.cross_entropy(logits.reshape(e * n, c), y.reshape(-1), reduction="none").view(e, n)


@torch.no_grad()
def perpendicular_grad_(params: Sequence[Tensor]) -> None:
    """Replace each parameter's gradient g by g - (g.w / ||w||^2) w, per member (w = that
    member's slice of the tensor, flattened): the part of g along the weights, which only
    rescales them, is removed. Every tensor with a gradient is projected (weights, biases, norm
    gains, embeddings: the paper's rule is per weight tensor, all of them). A member whose
    tensor is all zeros (||w|| = 0, a bias at init) keeps g: there is no direction to remove.

    The paper's equation; the authors' later code (orthograd.py) also rescales the result to
    ||g||, which this does not."""
    for p in params:
        if p.grad is None:
            continue
        w, g = p.flatten(1), p.grad.flatten(1)
        ww = (w * w).sum(1, keepdim=True)
        coef = (w * g).sum(1, keepdim=True) / torch.where(ww > 0, ww, 1.0)
        p.grad.sub_((coef * w).view_as(p.grad))


class GradFilter:
    """The Grokfast filter of one (batched) model and its state.

    ema: h <- alpha h + (1 - alpha) g, then g <- g + lam h; h starts at the first gradient (the
    reference code's initialization, so the first step is (1 + lam) g). ma: the last `window`
    raw gradients are kept, and g <- g + lam * their mean (current one included) once `window`
    gradients have been seen; before that g is left as it is (the reference code's warmup).
    A parameter without a gradient (W_Q, W_K under uniform attention) is skipped, as AdamW
    skips it."""

    def __init__(self, cfg: GrokfastConfig) -> None:
        self.cfg = cfg
        self.seen = 0
        """Gradients filtered so far (ma: the next one goes to ring slot seen % window)."""
        self.slow: dict[int, Tensor] = {}
        """Parameter index -> ema: h, (E, ...); ma: the ring of raw gradients, (window, E, ...)."""

    @torch.no_grad()
    def apply_(self, params: Sequence[Tensor]) -> None:
        """Filter the gradients of `params` (model.parameters(), same order every step)."""
        if self.cfg.kind == "none":
            return
        for i, p in enumerate(params):
            if p.grad is not None:
                self._filter(i, p.grad)
        self.seen += 1

    def _filter(self, i: int, g: Tensor) -> None:
        c = self.cfg
        if c.kind == "ema":
            h = self.slow.get(i)
            if h is None:
                self.slow[i] = h = g.clone()
            else:
                h.mul_(c.alpha).add_(g, alpha=1.0 - c.alpha)
            g.add_(h, alpha=c.lam)
            return
        ring = self.slow.get(i)
        if ring is None:
            self.slow[i] = ring = g.new_zeros((c.window, *g.shape))
        ring[self.seen % c.window] = g
        if self.seen + 1 >= c.window:
            g.add_(ring.mean(0), alpha=c.lam)

    def count_replayed_step(self) -> None:
        """Count a step whose filtering ran inside a replayed CUDA graph (apply_ ran only
        while it was captured)."""
        if self.cfg.kind != "none":
            self.seen += 1

    def select(self, idx: Tensor) -> None:
        """Keep the members `idx` (the trainer's compaction)."""
        axis = 1 if self.cfg.kind == "ma" else 0
        self.slow = {i: t.index_select(axis, idx) for i, t in self.slow.items()}

    def state(self) -> dict[str, Any]:
        """Checkpoint state: plain ints and tensors (loadable with weights_only)."""
        return {"seen": self.seen, "slow": dict(self.slow)}

    def load_state(self, state: Any) -> None:
        """Restore `state()`; ValueError if it is not one."""
        ok = (isinstance(state, dict) and isinstance(state.get("seen"), int)
              and isinstance(state.get("slow"), dict)
              and all(isinstance(k, int) and torch.is_tensor(v) for k, v in state["slow"].items()))
        if not ok:
            raise ValueError("not a Grokfast filter state")
        self.seen, self.slow = state["seen"], dict(state["slow"])
