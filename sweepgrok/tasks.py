"""Algorithmic tasks: full operation tables and seeded train/test splits.

Every example is the token sequence ``[a, b, =]`` with ``=`` the token ``n_tokens`` (so the
vocabulary has ``n_tokens + 1`` entries); the label is the answer, an operand value. The MLP
reads only the two operand tokens.

- ``add``, ``sub``, ``mul`` on Z_p: ``(a + b) % p``, ``(a - b) % p``, ``(a * b) % p``; p*p pairs.
- ``div`` on Z_p (p prime): ``a * b^(p-2) % p`` (Fermat inverse), b != 0; p*(p-1) pairs.
- ``s5``: the 120 permutations of {0..4} in lexicographic order (token i = i-th permutation);
  the label is the composition ``(x o y)(i) = x[y[i]]``: apply y first, then x.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

import torch
from torch import Tensor

from sweepgrok.config import TaskConfig


@cache
def s5_elements() -> tuple[tuple[int, ...], ...]:
    """The 120 permutations of (0..4), lexicographic; index = token."""
    return tuple(itertools.permutations(range(5)))


def s5_compose(x: tuple[int, ...], y: tuple[int, ...]) -> tuple[int, ...]:
    """(x o y)(i) = x[y[i]]: apply y, then x."""
    return tuple(x[y[i]] for i in range(len(y)))


def operation_table(name: str, p: int) -> tuple[Tensor, Tensor]:
    """All (a, b) pairs of the operation and their labels: (M, 2) and (M,) int64."""
    if name == "s5":
        elems = s5_elements()
        index = {e: i for i, e in enumerate(elems)}
        pairs = [(i, j) for i in range(len(elems)) for j in range(len(elems))]
        labels = [index[s5_compose(elems[i], elems[j])] for i, j in pairs]
        return torch.tensor(pairs), torch.tensor(labels)
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    a, b = a.reshape(-1), b.reshape(-1)
    if name == "add":
        c = (a + b) % p
    elif name == "sub":
        c = (a - b) % p
    elif name == "mul":
        c = (a * b) % p
    elif name == "div":
        keep = b != 0
        a, b = a[keep], b[keep]
        inv = torch.tensor([pow(int(v), p - 2, p) for v in range(p)])
        c = (a * inv[b]) % p
    else:
        raise ValueError(f"unknown task {name!r}")
    return torch.stack([a, b], dim=1), c


@dataclass(frozen=True)
class Split:
    """One train/test split: inputs are [a, b, =] token rows, labels the answers."""

    train_x: Tensor  # (N_train, 3) int64
    train_y: Tensor  # (N_train,)
    test_x: Tensor  # (N_test, 3)
    test_y: Tensor  # (N_test,)


def with_eq(pairs: Tensor, eq_token: int) -> Tensor:
    """(M, 2) operand pairs -> (M, 3) sequences [a, b, =]."""
    eq = torch.full((pairs.shape[0], 1), eq_token, dtype=pairs.dtype)
    return torch.cat([pairs, eq], dim=1)


def make_split(cfg: TaskConfig, split_seed: int) -> Split:
    """Shuffle the full table with `split_seed` and keep round(train_fraction * M) for training.

    The permutation comes from a private generator, so the split never depends on the global
    RNG or on the init seed.
    """
    pairs, labels = operation_table(cfg.name, cfg.p)
    x = with_eq(pairs, cfg.n_tokens)
    g = torch.Generator().manual_seed(split_seed)
    perm = torch.randperm(x.shape[0], generator=g)
    n_train = max(1, min(x.shape[0] - 1, round(cfg.train_fraction * x.shape[0])))
    tr, te = perm[:n_train], perm[n_train:]
    return Split(x[tr], labels[tr], x[te], labels[te])


def split_seed_for(cfg: TaskConfig, init_seed: int) -> int:
    """task.data_seed, or the run's init seed when task.split_follows_seed (paper 1)."""
    return init_seed if cfg.split_follows_seed else cfg.data_seed
