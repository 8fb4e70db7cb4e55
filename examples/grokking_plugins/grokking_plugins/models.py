"""A small MLP as a sweepgrok plugin model: the input tokens one-hot, one hidden ReLU layer of
``model.options.width`` units, a linear readout.

sweepgrok's model protocol: ``factory(cfg, n_tokens, n_classes, seeds, seq_len=...)`` returns
an ``nn.Module`` for len(seeds) members trained in lockstep: every parameter has a leading
member axis E, and ``forward(x (E, N, seq_len + 1), hidden=None)`` returns logits
(E, N, n_classes), appending each hidden representation (E, N, d) to ``hidden`` when it is a
list (geometry and GeomDR read them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor, nn


class Options(BaseModel):
    """model.options of small_mlp."""

    model_config = ConfigDict(extra="forbid", strict=True)
    width: int = Field(64, ge=1, le=4096)
    """Hidden units."""


def _uniform(g: torch.Generator, shape: tuple[int, ...], fan_in: int) -> Tensor:
    bound = 1.0 / math.sqrt(fan_in)
    return (torch.rand(shape, generator=g) * 2 - 1) * bound


class SmallMLP(nn.Module):
    """One hidden layer over the one-hot input tokens (the '=' token left out), per member."""

    Options = Options

    def __init__(self, cfg: Any, n_tokens: int, n_classes: int, seeds: Sequence[int],
                 seq_len: int = 2) -> None:
        super().__init__()
        width = Options.model_validate(dict(cfg.options)).width
        d_in = seq_len * n_tokens
        gens = [torch.Generator().manual_seed(s) for s in seeds]  # a member's init: its seed
        self.n_tokens = n_tokens
        self.w1 = nn.Parameter(torch.stack([_uniform(g, (d_in, width), d_in) for g in gens]))
        self.b1 = nn.Parameter(torch.stack([_uniform(g, (width,), d_in) for g in gens]))
        self.w2 = nn.Parameter(torch.stack([_uniform(g, (width, n_classes), width) for g in gens]))
        self.b2 = nn.Parameter(torch.stack([_uniform(g, (n_classes,), width) for g in gens]))

    def forward(self, x: Tensor, *, hidden: list[Tensor] | None = None) -> Tensor:
        e, n = x.shape[:2]
        onehot = nn.functional.one_hot(x[:, :, :-1], self.n_tokens).reshape(e, n, -1)
        h = torch.baddbmm(self.b1.unsqueeze(1), onehot.to(self.w1.dtype), self.w1).relu()
        if hidden is not None:
            hidden.append(h)
        return torch.baddbmm(self.b2.unsqueeze(1), h, self.w2)
