"""Cost of a GeomDR training step relative to a plain one (paper-2 MLP, addition mod 97).

Run: ``python -m benchmarks.bench_geomdr [--rounds 5 --steps 4 --members 1]``.

One full-batch AdamW step (forward, backward, update) of a paper-2-shaped MLP: embeddings of a
and b (d_model each) concatenated, ``n_layers`` ReLU hidden layers of width d_mlp, linear
readout; addition mod 97 with train fraction 0.3 (2,823 examples). The GeomDR variants add
``lambda * sum_l geomdr_penalty(h_l[subset], d*)`` over every hidden layer, with a fresh seeded
subset per step, as the trainer does; with the exact eigh (geomdr.solver eigh, the default) or
the warm-started subspace iteration (geomdr.solver subspace: one step per training step from
the last step's basis, ``geomdr.top_subspace``). Variants are timed interleaved
(round-robin, several rounds, median per step) so that load from other processes on a shared
machine hits them all alike; only ratios are printed as results (absolute times vary with the
machine), of wall clock and of process CPU time (the steadier of the two on a busy machine).

Two sources, both by default (``--source local|trainer|both``):

- ``local``: a model built here (not sweepgrok.train.models), so the numbers isolate the penalty and
  do not move when the model code changes; also times the eigensolver in float64.
- ``trainer``: the real path, ``sweepgrok.train.trainer.Trainer`` built from
  ``search_spaces/trials/trial_geomdr_mlp97.yaml`` and its one-step method ``_train_step(lambda)``
  (lambda 0 is the plain step: no hidden states are kept, no penalty is built).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sweepgrok.train.geomdr import geomdr_penalty, subsample_indices, top_subspace


class BatchedMLP(nn.Module):
    """E independent MLPs in lockstep (the trainer's layout): x (E, N, 2) -> logits (E, N, p)."""

    def __init__(self, members: int, p: int, d_model: int, d_mlp: int, n_layers: int) -> None:
        super().__init__()
        widths = [2 * d_model] + [d_mlp] * n_layers
        self.embed = nn.Parameter(torch.randn(members, p, d_model))
        self.weights = nn.ParameterList(
            [nn.Parameter(torch.randn(members, a, b) / a**0.5) for a, b in pairwise(widths)]
        )
        self.biases = nn.ParameterList(
            [nn.Parameter(torch.zeros(members, 1, b)) for b in widths[1:]]
        )
        self.readout = nn.Parameter(torch.randn(members, d_mlp, p) / d_mlp**0.5)

    def forward(self, x: Tensor, hidden: list[Tensor] | None = None) -> Tensor:
        e, n = x.shape[:2]
        rows = torch.arange(e).view(e, 1, 1)
        h = self.embed[rows, x].reshape(e, n, -1)  # (E, N, 2 d_model)
        for w, b in zip(self.weights, self.biases, strict=True):
            h = F.relu(torch.bmm(h, w) + b)  # (E, N, d_mlp)
            if hidden is not None:
                hidden.append(h)
        return torch.bmm(h, self.readout)


def addition_split(p: int, fraction: float, seed: int) -> tuple[Tensor, Tensor]:
    """Training pairs (N, 2) and labels (N,) of a + b mod p: a seeded fraction of the table."""
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    x = torch.stack([a.flatten(), b.flatten()], dim=1)
    keep = torch.randperm(p * p, generator=torch.Generator().manual_seed(seed))
    keep = keep[: round(fraction * p * p)]
    return x[keep], (x[keep].sum(1) % p)


@dataclass(frozen=True)
class Variant:
    """One way of taking a step: plain, or GeomDR at a subsample fraction, eigen dtype and
    solver (eigh, or subspace: warm-started from the last step's bases)."""

    name: str
    geomdr: bool = False
    subsample: float = 1.0
    dtype: torch.dtype = torch.float32
    solver: str = "eigh"


def make_step(v: Variant, args: argparse.Namespace, x: Tensor, y: Tensor) -> Callable[[], None]:
    """A closure that takes one optimizer step of a fresh model (same init for every variant)."""
    torch.manual_seed(0)
    model = BatchedMLP(args.members, args.p, args.d_model, args.d_mlp, args.n_layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1.0, foreach=True)
    gen = torch.Generator().manual_seed(1)
    e, n = x.shape[:2]
    bases: dict[int, Tensor] = {}  # subspace solver: each layer's basis from the last step

    def step() -> None:
        hidden: list[Tensor] | None = [] if v.geomdr else None
        logits = model(x, hidden)
        loss = F.cross_entropy(logits.reshape(e * n, -1), y.reshape(-1), reduction="sum") / n
        if hidden:
            idx = subsample_indices(n, v.subsample, gen, x.device)
            penalty = logits.new_zeros(e)
            for i, h in enumerate(hidden):
                z = (h if idx is None else h[:, idx]).to(v.dtype)
                basis = None
                if v.solver == "subspace":
                    basis = bases[i] = top_subspace(z, args.target_dim, bases.get(i))
                penalty = penalty + geomdr_penalty(z, args.target_dim, "tail", basis).to(h.dtype)
            loss = loss + 0.1 * penalty.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def time_steps(step: Callable[[], None], k: int) -> tuple[float, float]:
    """Wall-clock and process CPU seconds per step over k steps."""
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(k):
        step()
    return (time.perf_counter() - t0) / k, (time.process_time() - c0) / k


def trainer_steps(args: argparse.Namespace) -> dict[str, Callable[[], None]]:
    """Plain and GeomDR steps of sweepgrok's own trainer on the trial_geomdr_mlp97 config."""
    from sweepgrok.config.trial import load_config
    from sweepgrok.train.process import configure_process
    from sweepgrok.train.trainer import Trainer

    def trainer(subsample: float, solver: str = "eigh") -> Trainer:
        sets = [
            f"geomdr.subsample={subsample}",
            f"geomdr.solver={solver}",
            f"geomdr.target_dim={args.target_dim}",
            f"train.seeds={list(range(args.members))}",
            "train.device=cpu",
        ]
        return Trainer(load_config("search_spaces/trials/trial_geomdr_mlp97.yaml", sets))

    full, sub = trainer(1.0), trainer(0.1)
    warm, warm_sub = trainer(1.0, "subspace"), trainer(0.1, "subspace")
    configure_process(full.cfg.train, default_threads=args.threads)  # as the entry points do
    return {
        "plain": lambda: full._train_step(0.0),
        "geomdr sub 1.0": lambda: full._train_step(0.1),
        "geomdr sub 1.0 warm": lambda: warm._train_step(0.1),
        "geomdr sub 0.1": lambda: sub._train_step(0.1),
        "geomdr sub 0.1 warm": lambda: warm_sub._train_step(0.1),
    }


def local_steps(args: argparse.Namespace) -> dict[str, Callable[[], None]]:
    """Plain and GeomDR steps of the model built here, eigensolver in float32 and float64."""
    x1, y1 = addition_split(args.p, args.train_fraction, seed=0)
    x = x1.expand(args.members, *x1.shape).contiguous()
    y = y1.expand(args.members, *y1.shape).contiguous()
    variants = [
        Variant("plain"),
        Variant("geomdr sub 1.0", True, 1.0),
        Variant("geomdr sub 1.0 warm", True, 1.0, solver="subspace"),
        Variant("geomdr sub 0.1", True, 0.1),
        Variant("geomdr sub 0.1 warm", True, 0.1, solver="subspace"),
        Variant("geomdr sub 1.0 f64", True, 1.0, torch.float64),
        Variant("geomdr sub 0.1 f64", True, 0.1, torch.float64),
    ]
    return {v.name: make_step(v, args, x, y) for v in variants}


Timing = tuple[float, float]
"""Median (wall, CPU) seconds per step."""


def measure(steps: dict[str, Callable[[], None]], rounds: int, k: int) -> dict[str, Timing]:
    """Median wall and CPU seconds per step of each variant, timed round-robin after one
    warm-up step (allocator, LAPACK workspaces, and the warm solver's first, exact, step)."""
    for s in steps.values():
        s()
    times: dict[str, list[Timing]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, s in steps.items():
            times[name].append(time_steps(s, k))
    return {name: (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts))
            for name, ts in times.items()}


def report(title: str, med: dict[str, Timing]) -> None:
    """Each variant's step as a ratio of the plain step (wall and CPU), and its wall ms."""
    print(title)
    print(f"  {'variant':<22}{'ratio':>8}{'ratio CPU':>11}{'ms/step':>10}")
    wall0, cpu0 = med["plain"]
    for name, (wall, cpu) in med.items():
        print(f"  {name:<22}{wall / wall0:>8.2f}{cpu / cpu0:>11.2f}{1e3 * wall:>10.1f}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", choices=["local", "trainer", "both"], default="both")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    ap.add_argument("--steps", type=int, default=3, help="steps per variant per round")
    ap.add_argument("--members", type=int, default=1, help="seeds in lockstep (E)")
    ap.add_argument("--p", type=int, default=97)
    ap.add_argument("--train-fraction", type=float, default=0.3)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--d-mlp", type=int, default=512)
    ap.add_argument("--n-layers", type=int, default=2)
    ap.add_argument("--target-dim", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)  # the machine is shared; ratios hold per thread

    print(
        f"GeomDR step cost / plain step: add mod {args.p}, train fraction "
        f"{args.train_fraction}, full batch, E={args.members}, d*={args.target_dim}, "
        f"{args.threads} thread(s); median of {args.rounds} interleaved rounds x {args.steps}"
    )
    if args.source in ("local", "both"):
        shape = f"MLP {args.n_layers}x{args.d_mlp}, d_model {args.d_model}"
        report(f"local model ({shape}):", measure(local_steps(args), args.rounds, args.steps))
    if args.source in ("trainer", "both"):
        med = measure(trainer_steps(args), args.rounds, args.steps)
        report("sweepgrok.train.trainer (trial_geomdr_mlp97.yaml):", med)


if __name__ == "__main__":
    main()
