"""k init seeds trained in lockstep (``train.seeds``, one batched model) vs k separate runs.

Run: ``python -m benchmarks.bench_seeds [--quick | --long] [--device cpu|cuda] [--threads 1 2]``
(``--long``: one paper-1 k = 8 check with runs of 200 steps; on 2 cores of a Zen 2 EPYC
~11 minutes at 2 threads and ~17 at 1).

Both sides are whole ``sweepgrok.trainer.train`` calls (training steps, evaluations with the
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
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter

from sweepgrok.config import Config, from_flat, update
from sweepgrok.process import configure_process
from sweepgrok.trainer import EvalReport, train

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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer k, steps and repeats")
    ap.add_argument("--repeats", type=int, default=None, help="alternating repeats (default 3)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                    help="intra-op thread counts, each a separate comparison")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--long", action="store_true",
                    help="instead: paper-1 Z_113, k = 8, runs of 200 steps, eval every 100")
    args = ap.parse_args(argv)
    args.repeats = args.repeats or (2 if args.quick or args.long else 3)
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
