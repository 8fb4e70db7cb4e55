"""k init seeds trained in lockstep (``train.seeds``, one batched model) vs k separate runs.

Run: ``python -m benchmarks.bench_seeds [--quick] [--device cpu|cuda] [--threads 1]``.

Both sides are whole ``sweepgrok.trainer.train`` calls (training steps, evaluations with the
geometry measurements, run bookkeeping; no sink), on the same config and thread count:
``batched`` is one call with ``train.seeds = [0..k-1]``, ``sequential`` is k calls with
``train.seed = i``. They are timed alternately (the order flips every repeat) and the median
of the repeats is taken, so that machine load hits both alike. The result is the ratio
sequential / batched (> 1: batching wins). Early stopping is off so both do the same work.

Cases: the paper-1 model at Z_113 (k = 1, 4, 8: one k = 16 step at that size takes ~1 s on a
CPU core, so k = 16 runs on the small model) and the small quick-trial model
(trial_quick.yaml's size: p = 47, d_model 64, d_mlp 256; k = 1, 4, 16).
"""

from __future__ import annotations

import argparse
import statistics
import time

from sweepgrok.config import Config, from_flat, update
from sweepgrok.trainer import train

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
FULL = {"paper-1 Z_113 sphere": ((1, 4, 8), 10, 5), "small p=47 d=64 sphere": ((1, 4, 16), 60, 20)}
QUICK = {"paper-1 Z_113 sphere": ((8,), 4, 2), "small p=47 d=64 sphere": ((4, 16), 30, 10)}


def _config(case: dict, steps: int, eval_every: int, args: argparse.Namespace) -> Config:
    return from_flat({
        **case, "train.max_steps": steps, "train.eval_every": eval_every,
        "train.early_evals": False, "train.stop_after_grok": False, "train.device": args.device,
        "train.threads": args.threads, "task.split_follows_seed": True,
    })


def _timed(fn) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def bench(name: str, k: int, steps: int, eval_every: int, args: argparse.Namespace) -> None:
    cfg = _config(CASES[name], steps, eval_every, args)
    batched_cfg = update(cfg, {"train.seeds": list(range(k))})

    def batched() -> None:
        train(batched_cfg)

    def sequential() -> None:
        for seed in range(k):
            train(cfg.member(seed))

    train(cfg.member(0))  # warm-up
    b: list[tuple[float, float]] = []
    s: list[tuple[float, float]] = []
    for rep in range(args.repeats):
        for fn, out in ((batched, b), (sequential, s)) if rep % 2 == 0 else (
                (sequential, s), (batched, b)):
            out.append(_timed(fn))
    bw, bc = (statistics.median(x[i] for x in b) for i in (0, 1))
    sw, sc = (statistics.median(x[i] for x in s) for i in (0, 1))
    print(f"  {name:<24}{k:>4}{steps:>7}  {sw / bw:>8.2f}x {sc / bc:>6.2f}x"
          f"  {bw:>8.2f} {sw:>8.2f}", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer k, steps and repeats")
    ap.add_argument("--repeats", type=int, default=None, help="alternating repeats (default 3)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args(argv)
    args.repeats = args.repeats or (2 if args.quick else 3)
    plan = QUICK if args.quick else FULL
    print(f"bench_seeds: k seeds batched vs k sequential runs, whole train() calls, "
          f"{args.device}, {args.threads} thread(s), median of {args.repeats} repeats")
    print(f"  {'case':<24}{'k':>4}{'steps':>7}  {'seq/batch':>9} {'(cpu)':>6}"
          f"  {'batch s':>8} {'seq s':>8}")
    for name, (ks, steps, every) in plan.items():
        for k in ks:
            bench(name, k, steps, every, args)


if __name__ == "__main__":
    main()
