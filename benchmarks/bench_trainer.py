"""Trainer steps/s against a notebook-style reference loop and against the FLOP floor.

Run: ``python -m benchmarks.bench_trainer [--quick] [--threads 1 2] [--device cpu|cuda]``.

Three things are timed side by side, interleaved round-robin (several rounds, median per step),
at each thread count, so that load from other processes on a shared machine hits them alike:

- ``sweepgrok``: ``Trainer._train_step`` (the trainer's hot path: full-batch forward on the
  fast path, backward, AdamW) on the trial config;
- ``reference``: the loop public grokking notebooks write: an ``nn.Module`` Transformer with
  ``nn.Linear`` and einsum attention, every position through every layer, the unembedding at
  every position, logits[:, -1], ``loss.item()`` every step, ``torch.optim.AdamW`` defaults;
- ``sgemm``: the two GEMMs that dominate the step, (N, d) @ (d, d_mlp) and (N, d_mlp) @
  (d_mlp, d), whose rate defines the floor.

Floor = the step's necessary FLOPs / the measured sgemm rate. Necessary FLOPs (``step_flops``):
3 x the forward matmul FLOPs of the exact fast computation (forward, and a backward that costs
two GEMMs per forward GEMM: grad of the input and of the weight). Forward, per example, 1-layer
Transformer with softmax attention: W_O (d^2) + MLP (2 d d_mlp) + unembed (d C) multiply-adds,
plus per step the tables (K, V over R = 3 V rows, Q over V rows, scores V R d); uniform
attention has no per-example W_O. MLP: the hidden layers after the first (d_mlp^2 each), the
readout (d_mlp C), and the first layer's two (V, 2d) @ (2d, d_mlp) tables. Elementwise work
(norms, ReLU, softmax, cross-entropy, AdamW) counts zero, so "x floor" >= 1 always.

Only ratios are results; ms/step is printed for orientation.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sweepgrok.config import Config, from_flat
from sweepgrok.process import configure_process
from sweepgrok.tasks import make_split
from sweepgrok.trainer import Trainer

P1 = {  # paper 1's model at Z_113, train fraction 0.3
    "task.p": 113, "task.train_fraction": 0.3, "model.d_model": 128, "model.n_heads": 4,
    "model.d_mlp": 512, "optim.lr": 1e-4, "optim.betas": [0.9, 0.999],
}
P2 = {  # search_spaces/trial_mlp97.yaml's model
    "task.p": 97, "task.train_fraction": 0.3, "model.arch": "mlp", "model.n_layers": 2,
    "model.d_model": 128, "model.d_mlp": 512,
}
CASES: dict[str, dict] = {
    "paper-1 Z_113, norm none": {**P1, "model.norm": "none", "optim.weight_decay": 1.0},
    "paper-1 Z_113, sphere": {**P1, "model.norm": "sphere", "optim.weight_decay": 0.0},
    "paper-1 Z_113, layernorm, uniform": {
        **P1, "model.norm": "layernorm", "model.attention": "uniform"},
    "paper-2 MLP add mod 97": P2,
}
QUICK_CASES = ("paper-1 Z_113, norm none", "paper-2 MLP add mod 97")


# ---- timing -------------------------------------------------------------------------------


@dataclass
class Timing:
    """Median seconds per step: wall clock, and process CPU time (robust to time slicing)."""

    wall: float
    cpu: float


def measure(
    steps: dict[str, Callable[[], object]], rounds: int, k: int, sync: Callable[[], None]
) -> dict[str, Timing]:
    """Median per-step time of each variant: one warm-up call each, then `rounds` round-robin
    rounds of `k` calls per variant (interleaved so machine load hits every variant alike)."""
    for s in steps.values():
        s()
    sync()
    wall: dict[str, list[float]] = {n: [] for n in steps}
    cpu: dict[str, list[float]] = {n: [] for n in steps}
    for _ in range(rounds):
        for name, s in steps.items():
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(k):
                s()
            sync()
            wall[name].append((time.perf_counter() - t0) / k)
            cpu[name].append((time.process_time() - c0) / k)
    return {n: Timing(statistics.median(wall[n]), statistics.median(cpu[n])) for n in steps}


def device_sync(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return torch.cuda.synchronize
    return lambda: None


# ---- the reference: how public grokking notebooks write it ------------------------------


class RefTransformer(nn.Module):
    """One-layer Transformer the notebook way: nn.Embedding, nn.Linear, einsum attention,
    every position through the block and the unembedding."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        m, d = cfg.model, cfg.model.d_model
        self.h, self.norm, self.uniform = m.n_heads, m.norm, m.attention == "uniform"
        self.cosine = m.unembed_resolved == "cosine"
        self.embed = nn.Embedding(cfg.task.n_tokens + 1, d)
        self.pos = nn.Parameter(torch.randn(3, d))
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.mlp_in, self.mlp_out = nn.Linear(d, m.d_mlp), nn.Linear(m.d_mlp, d)
        self.unembed = nn.Linear(d, cfg.task.n_classes, bias=False)
        ln = m.norm == "layernorm"
        self.ln = nn.ModuleList([nn.LayerNorm(d) if ln else nn.Identity() for _ in range(3)])

    def _norm(self, i: int, h: Tensor) -> Tensor:
        return F.normalize(h, dim=-1) if self.norm == "sphere" else self.ln[i](h)

    def forward(self, x: Tensor) -> Tensor:
        n, s = x.shape
        h = self._norm(0, self.embed(x) + self.pos)  # (N, 3, d)
        v = self.v(h).view(n, s, self.h, -1)
        if self.uniform:
            z = v.mean(1, keepdim=True).expand_as(v)
        else:
            q, k = self.q(h).view(n, s, self.h, -1), self.k(h).view(n, s, self.h, -1)
            scores = torch.einsum("nqhc,nkhc->nhqk", q, k) / math.sqrt(q.shape[-1])
            z = torch.einsum("nhqk,nkhc->nqhc", scores.softmax(-1), v)
        h = self._norm(1, h + self.o(z.reshape(n, s, -1)))
        h = self._norm(2, h + self.mlp_out(F.relu(self.mlp_in(h))))
        if self.cosine:
            return 10.0 * F.normalize(h, dim=-1) @ F.normalize(self.unembed.weight, dim=1).T
        return self.unembed(h)  # (N, 3, C): logits at every position


class RefMLP(nn.Module):
    """The paper-2 MLP the notebook way: nn.Embedding, concatenate, nn.Linear layers."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        m = cfg.model
        self.embed = nn.Embedding(cfg.task.n_tokens, m.d_model)
        widths = [2 * m.d_model] + [m.d_mlp] * m.n_layers
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(widths))
        self.readout = nn.Linear(m.d_mlp, cfg.task.n_classes)

    def forward(self, x: Tensor) -> Tensor:
        h = self.embed(x[:, :2]).flatten(1)
        for layer in self.layers:
            h = F.relu(layer(h))
        return self.readout(h).unsqueeze(1)  # (N, 1, C)


class ReferenceLoop:
    """Full-batch AdamW with loss.item() every step (a host sync on a GPU)."""

    def __init__(self, cfg: Config, device: torch.device) -> None:
        split = make_split(cfg.task, cfg.task.data_seed)
        self.x, self.y = split.train_x.to(device), split.train_y.to(device)
        torch.manual_seed(cfg.train.seed)
        ref = RefMLP(cfg) if cfg.model.arch == "mlp" else RefTransformer(cfg)
        self.model = ref.to(device)
        o = cfg.optim
        self.opt = torch.optim.AdamW(
            self.model.parameters(), lr=o.lr, betas=o.betas, weight_decay=o.weight_decay)
        self.losses: list[float] = []

    def step(self) -> None:
        logits = self.model(self.x)[:, -1]
        loss = F.cross_entropy(logits, self.y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.losses.append(loss.item())  # host sync


# ---- the floor ----------------------------------------------------------------------------


def step_flops(cfg: Config, n: int, members: int = 1) -> float:
    """Necessary FLOPs of one training step on the fast path (see the module docstring)."""
    m, c = cfg.model, cfg.task.n_classes
    d, f, layers = m.d_model, m.d_mlp, m.n_layers
    if m.arch == "mlp":
        per_example = (layers - 1) * f * f + f * c
        tables = cfg.task.n_tokens * 2 * d * f  # (V, d) @ (d, f) for a and for b
    else:
        vocab = cfg.task.n_tokens + 1
        r = 3 * vocab  # table rows: (position, token)
        uniform = m.attention == "uniform"
        wo = 0 if uniform else d * d  # uniform folds W_O into the V table
        first_pos = 1 if layers == 1 else 3  # positions the first block carries on
        q_rows = vocab if layers == 1 else r
        tables = r * d * d * 2 if uniform else r * d * d * 2 + q_rows * d * d + q_rows * r * d
        per_example = first_pos * (wo + 2 * d * f) + d * c
        if layers > 1:
            qk = 0 if uniform else 2 * d * d  # Q and K
            # middle blocks: every position through Q, K, V, O and the MLP
            per_example += (layers - 2) * 3 * (qk + 2 * d * d + 2 * d * f)
            # last block: K and V at 3 positions, Q, O and the MLP at the readout only
            per_example += 3 * d * d + (0 if uniform else 3 * d * d + d * d) + d * d + 2 * d * f
    forward_macs = n * per_example + tables
    return 3 * 2 * forward_macs * members


def sgemm_step(cfg: Config, n: int, device: torch.device) -> tuple[Callable[[], None], float]:
    """The floor's matmul: (N, d) @ (d, f) and (N, f) @ (f, d); returns it and its FLOPs."""
    d, f = cfg.model.d_model, cfg.model.d_mlp
    a, w1 = torch.randn(n, d, device=device), torch.randn(d, f, device=device)
    b, w2 = torch.randn(n, f, device=device), torch.randn(f, d, device=device)

    def run() -> None:
        torch.mm(a, w1)
        torch.mm(b, w2)

    return run, 2 * 2.0 * n * d * f


# ---- the benchmark ------------------------------------------------------------------------


def case_config(overrides: dict, device: str) -> Config:
    flat = {**overrides, "train.device": device, "geometry.enabled": False, "train.seed": 0}
    return from_flat(flat)


def bench_case(name: str, overrides: dict, args: argparse.Namespace) -> list[str]:
    cfg = case_config(overrides, args.device)
    trainer = Trainer(cfg)
    ref = ReferenceLoop(cfg, trainer.device)
    n = trainer.train_x.shape[1]
    gemm, gemm_flops = sgemm_step(cfg, n, trainer.device)
    flops = step_flops(cfg, n)
    sync = device_sync(trainer.device)
    lines = []
    for threads in args.threads:
        configure_process(cfg.train, default_threads=threads)  # as the entry points do
        t = measure({"sweepgrok": lambda: trainer._train_step(0.0), "reference": ref.step,
                     "sgemm": gemm}, args.rounds, args.steps, sync)
        ours, base, mm = t["sweepgrok"], t["reference"], t["sgemm"]
        floor_wall = flops * mm.wall / gemm_flops
        floor_cpu = flops * mm.cpu / gemm_flops
        lines.append(
            f"  {name:<36}{threads:>3}  {base.wall / ours.wall:>7.2f}x {base.cpu / ours.cpu:>6.2f}x"
            f"  {ours.wall / floor_wall:>7.2f}x {ours.cpu / floor_cpu:>6.2f}x"
            f"  {1 / ours.wall:>7.1f} {1 / base.wall:>6.1f}  {gemm_flops / mm.wall / 1e9:>6.1f}"
            f"  {flops / 1e9:>5.2f}"
        )
        print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two cases, fewer rounds")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5)")
    ap.add_argument("--steps", type=int, default=None, help="steps per variant per round")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args(argv)
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.steps = args.steps or (2 if args.quick else 3)
    print(f"bench_trainer: full-batch training step, {args.device}, median of {args.rounds} "
          f"interleaved rounds x {args.steps} steps")
    print("  speedup = reference time / sweepgrok time; x floor = sweepgrok time / (necessary "
          "FLOPs / sgemm rate); wall clock and process CPU time")
    print(f"  {'case':<36}{'thr':>3}  {'speedup':>8} {'(cpu)':>6}  {'x floor':>8} {'(cpu)':>6}"
          f"  {'steps/s':>7} {'ref':>6}  {'GFLOPS':>6}  {'GFLOP':>5}")
    names = QUICK_CASES if args.quick else tuple(CASES)
    for name in names:
        bench_case(name, CASES[name], args)


if __name__ == "__main__":
    main()
