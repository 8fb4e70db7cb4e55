"""Trainer steps/s against a notebook-style reference loop and against the FLOP floor.

Run: ``python -m benchmarks.bench_trainer [--quick] [--threads 1 2] [--device cpu|cuda]
[--cases NAME ...] [--set KEY=VALUE ...] [--cuda-graph auto|on|off|both] [--json PATH]``.

These are timed side by side, interleaved round-robin (several rounds, median per step), at
each thread count, so that load from other processes on a shared machine hits them alike:

- ``sweepgrok``: ``Trainer._train_step`` (the trainer's hot path: full-batch forward on the
  fast path, backward, AdamW) on the trial config, with the ``--set`` overrides. Where the
  config has ``train.cuda_graph``, ``--cuda-graph both`` (the default on CUDA) times two
  trainers side by side, ``graph off`` and ``graph on``;
- ``reference``: the loop public grokking notebooks write: an ``nn.Module`` Transformer with
  ``nn.Linear`` and einsum attention, every position through every layer, the unembedding at
  every position, logits[:, -1], ``loss.item()`` every step, ``torch.optim.AdamW`` defaults;
- ``cuda graph`` (CUDA only; skipped on a CPU): the same notebook step captured once in a
  CUDA graph and replayed, PyTorch's whole-network capture recipe (static input and target,
  ``AdamW(capturable=True)``, warm-up on a side stream), and no ``loss.item()``: what a
  careful notebook on a GPU does, and the bar sweepgrok's one-seed step is held to;
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

Only ratios are results; ms/step is printed for orientation. ``--json PATH`` also writes every
timing (ms per step of each variant, FLOPs, the sgemm rate) for scripts such as
benchmarks/gpu_summary.py.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sweepgrok.config.tasks import make_split
from sweepgrok.config.trial import Config, all_keys, from_flat, parse_overrides
from sweepgrok.train.process import configure_process
from sweepgrok.train.trainer import Trainer

P1 = {  # paper 1's model at Z_113, train fraction 0.3
    "task.p": 113, "task.train_fraction": 0.3, "model.d_model": 128, "model.n_heads": 4,
    "model.d_mlp": 512, "optim.lr": 1e-4, "optim.betas": [0.9, 0.999],
}
P2 = {  # search_spaces/trials/trial_mlp97.yaml's model
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
CASES["paper-1 Z_113, layernorm"] = {**P1, "model.norm": "layernorm", "optim.weight_decay": 1.0}
QUICK_CASES = ("paper-1 Z_113, norm none", "paper-2 MLP add mod 97")
GPU_CASE = "paper-1 Z_113, layernorm"  # the issue's one-seed reference case (paper1_norms' model)


# ---- timing -------------------------------------------------------------------------------


@dataclass
class Timing:
    """Median seconds per step: wall clock, and process CPU time (robust to time slicing)."""

    wall: float
    cpu: float


def measure(
    steps: Mapping[str, Callable[[], object]], rounds: int, k: int, sync: Callable[[], None]
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

    def __init__(self, cfg: Config, device: torch.device, capturable: bool = False) -> None:
        split = make_split(cfg.task, cfg.task.data_seed)
        self.x, self.y = split.train_x.to(device), split.train_y.to(device)
        torch.manual_seed(cfg.train.seed)
        ref = RefMLP(cfg) if cfg.model.arch == "mlp" else RefTransformer(cfg)
        self.model = ref.to(device)
        o = cfg.optim
        self.opt = torch.optim.AdamW(
            self.model.parameters(), lr=o.lr, betas=o.betas, weight_decay=o.weight_decay,
            capturable=capturable)
        self.losses: list[float] = []

    def loss(self) -> Tensor:
        """Forward, loss and backward (gradients accumulate into .grad, or fill fresh ones)."""
        logits = self.model(self.x)[:, -1]
        loss = F.cross_entropy(logits, self.y)
        loss.backward()
        return loss

    def step(self) -> None:
        self.opt.zero_grad()
        loss = self.loss()
        self.opt.step()
        self.losses.append(loss.item())  # host sync


class GraphReferenceLoop(ReferenceLoop):
    """The notebook step captured once in a CUDA graph and replayed (PyTorch's whole-network
    capture recipe): static input and target (the full batch never changes), the capturable
    AdamW (its step count lives on the device), three warm-up steps on a side stream so that
    lazy initialisation happens outside the capture, grads set to None before the capture so
    that backward allocates them from the graph's pool and every replay overwrites them. No
    loss.item(): the loss stays in `static_loss`, read only when wanted."""

    WARMUP = 3

    def __init__(self, cfg: Config, device: torch.device) -> None:
        if device.type != "cuda":
            raise ValueError("the CUDA-graph reference needs a CUDA device")
        super().__init__(cfg, device, capturable=True)
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(self.WARMUP):
                self.opt.zero_grad(set_to_none=True)
                self.loss()
                self.opt.step()
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.static_loss = self.loss()
            self.opt.step()

    def step(self) -> None:
        self.graph.replay()


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


def graph_modes(choice: str, device: str) -> list[str | None]:
    """The train.cuda_graph values to time side by side; [None] (the trainer's default) where
    this version's config has no such key. `both` is off and on on CUDA, off on a CPU."""
    if "train.cuda_graph" not in all_keys():
        return [None]
    if choice == "both":
        return ["off", "on"] if device == "cuda" else ["off"]
    return [choice]


def variant_name(mode: str | None) -> str:
    return "sweepgrok" if mode is None else f"sweepgrok graph {mode}"


def sweepgrok_step(trainer: Trainer) -> Callable[[], None]:
    """One training step of `trainer` as its run loop takes it past the learning-rate warm-up
    (the one place to change if the step's entry point moves). The trainer replays a captured
    CUDA graph (train.cuda_graph) only for steps after optim.warmup_steps + 1, so its step
    counter is set there: the first call then captures, the later ones replay."""
    trainer.step = trainer.cfg.optim.warmup_steps + 2
    return lambda: trainer._train_step(0.0)


def build_variants(
    name: str, overrides: dict, args: argparse.Namespace
) -> tuple[Config, dict[str, Trainer]]:
    """The case's config (with --set) and one Trainer per train.cuda_graph mode."""
    base = case_config({**overrides, **args.sets}, args.device)
    trainers = {}
    for mode in graph_modes(args.cuda_graph, args.device):
        extra = {} if mode is None else {"train.cuda_graph": mode}
        cfg = case_config({**overrides, **args.sets, **extra}, args.device)
        trainer = working(name, variant_name(mode), partial(Trainer, cfg))
        if trainer is not None:
            trainers[variant_name(mode)] = trainer
    if not trainers:
        raise RuntimeError("no sweepgrok variant could be built (see above)")
    return base, trainers


def bench_case(name: str, overrides: dict, args: argparse.Namespace) -> list[dict]:
    """Time the case's variants at each thread count; print a line each, return the rows."""
    base, trainers = build_variants(name, overrides, args)
    # Precision and threads before the references exist: the CUDA graph is captured with the
    # kernels (TF32 or not) chosen at capture time.
    configure_process(base.train, default_threads=args.threads[0])
    first = next(iter(trainers.values()))
    steps: dict[str, Callable[[], object]] = {n: sweepgrok_step(t) for n, t in trainers.items()}
    steps["reference"] = ReferenceLoop(base, first.device).step
    if first.device.type == "cuda":
        graph = working(name, "cuda graph", lambda: GraphReferenceLoop(base, first.device))
        if graph is not None:
            steps["cuda graph"] = graph.step
    else:
        print(f"  {name}: cuda graph reference skipped (it needs a CUDA device)", flush=True)
    # A step that fails its first call is dropped (said once); the reference must work.
    steps = {k: v for k, v in steps.items()
             if k == "reference" or working(name, k, partial(first_call, v))}
    n = first.train_x.shape[1]
    gemm, gemm_flops = sgemm_step(base, n, first.device)
    steps["sgemm"] = gemm
    flops = step_flops(base, n)
    rows = []
    for threads in args.threads:
        configure_process(base.train, default_threads=threads)  # as the entry points do
        t = measure(steps, args.rounds, args.steps, device_sync(first.device))
        rows.append({
            "case": name, "threads": threads, "device": args.device, "n": n, "flops": flops,
            "sgemm_gflops": gemm_flops / t["sgemm"].wall / 1e9,
            "ms": {k: v.wall * 1e3 for k, v in t.items() if k != "sgemm"},
            "cpu_ms": {k: v.cpu * 1e3 for k, v in t.items() if k != "sgemm"},
        })
        for variant in (v for v in trainers if v in t):
            label = name if len(trainers) == 1 else f"{name} [{variant.split()[-1]}]"
            print(_line(label, threads, t[variant], t["reference"], t["sgemm"], flops,
                        gemm_flops), flush=True)
        print("    ms/step: " + ", ".join(f"{k} {v:.3f}" for k, v in rows[-1]["ms"].items())
              + _graph_ratios(rows[-1]["ms"]), flush=True)
    return rows


def working(case: str, variant: str, make: Callable[[], Any]) -> Any:
    """make(), else None and a printed line naming the variant and its error: one variant that
    fails (a capture error, say) must not take the others' numbers with it."""
    try:
        return make()
    except Exception as err:
        print(f"  {case}: {variant} FAILED: {type(err).__name__}: {err}", flush=True)
        return None


def first_call(step: Callable[[], object]) -> bool:
    """Call `step` once and answer True, so that working() tells a step that ran (most return
    None) from one that failed."""
    step()
    return True


def _line(label: str, threads: int, ours: Timing, base: Timing, mm: Timing, flops: float,
          gemm_flops: float) -> str:
    """The table's row: speed-up over the notebook loop, x floor, rates."""
    floor_wall, floor_cpu = flops * mm.wall / gemm_flops, flops * mm.cpu / gemm_flops
    return (
        f"  {label:<36}{threads:>3}  {base.wall / ours.wall:>7.2f}x {base.cpu / ours.cpu:>6.2f}x"
        f"  {ours.wall / floor_wall:>7.2f}x {ours.cpu / floor_cpu:>6.2f}x"
        f"  {1 / ours.wall:>7.1f} {1 / base.wall:>6.1f}  {gemm_flops / mm.wall / 1e9:>6.1f}"
        f"  {flops / 1e9:>5.2f}"
    )


def _graph_ratios(ms: dict[str, float]) -> str:
    """'; <variant> / cuda graph = r x' for every sweepgrok variant (r <= 1: as fast or faster)."""
    if "cuda graph" not in ms:
        return ""
    return "".join(f"; {k} / cuda graph = {v / ms['cuda graph']:.2f}x"
                   for k, v in ms.items() if k.startswith("sweepgrok"))


def add_common_options(ap: argparse.ArgumentParser) -> None:
    """--set, --cuda-graph and --json (bench_trainer and bench_seeds take the same; each
    declares its own --device, which is how benchmarks.run finds who takes one)."""
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="config override for every case, as `sweepgrok train --set` "
                         "(e.g. train.matmul_precision=high); repeatable")
    ap.add_argument("--cuda-graph", default="both", choices=["auto", "on", "off", "both"],
                    help="train.cuda_graph of sweepgrok's step where the config has that key; "
                         "both: off and on side by side on CUDA (off on a CPU); wins over --set")
    ap.add_argument("--json", default=None, metavar="PATH", help="also write the timings here")


def parse_common(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Check and turn --set into a typed flat dict (exit 2 naming the key on a mistake)."""
    try:
        args.sets = parse_overrides(args.sets)
    except ValueError as err:
        ap.error(str(err))
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda, but torch finds no CUDA device here")
    if args.device == "cpu" and args.cuda_graph == "on":
        ap.error("--cuda-graph on needs --device cuda")


def write_json(path: str | None, name: str, args: argparse.Namespace, rows: list[dict]) -> None:
    if path is None:
        return
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else None
    doc = {"benchmark": name, "device": args.device, "gpu": gpu, "torch": torch.__version__,
           "sets": args.sets, "cuda_graph": args.cuda_graph, "rows": rows}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two cases, fewer rounds")
    ap.add_argument("--threads", type=int, nargs="+", default=None,
                    help="intra-op threads (default 1 2; on CUDA 1)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5)")
    ap.add_argument("--steps", type=int, default=None,
                    help="steps per variant per round (default 3; on CUDA 20)")
    ap.add_argument("--cases", nargs="+", default=None, choices=list(CASES), metavar="CASE",
                    help=f"cases to run (default all; --quick: two): {', '.join(CASES)}")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    add_common_options(ap)
    args = ap.parse_args(argv)
    parse_common(ap, args)
    cuda = args.device == "cuda"
    args.threads = args.threads or ([1] if cuda else [1, 2])
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.steps = args.steps or (20 if cuda else 2 if args.quick else 3)
    sets = f", --set {args.sets}" if args.sets else ""
    print(f"bench_trainer: full-batch training step, {args.device}, median of {args.rounds} "
          f"interleaved rounds x {args.steps} steps{sets}")
    print("  speedup = reference time / sweepgrok time; x floor = sweepgrok time / (necessary "
          "FLOPs / sgemm rate); wall clock and process CPU time")
    print(f"  {'case':<36}{'thr':>3}  {'speedup':>8} {'(cpu)':>6}  {'x floor':>8} {'(cpu)':>6}"
          f"  {'steps/s':>7} {'ref':>6}  {'GFLOPS':>6}  {'GFLOP':>5}")
    names = args.cases or (QUICK_CASES if args.quick else tuple(CASES))
    rows = [row for name in names for row in bench_case(name, CASES[name], args)]
    write_json(args.json, "bench_trainer", args, rows)


if __name__ == "__main__":
    main()
