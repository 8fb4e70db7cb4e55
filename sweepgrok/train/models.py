"""The paper-1 Transformer and the paper-2 MLP, as *ensembles*: every parameter has a leading
member axis E, one member per init seed, so k seeds train in lockstep as one batched model
(E = 1 is an ordinary single run). Members never mix: every op is batched over E.

Shapes: E members, N examples, S = 3 positions ([a, b, =]), d = d_model, H heads,
V = vocabulary (n_tokens + 1 with the ``=`` token), R = S * V (one row per (position, token)).

Transformer (public code of paper 1): token + learned positional embedding, ``n_layers`` blocks of
attention (Q/K/V/O without bias, no causal mask) and a ReLU MLP with biases; the norm *replaces*
the stream after the embedding, after ``h + attn(h)`` and after ``h + mlp(h)``; readout at the
last position; unembedding without bias (linear) or ``tau * cos(h, w_c)`` (cosine).

Two forward paths compute the same function (``tests/train/test_models_fast_path.py`` proves it):

- ``fast=False``, the plain reference: every position goes through every block.
- ``fast=True`` (default) skips work that cannot change the logits, exactly:
  * the last block computes only the readout position (the readout depends on the other
    positions only through their keys and values);
  * the first block reads everything it needs from per-vocabulary tables. After the embedding
    norm the stream at a position depends only on (position, token), so K, V and the
    embedded stream are computed once per table row (R = 3 * 114 rows at Z_113 instead of
    3 * N = 11,490), and attention scores once per (query row, key row) pair; examples only
    gather rows. Uniform attention folds V @ W_O into the table too. Gradients flow through
    the gathers (index_select, backward index_add) into W_E, W_pos, W_Q, W_K, W_V, W_O.
  * the MLP's first layer, concat(E[a], E[b]) @ W_1 = (E @ W_1[:d])[a] + (E @ W_1[d:])[b],
    becomes two gathers from (V, d_mlp) tables.
  What remains per example is the irreducible part: the first block's MLP (and W_O for softmax
  attention), the later blocks, and the unembedding.

Init reproduces PyTorch's defaults member by member from the member's seed: ``nn.Linear``
weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)), embeddings N(0, 1), norm gains 1,
layernorm biases 0. So a member's init depends only on its own seed, never on E.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import cast, get_args

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sweepgrok.config.plugins import BUILTIN_ARCHS, check_model
from sweepgrok.config.trial import Config, ModelConfig, NormName

N_POS = 3  # [a, b, =]: the positions of a binary operation's input (seq_len 2, then =)


class _Init:
    """Draws one member's parameters in a fixed order from its own generator."""

    def __init__(self, seed: int) -> None:
        self.g = torch.Generator().manual_seed(seed)

    def uniform(self, shape: Sequence[int], fan_in: int) -> Tensor:
        bound = 1.0 / math.sqrt(fan_in)
        return (torch.rand(tuple(shape), generator=self.g) * 2 - 1) * bound

    def normal(self, shape: Sequence[int]) -> Tensor:
        return torch.randn(tuple(shape), generator=self.g)


def _stack(tensors: list[Tensor]) -> nn.Parameter:
    return nn.Parameter(torch.stack(tensors))


def bmm(h: Tensor, w: Tensor) -> Tensor:
    """(E, ..., d_in) @ (E, d_in, d_out) -> (E, ..., d_out), as one batched GEMM per call."""
    e, d_in = h.shape[0], h.shape[-1]
    out = torch.bmm(h.reshape(e, -1, d_in), w)
    return out.reshape(*h.shape[:-1], w.shape[-1])


def linear(h: Tensor, w: Tensor, b: Tensor, relu: bool = False) -> Tensor:
    """h @ w + b with the bias fused into the GEMM (baddbmm: no separate add pass over the
    (E, N, d_out) output), then ReLU if `relu`. h (E, ..., d_in), w (E, d_in, d_out), b (E, d_out).

    The ReLU is in place on the fresh GEMM output, which its backward does not need (saves an
    allocation and a pass), and before the reshape: in place on a *view* would make autograd
    rebuild the base in backward (zeros + two copies + a clone of the (E, N, d_out) tensor)."""
    e, d_in = h.shape[0], h.shape[-1]
    out = torch.baddbmm(b.unsqueeze(1), h.reshape(e, -1, d_in), w)
    if relu:
        out = out.relu_()
    return out.reshape(*h.shape[:-1], w.shape[-1])


def _bias(b: Tensor, like: Tensor) -> Tensor:
    """(E, d) bias viewed to broadcast against (E, ..., d)."""
    return b.view(b.shape[0], *([1] * (like.dim() - 2)), b.shape[1])


ONE_HOT_BYTES = 1 << 28
"""Largest one-hot operand (bytes) that gather_rows builds on CUDA; above it, index_select."""


def gather_rows(table: Tensor, idx: Tensor) -> Tensor:
    """Per-member row lookup: table (E, R, *f), idx (E, ...) int64 in [0, R) -> (E, ..., *f).

    One index_select on the flattened (E * R, F) table (member offsets added to idx); its
    backward is one index_add (deterministic on CPU, measured the fastest of advanced indexing,
    gather and embedding for these shapes). On CUDA, while the one-hot operand stays small,
    the product with the one-hot rows instead (gather_rows_one_hot)."""
    e, r = table.shape[:2]
    if table.is_cuda and idx.numel() * r * table.element_size() <= ONE_HOT_BYTES:
        return gather_rows_one_hot(table, idx)
    offsets = torch.arange(0, e * r, r, device=idx.device).view(e, *([1] * (idx.dim() - 1)))
    rows = table.reshape(e * r, -1).index_select(0, (idx + offsets).reshape(-1))
    return rows.view(*idx.shape, *table.shape[2:])


def per_example_scores(table: Tensor, idx: Tensor) -> bool:
    """Whether softmax attention from tables (``Block._attention_table``) computes each
    example's scores from its gathered query and key rows instead of gathering them from the
    (E, R_q R, H) table of every pair: on CUDA, while the key/value rows are one-hot products
    (gather_rows). Why: the pair table has R_q R = 39K rows at Z_113, and deterministic
    index_select's backward on it was 47% of a one-seed paper-1 step's GPU time on an H200
    (0.67 of 1.43 ms); the per-example scores cost 3 S d multiply-adds per example, and their
    gathers' backward is a GEMM. On a CPU, and at large E (index_select rows), the pair table
    stays (CPU numerics are pinned by the golden tests)."""
    return table.is_cuda and idx.numel() * table.shape[1] * table.element_size() <= ONE_HOT_BYTES


def gather_rows_one_hot(table: Tensor, idx: Tensor) -> Tensor:
    """gather_rows as one batched product (E, M, R) one-hot @ (E, R, F): exact in float32
    (each output is one entry times 1; torch's default float32 matmul precision, no TF32).

    Why on CUDA: with deterministic kernels (train.deterministic), index_select's backward is a
    sort-based index_put that serialises repeated indices, and every table row is looked up
    thousands of times: on an H200 it took 83% of a paper-1 step's GPU time (two lookups,
    1.8 ms each). The product's backward is a GEMM, deterministic and fast. The one-hot is an
    elementwise comparison: no host sync (one_hot's range check would be one)."""
    e, r = table.shape[:2]
    flat = idx.reshape(e, -1, 1)
    hot = (flat == torch.arange(r, device=idx.device)).to(table.dtype)  # (E, M, R)
    rows = torch.bmm(hot, table.reshape(e, r, -1))
    return rows.view(*idx.shape, *table.shape[2:])


class Norm(nn.Module):
    """none | layernorm | rmsnorm (learnable gain, layernorm also a bias) | sphere (h/||h||);
    `eps` is layernorm's and rmsnorm's epsilon (`model.norm_eps`)."""

    def __init__(self, kind: str, n_members: int, d: int, eps: float = 1e-5) -> None:
        super().__init__()
        if kind not in get_args(NormName):
            raise ValueError(f"unknown norm {kind!r}: one of {', '.join(get_args(NormName))}")
        self.kind = kind
        self.eps = eps
        if kind in ("layernorm", "rmsnorm"):
            self.gain = nn.Parameter(torch.ones(n_members, d))
        if kind == "layernorm":
            self.bias = nn.Parameter(torch.zeros(n_members, d))

    def forward(self, h: Tensor) -> Tensor:
        if self.kind == "none":
            return h
        if self.kind == "sphere":
            return F.normalize(h, dim=-1)
        if self.kind == "layernorm":
            h = F.layer_norm(h, h.shape[-1:], eps=self.eps)
            return h * _bias(self.gain, h) + _bias(self.bias, h)
        if self.kind == "rmsnorm":
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
            return h * _bias(self.gain, h)
        raise ValueError(f"unknown norm {self.kind!r}")


class Block(nn.Module):
    """Attention then MLP, each followed by the norm that replaces the stream."""

    def __init__(self, cfg: ModelConfig, inits: list[_Init]) -> None:
        super().__init__()
        d, m, e = cfg.d_model, cfg.d_mlp, len(inits)
        self.n_heads, self.uniform = cfg.n_heads, cfg.attention == "uniform"
        # Weights are stored (d_in, d_out) so that h @ W needs no transpose.
        self.w_q = _stack([i.uniform((d, d), d) for i in inits])
        self.w_k = _stack([i.uniform((d, d), d) for i in inits])
        self.w_v = _stack([i.uniform((d, d), d) for i in inits])
        self.w_o = _stack([i.uniform((d, d), d) for i in inits])
        self.w_in = _stack([i.uniform((d, m), d) for i in inits])
        self.b_in = _stack([i.uniform((m,), d) for i in inits])
        self.w_out = _stack([i.uniform((m, d), m) for i in inits])
        self.b_out = _stack([i.uniform((d,), m) for i in inits])
        self.norm_attn = Norm(cfg.norm, e, d, cfg.norm_eps)
        self.norm_mlp = Norm(cfg.norm, e, d, cfg.norm_eps)

    # ---- plain path: the stream of every example ---------------------------------------

    def attention(self, h: Tensor, last_only: bool, attn: list[Tensor] | None = None) -> Tensor:
        """h (E, N, S, d) -> attention output (E, N, S', d), S' = 1 if last_only else S.
        `attn` (a list) receives the readout query's weights over the S keys, (E, N, H, S)."""
        e, n, s, d = h.shape
        nh, dh = self.n_heads, d // self.n_heads
        v = bmm(h, self.w_v).view(e, n, s, nh, dh)
        if self.uniform:
            # Scores forced to 0: softmax gives weight 1/S to every position.
            if attn is not None:
                attn.append(h.new_full((e, n, nh, s), 1.0 / s))
            z = v.mean(dim=2, keepdim=True)
            if not last_only:
                z = z.expand(e, n, s, nh, dh)
        else:
            hq = h[:, :, -1:] if last_only else h
            q = bmm(hq, self.w_q).view(e, n, hq.shape[2], nh, dh)
            k = bmm(h, self.w_k).view(e, n, s, nh, dh)
            scores = torch.einsum("enqhc,enkhc->enhqk", q, k) / math.sqrt(dh)
            weights = scores.softmax(-1)  # (E, N, H, S', S)
            if attn is not None:
                attn.append(weights[:, :, :, -1])
            z = torch.einsum("enhqk,enkhc->enqhc", weights, v)
        return bmm(z.reshape(e, n, z.shape[2], d), self.w_o)

    def forward(
        self, h: Tensor, last_only: bool = False, attn: list[Tensor] | None = None
    ) -> Tensor:
        """(E, N, S, d) -> (E, N, S', d). last_only: only the readout position continues
        (exact: the readout depends on other positions only through keys and values).
        `attn`: see ``attention``."""
        a = self.attention(h, last_only, attn)
        return self.mlp((h[:, :, -1:] if last_only else h), a)

    def mlp(self, h: Tensor, a: Tensor) -> Tensor:
        """norm(h + a), then norm(h + MLP(h)): (E, N, S', d) -> (E, N, S', d)."""
        h = self.norm_attn(h + a)
        mid = linear(h, self.w_in, self.b_in, relu=True)  # (E, N, S', d_mlp)
        return self.norm_mlp(h + linear(mid, self.w_out, self.b_out))

    # ---- fast path: the first block from per-(position, token) tables -------------------

    def forward_table(
        self, table: Tensor, idx: Tensor, last_only: bool, attn: list[Tensor] | None = None
    ) -> Tensor:
        """First block without per-example Q/K/V GEMMs.

        table (E, R, d): the embedded, normed stream of every (position, token) row;
        idx (E, N, S): each example's row per position (s * V + token).
        -> (E, N, S', d), the same as ``forward(table[idx], last_only, attn)``."""
        q_idx = idx[:, :, -1:] if last_only else idx  # (E, N, S') rows of the queries
        h = gather_rows(table, q_idx)  # (E, N, S', d) residual stream
        # Queried rows: those of the last position only (the rows are position-major).
        q_lo = (idx.shape[2] - 1) * table.shape[1] // idx.shape[2] if last_only else 0
        if self.uniform:
            if attn is not None:
                e, n, s = idx.shape
                attn.append(table.new_full((e, n, self.n_heads, s), 1.0 / s))
            # Every query averages V @ W_O over the 3 positions: fold W_O into the table.
            # The 1/S weight goes into the (R, d) table, not onto the (N, d) sum.
            vo = bmm(bmm(table, self.w_v), self.w_o) / idx.shape[2]  # (E, R, d)
            a = gather_rows(vo, idx[:, :, 0])
            for s in range(1, idx.shape[2]):
                a = a + gather_rows(vo, idx[:, :, s])
            a = a.unsqueeze(2)  # (E, N, 1, d)
            if not last_only:
                a = a.expand_as(h)
        else:
            a = self._attention_table(table, idx, q_idx, q_lo, attn)
        return self.mlp(h, a)

    def _attention_table(
        self, table: Tensor, idx: Tensor, q_idx: Tensor, q_lo: int, attn: list[Tensor] | None
    ) -> Tensor:
        """Softmax attention from tables: the scores of every (query row, key row) pair are
        one (E, R_q, R, H) table (R_q = V rows of the `=` position when only the readout is
        queried: R_q R d = 5M MACs at Z_113 against N (d^2 + 3 d^2) = 250M for per-example
        Q and K); examples gather their S' x S scores and S value rows. -> (E, N, S', d)."""
        e, r, d = table.shape
        n, s, sq = idx.shape[1], idx.shape[2], q_idx.shape[2]
        nh, dh = self.n_heads, d // self.n_heads
        if per_example_scores(table, idx):
            return self._attention_rows(table, idx, q_idx, q_lo, attn)
        q = bmm(table[:, q_lo:], self.w_q).view(e, r - q_lo, nh, dh)  # (E, R_q, H, dh)
        k = bmm(table, self.w_k).view(e, r, nh, dh)  # (E, R, H, dh)
        scores = torch.einsum("eqhc,ekhc->eqkh", q, k) / math.sqrt(dh)  # (E, R_q, R, H)
        pair = (q_idx - q_lo).unsqueeze(-1) * r + idx.unsqueeze(2)  # (E, N, S', S)
        scores = scores.reshape(e, (r - q_lo) * r, nh)
        w = gather_rows(scores, pair).softmax(3)  # (E, N, S', S, H)
        if attn is not None:
            attn.append(w[:, :, -1].transpose(2, 3))  # the readout query's, (E, N, H, S)
        v = gather_rows(bmm(table, self.w_v), idx).view(e, n, s, nh, dh)  # (E, N, S, H, dh)
        # Weighted sum over the S = 3 keys as a broadcast product: einsum would route it to
        # N * H bmm calls of (S' x 3) @ (3 x dh).
        z = (w.unsqueeze(-1) * v.unsqueeze(2)).sum(3)  # (E, N, S', H, dh)
        return bmm(z.reshape(e, n, sq, d), self.w_o)

    def _attention_rows(
        self, table: Tensor, idx: Tensor, q_idx: Tensor, q_lo: int, attn: list[Tensor] | None
    ) -> Tensor:
        """``_attention_table`` with each example's scores from its gathered query and key rows
        (per_example_scores says where): the same products, summed per example."""
        e, _, d = table.shape
        n, s, sq = idx.shape[1], idx.shape[2], q_idx.shape[2]
        nh, dh = self.n_heads, d // self.n_heads
        q = gather_rows(bmm(table[:, q_lo:], self.w_q), q_idx - q_lo).view(e, n, sq, nh, dh)
        kv = gather_rows(torch.cat([bmm(table, self.w_k), bmm(table, self.w_v)], -1), idx)
        k, v = kv[..., :d].reshape(e, n, s, nh, dh), kv[..., d:].reshape(e, n, s, nh, dh)
        scores = (q.unsqueeze(3) * k.unsqueeze(2)).sum(-1) / math.sqrt(dh)  # (E, N, S', S, H)
        w = scores.softmax(3)
        if attn is not None:
            attn.append(w[:, :, -1].transpose(2, 3))
        z = (w.unsqueeze(-1) * v.unsqueeze(2)).sum(3)  # (E, N, S', H, dh)
        return bmm(z.reshape(e, n, sq, d), self.w_o)


class Unembed(nn.Module):
    """linear (no bias) or cosine: logits = tau * cos(h, w_c)."""

    def __init__(self, kind: str, tau: float, inits: list[_Init], d: int, c: int) -> None:
        super().__init__()
        self.kind, self.tau = kind, tau
        self.w_u = _stack([i.uniform((d, c), d) for i in inits])

    def forward(self, h: Tensor) -> Tensor:
        if self.kind == "cosine":
            return self.tau * bmm(F.normalize(h, dim=-1), F.normalize(self.w_u, dim=1))
        return bmm(h, self.w_u)


class Transformer(nn.Module):
    """Paper-1 Transformer over E members. forward(x (E, N, S)) -> logits (E, N, C), S =
    seq_len + 1 positions (3 for [a, b, =])."""

    def __init__(self, cfg: ModelConfig, n_tokens: int, n_classes: int, seeds: Sequence[int],
                 seq_len: int = N_POS - 1):
        super().__init__()
        inits = [_Init(s) for s in seeds]
        d, e = cfg.d_model, len(inits)
        self.w_e = _stack([i.normal((n_tokens + 1, d)) for i in inits])
        self.w_pos = _stack([i.normal((seq_len + 1, d)) for i in inits])
        self.norm_embed = Norm(cfg.norm, e, d, cfg.norm_eps)
        self.blocks = nn.ModuleList([Block(cfg, inits) for _ in range(cfg.n_layers)])
        self.unembed = Unembed(cfg.unembed_resolved, cfg.temperature, inits, d, n_classes)
        self.n_tokens = n_tokens

    @property
    def token_embedding(self) -> Tensor:
        """(E, n_tokens, d): operand rows of the embedding (for the Fourier measure)."""
        return self.w_e[:, : self.n_tokens]

    def forward(
        self, x: Tensor, *, hidden: list[Tensor] | None = None, fast: bool = True,
        attn: list[Tensor] | None = None,
    ) -> Tensor:
        """x (E, N, S) int64 -> logits (E, N, C). If `hidden` is a list, the residual stream
        at the readout position after each block, (E, N, d), is appended to it; if `attn` is
        one, each block's attention weights of the readout position over the S positions,
        (E, N, H, S). fast=False runs every position through every block (the plain
        reference)."""
        e = x.shape[0]
        last = len(self.blocks) - 1
        if fast:
            vocab = self.w_e.shape[1]
            # (E, S, V, d) -> (E, R, d): the normed embedding of every (position, token).
            table = self.norm_embed(self.w_e.unsqueeze(1) + self.w_pos.unsqueeze(2))
            table = table.reshape(e, -1, table.shape[-1])
            pos = torch.arange(0, x.shape[2] * vocab, vocab, device=x.device)
            first = cast(Block, self.blocks[0])
            h = first.forward_table(table, x + pos, last_only=last == 0, attn=attn)
        else:
            rows = torch.arange(e, device=x.device).view(e, 1, 1)
            h = self.norm_embed(self.w_e[rows, x] + self.w_pos.unsqueeze(1))  # (E, N, 3, d)
            h = self.blocks[0](h, attn=attn)
        if hidden is not None:
            hidden.append(h[:, :, -1])
        for i in range(1, last + 1):
            h = self.blocks[i](h, last_only=fast and i == last, attn=attn)
            if hidden is not None:
                hidden.append(h[:, :, -1])
        return self.unembed(h[:, :, -1])

    @property
    def class_unembedding(self) -> Tensor:
        """(E, C, d): one unembedding row per class (for the Fourier measure over classes)."""
        return self.unembed.w_u.transpose(1, 2)


class MLP(nn.Module):
    """Paper-2 MLP over E members: embed the seq_len input tokens (a and b; shared table),
    concatenate, n_layers hidden ReLU layers of width d_mlp (with biases), linear readout with
    bias."""

    def __init__(self, cfg: ModelConfig, n_tokens: int, n_classes: int, seeds: Sequence[int],
                 seq_len: int = N_POS - 1):
        super().__init__()
        inits = [_Init(s) for s in seeds]
        d, m = cfg.d_model, cfg.d_mlp
        self.w_e = _stack([i.normal((n_tokens, d)) for i in inits])
        widths = [seq_len * d] + [m] * cfg.n_layers
        pairs = list(itertools.pairwise(widths))  # (fan_in, fan_out) of each hidden layer
        self.weights = nn.ParameterList(
            [_stack([i.uniform((a, b), a) for i in inits]) for a, b in pairs]
        )
        self.biases = nn.ParameterList(
            [_stack([i.uniform((b,), a) for i in inits]) for a, b in pairs]
        )
        self.w_u = _stack([i.uniform((m, n_classes), m) for i in inits])
        self.b_u = _stack([i.uniform((n_classes,), m) for i in inits])

    @property
    def token_embedding(self) -> Tensor:
        """(E, n_tokens, d): the operand embedding (for the Fourier measure)."""
        return self.w_e

    def forward(
        self, x: Tensor, *, hidden: list[Tensor] | None = None, fast: bool = True
    ) -> Tensor:
        """x (E, N, L + 1) int64 (the = token is ignored) -> logits (E, N, C); `hidden`
        collects every hidden layer's post-ReLU activations (E, N, d_mlp).
        fast=True computes the first layer from L (V, d_mlp) tables (exact, see module doc);
        fast=False concatenates the embeddings and runs the (N, Ld) @ (Ld, d_mlp) GEMM."""
        e, n = x.shape[:2]
        w1, b1 = self.weights[0], self.biases[0]
        if fast:
            d = self.w_e.shape[-1]
            # Position s's slice of the first layer as a (E, V, d_mlp) table.
            tables = [bmm(self.w_e, w1[:, s * d : (s + 1) * d]) for s in range(x.shape[2] - 1)]
            pre = gather_rows(tables[0], x[:, :, 0])
            for s in range(1, len(tables)):
                pre = pre + gather_rows(tables[s], x[:, :, s])
            pre = pre + _bias(b1, tables[0])
        else:
            rows = torch.arange(e, device=x.device).view(e, 1, 1)
            emb = self.w_e[rows, x[:, :, :-1]].reshape(e, n, -1)  # (E, N, Ld)
            pre = bmm(emb, w1) + _bias(b1, emb)
        h = pre.relu_()  # (E, N, d_mlp); in place on a fresh sum
        if hidden is not None:
            hidden.append(h)
        for w, b in zip(self.weights[1:], self.biases[1:], strict=True):
            h = linear(h, w, b, relu=True)
            if hidden is not None:
                hidden.append(h)
        return linear(h, self.w_u, self.b_u)

    @property
    def class_unembedding(self) -> Tensor:
        """(E, C, d_mlp): one readout row per class (for the Fourier measure over classes)."""
        return self.w_u.transpose(1, 2)


ARCHS: dict[str, type[Transformer] | type[MLP]] = {"transformer": Transformer, "mlp": MLP}
"""The built-in model.arch names (sweepgrok.config.plugins.BUILTIN_ARCHS) -> their class."""
assert tuple(ARCHS) == BUILTIN_ARCHS


def build_model(cfg: Config, seeds: Sequence[int] | None = None) -> nn.Module:
    """The model of `cfg` with one member per seed (default: cfg.train.seed_list): a built-in,
    or the plugin factory that model.arch names, called the same way (docs/extending.md)."""
    seeds = list(seeds) if seeds is not None else cfg.train.seed_list
    factory = check_model(cfg.model.arch) or ARCHS[cfg.model.arch]
    model: nn.Module = factory(cfg.model, cfg.task.n_tokens, cfg.task.n_classes, seeds,
                               seq_len=cfg.task.seq_len)
    return model


def is_decayed(name: str) -> bool:
    """Weight-decay group when optim.decay_all is false: matrices and embeddings decay,
    biases and norm gains do not (nanoGPT's split)."""
    leaf = name.rsplit(".", 1)[-1]
    return not (leaf.startswith("b_") or leaf in ("gain", "bias") or name.startswith("biases."))


def n_params(model: nn.Module) -> int:
    """Parameters of ONE member (all members have the same count)."""
    return sum(p[0].numel() for p in model.parameters())
