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

Sparse parity (Barak et al. 2022), ``sparse_parity``: task.samples distinct inputs of task.bits
bits (tokens 0, 1; the sequence is the bits then ``=``), the label the parity of the
task.relevant_bits relevant bits; the relevant bits and the sample are drawn from
task.data_seed (``_parity_table``).

A built-in task is one entry of ``TASKS``: adding one touches nothing else (config's task.name
accepts it, the model sizes its vocabulary from it, the trainer asks it which Fourier measures
apply). A task from outside the package is a ``Task`` (or an object with the same attributes)
named by import path or entry point (sweepgrok.config.plugins, docs/extending.md).
No torch import at module level: sweepgrok.config.trial reads TASKS and stays light.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch
    from torch import Tensor

    ZpOp = Callable[[Tensor, Tensor, int], tuple[Tensor, Tensor, Tensor]]
    """(a, b, p) -> the pairs kept and their labels."""


class TaskKeys(Protocol):
    """What a task reads of its config (config.TaskConfig has it; a Protocol keeps this module
    below config in the import graph). Built-in tasks read p (Z_p) or the sparse parity keys;
    a plugin reads its own keys from `options` (docs/extending.md)."""

    @property
    def p(self) -> int: ...
    @property
    def data_seed(self) -> int: ...
    @property
    def bits(self) -> int: ...
    @property
    def relevant_bits(self) -> int: ...
    @property
    def samples(self) -> int: ...
    @property
    def options(self) -> Mapping[str, Any]: ...


def _p(cfg: TaskKeys) -> int:
    return cfg.p


def _p_squared(cfg: TaskKeys) -> int:
    return cfg.p * cfg.p


@dataclass(frozen=True)
class Task:
    """What sweepgrok needs to know about one task: the protocol a plugin task follows too
    (docs/extending.md). Every callable takes the trial's task config (TaskKeys)."""

    table: Callable[[Any], tuple[Tensor, Tensor]]
    """The whole table: inputs (M, L) int64 tokens in [0, n_tokens) and labels (M,) int64 in
    [0, n_classes); L is the same for every row (2 for the binary operations)."""
    n_tokens: Callable[[Any], int] = _p
    """Input token values (the vocabulary without the '=' token, which is n_tokens); default p."""
    size: Callable[[Any], int] = _p_squared
    """Rows of the table (without building it: config checks the split with it)."""
    n_classes: Callable[[Any], int] | None = None
    """Label classes; default (None) n_tokens: the answer is an operand value."""
    seq_len: Callable[[Any], int] = lambda _c: 2
    """Input tokens per row of the table (before '='); default 2 (a and b)."""
    needs_prime: bool = False
    """task.p must be prime (an inverse must exist for every nonzero b)."""
    cyclic: bool = False
    """Tokens are Z_p's elements in order, so the Fourier concentration of the embeddings is
    measured."""
    additive: bool = False
    """The answer is a + b or a - b in Z_p, each value equally often: the Fourier basis of Z_p
    fits its logits, so Nanda et al.'s restricted and excluded losses are measured (not for
    mul and div, whose group is Z_p^* and whose answers are not balanced: 0 is the answer of
    2p - 1 of mul's pairs)."""
    uses_p: bool = True
    """The table depends on task.p (messages name it)."""
    validate_options: Callable[[Mapping[str, Any]], Any] | None = None
    """Checks task.options (raises ValueError, TypeError or a pydantic ValidationError); None:
    the task takes no options."""

    def classes(self, cfg: Any) -> int:
        """Label classes of the task under `cfg`."""
        return (self.n_classes or self.n_tokens)(cfg)


@cache
def s5_elements() -> tuple[tuple[int, ...], ...]:
    """The 120 permutations of (0..4), lexicographic; index = token."""
    return tuple(itertools.permutations(range(5)))


def s5_compose(x: tuple[int, ...], y: tuple[int, ...]) -> tuple[int, ...]:
    """(x o y)(i) = x[y[i]]: apply y, then x."""
    return tuple(x[y[i]] for i in range(len(y)))


def _zp_table(op: ZpOp) -> Callable[[TaskKeys], tuple[Tensor, Tensor]]:
    """The table of `op` over all pairs of Z_p (op may drop pairs: it returns a, b, labels)."""

    def table(cfg: TaskKeys) -> tuple[Tensor, Tensor]:
        import torch

        p = cfg.p
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

    def table(_cfg: TaskKeys) -> tuple[Tensor, Tensor]:
        import torch

        elems = s5_elements()
        index = {e: i for i, e in enumerate(elems)}
        pairs = [(i, j) for i in range(len(elems)) for j in range(len(elems))]
        labels = [index[word(elems[i], elems[j])] for i, j in pairs]
        return torch.tensor(pairs), torch.tensor(labels)

    n = len(s5_elements())
    return Task(table, n_tokens=lambda _c: n, size=lambda _c: n * n, uses_p=False)


def s5_inverse(x: tuple[int, ...]) -> tuple[int, ...]:
    """x^-1: the permutation that sends x[i] back to i."""
    inv = [0] * len(x)
    for i, xi in enumerate(x):
        inv[xi] = i
    return tuple(inv)


def _zp(expr: Callable[[Tensor, Tensor], Tensor]) -> Task:
    """A Z_p task over every pair whose label is expr(a, b) mod p (not balanced, not additive)."""
    return Task(_zp_table(lambda a, b, p: (a, b, expr(a, b) % p)), cyclic=True)


MAX_ENUMERATED_BITS = 20
"""Up to this many bits, sparse parity draws its sample from an enumeration of all 2^n inputs
(exactly without replacement); above it, from random rows with the duplicates dropped."""


def parity_relevant_bits(cfg: TaskKeys) -> list[int]:
    """The k relevant bit positions of sparse parity, ascending: the first task.relevant_bits of
    a permutation of the task.bits positions drawn from task.data_seed."""
    import torch

    g = torch.Generator().manual_seed(cfg.data_seed)
    return sorted(torch.randperm(cfg.bits, generator=g)[: cfg.relevant_bits].tolist())


def _distinct_bit_rows(bits: int, count: int, g: torch.Generator) -> Tensor:
    """`count` distinct rows of `bits` bits (int64 0/1), uniform, drawn with `g`."""
    import torch

    if bits <= MAX_ENUMERATED_BITS:
        index = torch.randperm(2**bits, generator=g)[:count]
        shifts = torch.arange(bits - 1, -1, -1)  # column 0 is the most significant bit
        return (index.unsqueeze(1) >> shifts) & 1
    rows = torch.empty(0, bits, dtype=torch.int64)
    while rows.shape[0] < count:  # 2^bits > 10^6 rows: a redraw is rare
        more = torch.randint(0, 2, (count, bits), generator=g)
        rows = torch.unique(torch.cat([rows, more]), dim=0)  # sorted: deterministic
    return rows[torch.randperm(rows.shape[0], generator=g)[:count]]


def _parity_table(cfg: TaskKeys) -> tuple[Tensor, Tensor]:
    """Sparse parity (Barak et al. 2022): task.samples distinct inputs of task.bits bits, the
    label the parity (sum mod 2) of the task.relevant_bits relevant ones. The relevant bits,
    then the sample, are drawn from one generator seeded with task.data_seed, so every run of a
    trial (any train.seed) learns the same function on the same pool of inputs."""
    import torch

    g = torch.Generator().manual_seed(cfg.data_seed)
    relevant = torch.randperm(cfg.bits, generator=g)[: cfg.relevant_bits]
    x = _distinct_bit_rows(cfg.bits, cfg.samples, g)
    return x, x[:, relevant].sum(1) % 2


SPARSE_PARITY = Task(_parity_table, n_tokens=lambda _c: 2, size=lambda c: c.samples,
                     seq_len=lambda c: c.bits, uses_p=False)
"""Inputs are the bits as tokens 0 and 1; two classes (the answer is a bit too)."""


TASKS: dict[str, Task] = {
    "add": Task(_zp_table(lambda a, b, p: (a, b, (a + b) % p)), cyclic=True, additive=True),
    "sub": Task(_zp_table(lambda a, b, p: (a, b, (a - b) % p)), cyclic=True, additive=True),
    "mul": _zp(lambda a, b: a * b),
    "div": Task(_zp_table(_div), size=lambda c: c.p * (c.p - 1), needs_prime=True, cyclic=True),
    "s5": _s5_words(s5_compose),
    "div_odd_sub": Task(
        _zp_table(_div_odd_sub), size=lambda c: c.p * (c.p - 1), needs_prime=True, cyclic=True),
    "sum_sq": _zp(lambda a, b: a * a + b * b),
    "quad": _zp(lambda a, b: a * a + a * b + b * b),
    "quad_x": _zp(lambda a, b: a * a + a * b + b * b + a),
    "cube_xy": _zp(lambda a, b: a * a * a + a * b),
    "cube_xy2_y": _zp(lambda a, b: a * a * a + a * b * b + b),
    "s5_conj": _s5_words(lambda x, y: s5_compose(s5_compose(x, y), s5_inverse(x))),
    "s5_xyx": _s5_words(lambda x, y: s5_compose(s5_compose(x, y), x)),
    "sparse_parity": SPARSE_PARITY,
}
"""Task name (task.name) -> its Task."""



def operation_table(name: str, p: int) -> tuple[Tensor, Tensor]:
    """All (a, b) pairs of a built-in binary operation and their labels: (M, 2) and (M,)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}: one of {', '.join(TASKS)}")
    return TASKS[name].table(SimpleNamespace(p=p, options={}))


class SplitSpec(TaskKeys, Protocol):
    """What a split needs of the task config (config.TaskConfig has it; a Protocol keeps this
    module below config in the import graph)."""

    @property
    def name(self) -> str: ...
    @property
    def spec(self) -> Task: ...
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
    """One train/test split: inputs are the table's token rows with '=' appended ([a, b, =]
    for a binary operation), labels the answers."""

    train_x: Tensor  # (N_train, L + 1) int64
    train_y: Tensor  # (N_train,)
    test_x: Tensor  # (N_test, L + 1)
    test_y: Tensor  # (N_test,)


def with_eq(pairs: Tensor, eq_token: int) -> Tensor:
    """(M, L) input rows -> (M, L + 1) sequences ending in '=' ([a, b, =] for L = 2)."""
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

    pairs, labels = cfg.spec.table(cfg)
    _check_table(cfg, pairs, labels)
    x = with_eq(pairs, cfg.n_tokens)
    g = torch.Generator().manual_seed(split_seed)
    perm = torch.randperm(x.shape[0], generator=g)
    n_train = train_size(x.shape[0], cfg.train_fraction)
    tr, te = perm[:n_train], perm[n_train:]
    return Split(x[tr], labels[tr], x[te], labels[te])


def _check_table(cfg: SplitSpec, inputs: Tensor, labels: Tensor) -> None:
    """A task's table against what it declares (a plugin's mistake found before training)."""
    import torch

    spec = cfg.spec
    want = (spec.size(cfg), spec.seq_len(cfg))
    problems = []
    if inputs.dtype != torch.int64 or labels.dtype != torch.int64:
        problems.append(f"inputs and labels must be int64 (got {inputs.dtype}, {labels.dtype})")
    if inputs.dim() != 2 or tuple(inputs.shape) != want or tuple(labels.shape) != want[:1]:
        problems.append(f"inputs must be (size, seq_len) = {want} and labels ({want[0]},) "
                        f"(got {tuple(inputs.shape)}, {tuple(labels.shape)})")
    elif inputs.numel() and not 0 <= int(inputs.min()) <= int(inputs.max()) < spec.n_tokens(cfg):
        problems.append(f"input tokens must be in [0, n_tokens = {spec.n_tokens(cfg)})")
    elif labels.numel() and not 0 <= int(labels.min()) <= int(labels.max()) < spec.classes(cfg):
        problems.append(f"labels must be in [0, n_classes = {spec.classes(cfg)})")
    if problems:
        raise ValueError(f"task {cfg.name}: its table does not match it: " + "; ".join(problems))


def split_seed_for(cfg: SplitSpec, init_seed: int) -> int:
    """task.data_seed, or the run's init seed when task.split_follows_seed (paper 1)."""
    return init_seed if cfg.split_follows_seed else cfg.data_seed
