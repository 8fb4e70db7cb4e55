"""k init seeds trained in lockstep (``train.seeds``, one batched model) vs k separate runs.

Run: ``python -m benchmarks.bench_seeds [--quick | --long] [--device cpu|cuda] [--threads 1 2]``
(``--long``: one paper-1 k = 8 check with runs of 200 steps; on 2 cores of a Zen 2 EPYC
~11 minutes at 2 threads and ~17 at 1).

Both sides are whole ``sweepgrok.train.trainer.train`` calls (training steps, evaluations with the
geometry measurements, run bookkeeping; no sink), on the same config and thread count:
``batched`` is one call with ``train.seeds = [0..k-1]``, ``sequential`` is k calls with
``train.seed = i``, in the same process. They are timed alternately (the order flips every
repeat) and the median of the repeats is taken, so that machine load hits both alike. Ratios
are sequential / batched (> 1: batching wins). Early stopping is off so both do the same work.

Each thread count of ``--threads`` (default 1 and 2, the cores of the machine these numbers
come from) is a separate comparison: on a CPU a member's GEMMs already run at full rate alone,
so what batching can save is the work around them (op dispatch, optimizer and evaluation
overhead, and with 2 threads the synchronisation of small parallel ops), which grows with the
thread count.

Two ratios come from the same calls:

- ``run``: whole calls, start-up included (data, init, the first steps, which touch fresh
  memory: at E = 8 the first step page-faults in the whole ~0.7 GB working set, ~1.5 s on a VM).
  In-process sequential runs reuse one another's heap, so this side is favoured.
- ``steady``: from the first evaluation after step 0 to the end (steps and evaluations only),
  which is what a run of thousands of steps costs per step.

Cases: the paper-1 model at Z_113 (k = 1, 4, 8, 16) and the small quick-trial model
(trial_quick.yaml's size: p = 47, d_model 64, d_mlp 256; k = 1, 4, 16).

``--members E [E ...]`` (e.g. ``--device cuda --members 1 8 64 256``) times something else: the
training step alone (``Trainer._train_step``, as bench_trainer does, interleaved rounds,
medians) of one trial packing E seeds, on the paper-1 model (Z_113, LayerNorm, 30% train, full
batch; ``--set`` changes it), and prints ms per step, ms per member-step and its ratio to the
float32 floor: the member-step's necessary FLOPs (``bench_trainer.step_flops``: 6 x the forward
multiply-adds of the fast path; at Z_113, 6 x (3,831 x 161,920 + 18,064,896) = 3.83 GFLOP) over
the device's float32 peak (``--peak-tflops``; on CUDA 67, an H100/H200 SXM's non-tensor FP32
rate: 3.83 GFLOP -> 0.057 ms; on a CPU the measured sgemm rate of the step's shapes). Where the
config has ``train.cuda_graph``, ``--cuda-graph both`` times off and on side by side.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from operator import attrgetter

import torch

from benchmarks.bench_trainer import (
    P1,
    add_common_options,
    device_sync,
    first_call,
    graph_modes,
    measure,
    parse_common,
    sgemm_step,
    step_flops,
    sweepgrok_step,
    variant_name,
    working,
    write_json,
)
from sweepgrok.config.trial import Config, from_flat, update
from sweepgrok.train.process import configure_process
from sweepgrok.train.trainer import EvalReport, Trainer, train

CASES: dict[str, dict] = {
    "paper-1 Z_113 sphere": {
        "task.p": 113, "task.train_fraction": 0.3, "model.d_model": 128, "model.n_heads": 4,
        "model.d_mlp": 512, "model.norm": "sphere", "optim.weight_decay": 0.0,
    },
    "small p=47 d=64 sphere": {
        "task.p": 47, "task.train_fraction": 0.7, "model.d_model": 64, "model.n_heads": 4,
        "model.d_mlp": 256, "model.norm": "sphere", "optim.weight_decay": 0.0,
    },
}
# case -> (k values, steps, eval_every); steps / eval_every >= 2 so there is a steady segment.
FULL = {"paper-1 Z_113 sphere": ((1, 4, 8, 16), 30, 10),
        "small p=47 d=64 sphere": ((1, 4, 16), 120, 40)}
MEMBERS_CASE = {**P1, "model.norm": "layernorm", "optim.weight_decay": 1.0}
"""The paper-1 model of --members (paper1_norms' LayerNorm runs; weight decay costs no FLOPs)."""
CUDA_FP32_TFLOPS = 67.0
"""Float32 (non-tensor-core) peak of an H100/H200 SXM, the floor's rate on CUDA."""
QUICK = {"paper-1 Z_113 sphere": ((8,), 20, 10), "small p=47 d=64 sphere": ((16,), 80, 40)}
LONG = {"paper-1 Z_113 sphere": ((8,), 200, 100)}


@dataclass
class Timing:
    """Wall and CPU seconds of whole calls and of their steady segments (summed over calls)."""

    wall: float = 0.0
    cpu: float = 0.0
    steady_wall: float = 0.0
    steady_cpu: float = 0.0
    steady_steps: int = 0  # optimizer steps in the steady segments (one per call and step)


def _config(case: dict, steps: int, eval_every: int, device: str, threads: int) -> Config:
    return from_flat({
        **case, "train.max_steps": steps, "train.eval_every": eval_every,
        "train.early_evals": False, "train.stop_after_grok": False, "train.device": device,
        "train.threads": threads, "task.split_follows_seed": True,
    })


def _timed_train(cfg: Config, out: Timing) -> None:
    """One train() call; adds its whole and steady-segment times to `out`."""
    marks: list[tuple[int, float, float]] = []

    def on_eval(report: EvalReport) -> None:
        marks.append((report.step, time.perf_counter(), time.process_time()))

    t0, c0 = time.perf_counter(), time.process_time()
    train(cfg, on_eval=on_eval)
    out.wall += time.perf_counter() - t0
    out.cpu += time.process_time() - c0
    (s1, w1, c1), (s2, w2, c2) = marks[1], marks[-1]  # marks[0] is the eval at step 0
    out.steady_wall += w2 - w1
    out.steady_cpu += c2 - c1
    out.steady_steps += s2 - s1


def _median(timings: list[Timing], key: Callable[[Timing], float]) -> float:
    return statistics.median(key(t) for t in timings)


def bench(
    name: str, k: int, steps: int, eval_every: int, threads: int, args: argparse.Namespace
) -> None:
    cfg = _config(CASES[name], steps, eval_every, args.device, threads)
    batched_cfg = update(cfg, {"train.seeds": list(range(k))})
    configure_process(cfg.train)  # train.threads = `threads`, as the train command sets it

    def batched() -> Timing:
        out = Timing()
        _timed_train(batched_cfg, out)
        return out

    def sequential() -> Timing:
        out = Timing()
        for seed in range(k):
            _timed_train(cfg.member(seed), out)
        return out

    train(cfg.member(0))  # warm-up
    b: list[Timing] = []
    s: list[Timing] = []
    for rep in range(args.repeats):
        order = ((batched, b), (sequential, s)) if rep % 2 == 0 else ((sequential, s), (batched, b))
        for fn, acc in order:
            acc.append(fn())
    ratio = {key: _median(s, attrgetter(key)) / _median(b, attrgetter(key))
             for key in ("wall", "cpu", "steady_wall", "steady_cpu")}

    def ms(timings: list[Timing], calls: int) -> float:
        """Steady wall ms per member-step (a batched call advances k members per step)."""
        return 1000 * _median(timings, lambda t: t.steady_wall / (t.steady_steps * calls))
    print(f"  {name:<24}{threads:>4}{k:>4}{steps:>6}  {ratio['wall']:>6.2f}x {ratio['cpu']:>5.2f}x"
          f"  {ratio['steady_wall']:>6.2f}x {ratio['steady_cpu']:>5.2f}x"
          f"  {ms(b, k):>8.1f} {ms(s, 1):>8.1f}", flush=True)


def members_config(e: int, args: argparse.Namespace, mode: str | None) -> Config:
    flat = {**MEMBERS_CASE, **args.sets, "train.device": args.device, "geometry.enabled": False,
            "train.seeds": list(range(e))}
    if mode is not None:
        flat["train.cuda_graph"] = mode
    return from_flat(flat)


def floor_rate(cfg: Config, n: int, args: argparse.Namespace) -> float:
    """FLOP/s of the floor: --peak-tflops, else CUDA's FP32 peak, else a measured sgemm rate."""
    if args.peak_tflops:
        return args.peak_tflops * 1e12
    if args.device == "cuda":
        return CUDA_FP32_TFLOPS * 1e12
    gemm, gemm_flops = sgemm_step(cfg, n, torch.device("cpu"))
    return gemm_flops / measure({"sgemm": gemm}, args.repeats, 3, lambda: None)["sgemm"].wall


def bench_members(e: int, args: argparse.Namespace) -> dict:
    """ms per step and per member-step of one E-seed trial's step, and its ratio to the floor."""
    name = f"E={e}"
    trainers = {}
    for mode in graph_modes(args.cuda_graph, args.device):
        cfg = members_config(e, args, mode)
        t = working(name, variant_name(mode), partial(Trainer, cfg))
        if t is not None:
            trainers[variant_name(mode)] = t
    if not trainers:
        raise RuntimeError(f"{name}: no sweepgrok variant could be built (see above)")
    first = next(iter(trainers.values()))
    configure_process(first.cfg.train, default_threads=args.threads[0])
    steps = {k: sweepgrok_step(t) for k, t in trainers.items()}
    steps = {k: v for k, v in steps.items() if working(name, k, partial(first_call, v))}
    n = first.train_x.shape[1]
    floor_ms = step_flops(first.cfg, n) / floor_rate(first.cfg, n, args) * 1e3  # one member
    t = measure(steps, args.repeats, args.steps, device_sync(first.device))
    row = {"members": e, "n": n, "flops_per_member_step": step_flops(first.cfg, n),
           "floor_ms_per_member_step": floor_ms, "ms": {k: v.wall * 1e3 for k, v in t.items()}}
    for k, v in t.items():
        per = v.wall * 1e3 / e
        print(f"  {e:>5}  {k:<20} {v.wall * 1e3:>10.3f} {per:>12.4f} {floor_ms:>9.4f}"
              f" {per / floor_ms:>8.2f}x", flush=True)
    del trainers, steps, first
    if args.device == "cuda":
        torch.cuda.empty_cache()  # the next E starts from a clean pool
    return row


def members_main(args: argparse.Namespace) -> None:
    args.threads = args.threads[:1]
    args.steps = args.steps or (10 if args.device == "cuda" else 2)
    print(f"bench_seeds --members: one E-seed trial's training step, paper-1 model, "
          f"{args.device}, median of {args.repeats} interleaved rounds x {args.steps} steps"
          + (f", --set {args.sets}" if args.sets else ""))
    print("  floor = necessary FLOPs of one member-step / float32 peak; ratio = ms per "
          "member-step / floor")
    print(f"  {'E':>5}  {'variant':<20} {'ms/step':>10} {'ms/member':>12} {'floor':>9}"
          f" {'ratio':>9}")
    rows = [bench_members(e, args) for e in args.members]
    write_json(args.json, "bench_seeds", args, rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer k, steps and repeats")
    ap.add_argument("--repeats", type=int, default=None, help="alternating repeats (default 3)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                    help="intra-op thread counts, each a separate comparison")
    ap.add_argument("--long", action="store_true",
                    help="instead: paper-1 Z_113, k = 8, runs of 200 steps, eval every 100")
    ap.add_argument("--members", type=int, nargs="+", default=None, metavar="E",
                    help="instead: the step of one trial packing E seeds, per member-step and "
                         "against the float32 floor (see the module docstring)")
    ap.add_argument("--steps", type=int, default=None,
                    help="--members: steps per round (default 10 on CUDA, 2 on a CPU)")
    ap.add_argument("--peak-tflops", type=float, default=None,
                    help="--members: the floor's FP32 rate (default: 67 on CUDA, sgemm on CPU)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    add_common_options(ap)
    args = ap.parse_args(argv)
    parse_common(ap, args)
    args.repeats = args.repeats or (2 if args.quick or args.long else 3)
    if args.members:
        members_main(args)
        return
    plan = LONG if args.long else QUICK if args.quick else FULL
    print(f"bench_seeds: k seeds batched vs k sequential runs, whole train() calls, "
          f"{args.device}, median of {args.repeats} repeats")
    print("  ratios = sequential / batched (> 1: batching wins); run = whole calls, steady ="
          " after the first evaluation; ms = steady wall ms per member-step")
    print(f"  {'case':<24}{'thr':>4}{'k':>4}{'steps':>6}  {'run':>7} {'(cpu)':>6}"
          f"  {'steady':>7} {'(cpu)':>6}  {'batch ms':>8} {'seq ms':>8}")
    for threads in args.threads:
        for name, (ks, steps, every) in plan.items():
            for k in ks:
                bench(name, k, steps, every, threads, args)


if __name__ == "__main__":
    main()
