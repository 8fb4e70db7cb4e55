"""Sparse parity (Barak et al. 2022) as a sweepgrok plugin task.

sweepgrok's task protocol: an object with ``table``, ``n_tokens``, ``size`` (and optionally
``n_classes``, ``seq_len``, ``cyclic``, ``additive``, ``Options`` or ``validate_options``), each
callable taking the trial's task config; this task reads its own keys from ``task.options``.
It needs nothing of sweepgrok: a plain class does.
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator


class Options(BaseModel):
    """task.options of plugin_parity."""

    model_config = ConfigDict(extra="forbid", strict=True)
    bits: int = Field(12, ge=2, le=20)
    """Input bits n."""
    relevant: int = Field(3, ge=1)
    """Relevant bits k: the first k (Barak et al.'s convention, without loss of generality)."""
    samples: int = Field(1000, ge=2)
    """Distinct inputs in the table (train and test), drawn from task.data_seed."""

    @model_validator(mode="after")
    def _fits(self) -> Options:
        if self.relevant > self.bits or self.samples > 2**self.bits:
            raise ValueError("needs relevant <= bits and samples <= 2^bits")
        return self


def _options(cfg: Any) -> Options:
    return Options.model_validate(dict(cfg.options))


class SparseParity:
    """The task: tokens 0 and 1, two classes; no Fourier measures (cyclic false)."""

    Options = Options
    cyclic = False

    def table(self, cfg: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """`samples` distinct inputs of `bits` bits (an enumeration's seeded permutation) and
        the parity of the first `relevant` bits."""
        o = _options(cfg)
        g = torch.Generator().manual_seed(cfg.data_seed)
        index = torch.randperm(2**o.bits, generator=g)[: o.samples]
        x = (index.unsqueeze(1) >> torch.arange(o.bits - 1, -1, -1)) & 1
        return x, x[:, : o.relevant].sum(1) % 2

    def n_tokens(self, cfg: Any) -> int:
        return 2

    def n_classes(self, cfg: Any) -> int:
        return 2

    def seq_len(self, cfg: Any) -> int:
        return _options(cfg).bits

    def size(self, cfg: Any) -> int:
        return _options(cfg).samples


sparse_parity = SparseParity()
