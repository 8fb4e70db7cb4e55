"""Algorithmic tasks: full operation tables and seeded train/test splits.

Every example is the token sequence ``[a, b, =]`` with ``=`` the token ``n_tokens`` (so the
vocabulary has ``n_tokens + 1`` entries); the label is the answer, an operand value. The MLP
reads only the two operand tokens.

- ``add``, ``sub``, ``mul`` on Z_p: ``(a + b) % p``, ``(a - b) % p``, ``(a * b) % p``; p*p pairs.
- ``div`` on Z_p (p prime): ``a * b^(p-2) % p`` (Fermat inverse), b != 0; p*(p-1) pairs.
- ``s5``: the 120 permutations of {0..4} in lexicographic order (token i = i-th permutation);
  the label is the composition ``(x o y)(i) = x[y[i]]``: apply y first, then x.

Power et al. (2022)'s other binary operations, on Z_p with the pairs their paper uses (every
pair, except y = 0 where a division is involved):

- ``div_odd_sub``: ``x / y`` if y is odd, else ``x - y`` (p prime, y != 0). ``x / y`` is modular
  division (x times y's inverse), as in ``div``; public re-implementations differ (one uses the
  integer floor division x // y), so this is our choice, stated.
- ``sum_sq``: ``x^2 + y^2``; ``quad``: ``x^2 + xy + y^2``; ``quad_x``: ``x^2 + xy + y^2 + x``;
  ``cube_xy``: ``x^3 + xy``; ``cube_xy2_y``: ``x^3 + xy^2 + y`` (all mod p, every pair).
- ``s5_conj``: ``x o y o x^-1``; ``s5_xyx``: ``x o y o x`` (S5, the composition above).

A task is one entry of ``TASKS``: adding one touches nothing else (config's task.name accepts
it, the model sizes its vocabulary from it, the trainer asks it which Fourier measures apply).
No torch import at module level: sweepgrok.config.trial reads TASKS and stays light.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from torch import Tensor

    ZpOp = Callable[[Tensor, Tensor, int], tuple[Tensor, Tensor, Tensor]]
    """(a, b, p) -> the pairs kept and their labels."""


@dataclass(frozen=True)
class Task:
    """What sweepgrok needs to know about one task."""

    table: Callable[[int], tuple[Tensor, Tensor]]
    """All (a, b) operand pairs (M, 2) and their labels (M,), int64, given task.p."""
    n_tokens: Callable[[int], int] = lambda p: p
    """Operand values (= answer classes) given task.p; default p (Z_p)."""
    size: Callable[[int], int] = lambda p: p * p
    """Rows of the table given task.p (without building it: config checks the split with it)."""
    needs_prime: bool = False
    """task.p must be prime (an inverse must exist for every nonzero b)."""
    cyclic: bool = True
    """Operands are Z_p, so the Fourier concentration of the embeddings is measured."""
    additive: bool = False
    """The answer is a + b or a - b in Z_p, each value equally often: the Fourier basis of Z_p
    fits its logits, so Nanda et al.'s restricted and excluded losses are measured (not for
    mul and div, whose group is Z_p^* and whose answers are not balanced: 0 is the answer of
    2p - 1 of mul's pairs)."""


@cache
def s5_elements() -> tuple[tuple[int, ...], ...]:
    """The 120 permutations of (0..4), lexicographic; index = token."""
    return tuple(itertools.permutations(range(5)))


def s5_compose(x: tuple[int, ...], y: tuple[int, ...]) -> tuple[int, ...]:
    """(x o y)(i) = x[y[i]]: apply y, then x."""
    return tuple(x[y[i]] for i in range(len(y)))


def _zp_table(op: ZpOp) -> Callable[[int], tuple[Tensor, Tensor]]:
    """The table of `op` over all pairs of Z_p (op may drop pairs: it returns a, b, labels)."""

    def table(p: int) -> tuple[Tensor, Tensor]:
        import torch

        a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
        a, b, c = op(a.reshape(-1), b.reshape(-1), p)
        return torch.stack([a, b], dim=1), c

    return table


def _div(a: Tensor, b: Tensor, p: int) -> tuple[Tensor, Tensor, Tensor]:
    import torch

    keep = b != 0
    a, b = a[keep], b[keep]
    inv = torch.tensor([pow(int(v), p - 2, p) for v in range(p)])  # Fermat: b^(p-2) = b^-1
    return a, b, (a * inv[b]) % p


def _div_odd_sub(a: Tensor, b: Tensor, p: int) -> tuple[Tensor, Tensor, Tensor]:
    import torch

    a, b, quotient = _div(a, b, p)
    return a, b, torch.where(b % 2 == 1, quotient, (a - b) % p)


def _s5_words(word: Callable[[tuple[int, ...], tuple[int, ...]], tuple[int, ...]]) -> Task:
    """An S5 task whose label is the permutation `word(x, y)`."""

    def table(_p: int) -> tuple[Tensor, Tensor]:
        import torch

        elems = s5_elements()
        index = {e: i for i, e in enumerate(elems)}
        pairs = [(i, j) for i in range(len(elems)) for j in range(len(elems))]
        labels = [index[word(elems[i], elems[j])] for i, j in pairs]
        return torch.tensor(pairs), torch.tensor(labels)

    n = len(s5_elements())
    return Task(table, n_tokens=lambda _p: n, size=lambda _p: n * n, cyclic=False)


def s5_inverse(x: tuple[int, ...]) -> tuple[int, ...]:
    """x^-1: the permutation that sends x[i] back to i."""
    inv = [0] * len(x)
    for i, xi in enumerate(x):
        inv[xi] = i
    return tuple(inv)


def _zp(expr: Callable[[Tensor, Tensor], Tensor]) -> Task:
    """A Z_p task over every pair whose label is expr(a, b) mod p (not balanced, not additive)."""
    return Task(_zp_table(lambda a, b, p: (a, b, expr(a, b) % p)))


TASKS: dict[str, Task] = {
    "add": Task(_zp_table(lambda a, b, p: (a, b, (a + b) % p)), additive=True),
    "sub": Task(_zp_table(lambda a, b, p: (a, b, (a - b) % p)), additive=True),
    "mul": Task(_zp_table(lambda a, b, p: (a, b, (a * b) % p))),
    "div": Task(_zp_table(_div), size=lambda p: p * (p - 1), needs_prime=True),
    "s5": _s5_words(s5_compose),
    "div_odd_sub": Task(_zp_table(_div_odd_sub), size=lambda p: p * (p - 1), needs_prime=True),
    "sum_sq": _zp(lambda a, b: a * a + b * b),
    "quad": _zp(lambda a, b: a * a + a * b + b * b),
    "quad_x": _zp(lambda a, b: a * a + a * b + b * b + a),
    "cube_xy": _zp(lambda a, b: a * a * a + a * b),
    "cube_xy2_y": _zp(lambda a, b: a * a * a + a * b * b + b),
    "s5_conj": _s5_words(lambda x, y: s5_compose(s5_compose(x, y), s5_inverse(x))),
    "s5_xyx": _s5_words(lambda x, y: s5_compose(s5_compose(x, y), x)),
}
"""Task name (task.name) -> its Task."""

if TYPE_CHECKING:
    TaskName = str
else:
    TaskName = Literal[tuple(TASKS)]
"""The task names, as the Literal that config's task.name validates against."""


def operation_table(name: str, p: int) -> tuple[Tensor, Tensor]:
    """All (a, b) pairs of the operation and their labels: (M, 2) and (M,) int64."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}: one of {', '.join(TASKS)}")
    return TASKS[name].table(p)


class SplitSpec(Protocol):
    """What a split needs of the task config (config.TaskConfig has it; a Protocol keeps this
    module below config in the import graph)."""

    @property
    def name(self) -> str: ...
    @property
    def p(self) -> int: ...
    @property
    def train_fraction(self) -> float: ...
    @property
    def data_seed(self) -> int: ...
    @property
    def split_follows_seed(self) -> bool: ...
    @property
    def n_tokens(self) -> int: ...


@dataclass(frozen=True)
class Split:
    """One train/test split: inputs are [a, b, =] token rows, labels the answers."""

    train_x: Tensor  # (N_train, 3) int64
    train_y: Tensor  # (N_train,)
    test_x: Tensor  # (N_test, 3)
    test_y: Tensor  # (N_test,)


def with_eq(pairs: Tensor, eq_token: int) -> Tensor:
    """(M, 2) operand pairs -> (M, 3) sequences [a, b, =]."""
    import torch

    eq = torch.full((pairs.shape[0], 1), eq_token, dtype=pairs.dtype)
    return torch.cat([pairs, eq], dim=1)


def train_size(size: int, train_fraction: float) -> int:
    """Training examples of a split of a `size`-row table: round(train_fraction * size), kept
    within [1, size - 1] so that both sets are non-empty (config refuses a fraction that needs
    the clamp, so a user's value is never silently changed)."""
    return max(1, min(size - 1, round(train_fraction * size)))


def make_split(cfg: SplitSpec, split_seed: int) -> Split:
    """Shuffle the full table with `split_seed` and keep round(train_fraction * M) for training.

    The permutation comes from a private generator, so the split never depends on the global
    RNG or on the init seed.
    """
    import torch

    pairs, labels = operation_table(cfg.name, cfg.p)
    x = with_eq(pairs, cfg.n_tokens)
    g = torch.Generator().manual_seed(split_seed)
    perm = torch.randperm(x.shape[0], generator=g)
    n_train = train_size(x.shape[0], cfg.train_fraction)
    tr, te = perm[:n_train], perm[n_train:]
    return Split(x[tr], labels[tr], x[te], labels[te])


def split_seed_for(cfg: SplitSpec, init_seed: int) -> int:
    """task.data_seed, or the run's init seed when task.split_follows_seed (paper 1)."""
    return init_seed if cfg.split_follows_seed else cfg.data_seed
