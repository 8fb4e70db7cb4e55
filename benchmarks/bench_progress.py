"""What the progress measures cost: training with them vs without, side by side.

Run: ``python -m benchmarks.bench_progress [--quick] [--device cpu|cuda] [--threads 1]``

The progress measures (sweepgrok.train.progress_measures: per-group weight norms, logit norm and
softmax-collapse share, attention entropy per head; and the test split's D_eff) run at
evaluations only. Two numbers per case:

- ``interval``: one evaluation interval at the default ``train.eval_every`` (200 steps, then
  one evaluation), timed from the end of the step-0 evaluation to the end of the next, as
  whole ``sweepgrok.train.trainer.train`` calls *with* the measures and *without* them (the
  measures replaced by no-ops), alternated (the order flips every repeat), median of the
  repeats: the ratio with / without is what they add to a run.
- ``share``: each measure alone, timed on the case's model and data as the evaluation calls
  it (median of 20 calls), divided by the interval without the measures: the fraction of a
  run's time that measure costs (the issue's bound: at most 10% each). Collecting the
  attention weights in the forward pass is a view of a tensor the pass computes anyway.

Cases: the quickstart's Transformer (Z_47, d_model 64, 1 layer), paper 1's Transformer at
Z_113 and paper 2's MLP at Z_97 (2 hidden layers of 512); --quick: the quickstart's and the
MLP with fewer repeats.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from benchmarks.bench_trainer import P1, P2
from sweepgrok.config.trial import Config, from_flat
from sweepgrok.train import evaluation
from sweepgrok.train import progress_measures as progress
from sweepgrok.train.models import Transformer
from sweepgrok.train.process import configure_process
from sweepgrok.train.trainer import EvalReport, Trainer, train

QUICKSTART = {
    "task.p": 47, "task.train_fraction": 0.7, "model.d_model": 64, "model.n_heads": 4,
    "model.d_mlp": 256, "optim.weight_decay": 1.0,
}
CASES: dict[str, dict] = {"quickstart Z_47 Transformer": QUICKSTART,
                          "paper-1 Z_113 Transformer": P1, "paper-2 Z_97 MLP": P2}
QUICK = ("quickstart Z_47 Transformer", "paper-2 Z_97 MLP")
EVAL_EVERY = 200  # train.eval_every's default


def _config(case: dict, device: str, threads: int) -> Config:
    return from_flat({
        **case, "train.max_steps": EVAL_EVERY, "train.eval_every": EVAL_EVERY,
        "train.early_evals": False, "train.stop_after_grok": False, "train.device": device,
        "train.threads": threads,
    })


@contextmanager
def without_measures() -> Iterator[None]:
    """The evaluation with the progress measures replaced by no-ops (test D_eff: NaN)."""
    saved = evaluation._progress, evaluation._deff
    evaluation._progress = lambda *args: {}  # type: ignore[assignment]

    def no_deff(hidden: list[torch.Tensor], idx: torch.Tensor) -> torch.Tensor:
        return torch.full((hidden[0].shape[0], len(hidden)), math.nan, device=idx.device)

    evaluation._deff = no_deff  # type: ignore[assignment]
    try:
        yield
    finally:
        evaluation._progress, evaluation._deff = saved


def _interval(cfg: Config, sync: Callable[[], None]) -> float:
    """Wall seconds from the end of the step-0 evaluation to the end of the next one."""
    marks: list[float] = []

    def on_eval(_: EvalReport) -> None:
        sync()
        marks.append(time.perf_counter())

    train(cfg, on_eval=on_eval)
    return marks[1] - marks[0]


def _median_call(fn: Callable[[], Any], sync: Callable[[], None], calls: int = 20) -> float:
    fn()  # warm-up
    times = []
    for _ in range(calls):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@torch.no_grad()
def measure_costs(cfg: Config, sync: Callable[[], None]) -> dict[str, float]:
    """Seconds per evaluation of each progress measure alone, as the evaluation calls it."""
    t = Trainer(cfg)
    model = t.model
    attn: list[torch.Tensor] | None = [] if isinstance(model, Transformer) else None
    train_stats = evaluation._split_stats(model, t.train_x, t.train_y, [], cfg.optim.loss, attn)
    test_hidden: list[torch.Tensor] = []
    evaluation._split_stats(model, t.test_x, t.test_y, test_hidden, cfg.optim.loss)
    costs = {
        "weight norms": lambda: (progress.group_weight_norms(model),
                                 progress.layer_group_weight_norms(model)),
        "logit norm + collapse": lambda: (progress.logit_norm(train_stats.logits),
                                          progress.collapse_share(train_stats.per_example)),
        "D_eff test": lambda: evaluation._deff(test_hidden, t.geo_test_idx),
    }
    if attn:
        costs["attn entropy"] = lambda: progress.attention_entropy(attn)
    return {name: _median_call(fn, sync) for name, fn in costs.items()}


def bench(name: str, threads: int, repeats: int, device: str) -> None:
    cfg = _config(CASES[name], device, threads)
    configure_process(cfg.train)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with_m: list[float] = []
    without_m: list[float] = []
    for r in range(repeats):
        for first in ((True, False) if r % 2 == 0 else (False, True)):
            if first:
                with_m.append(_interval(cfg, sync))
            else:
                with without_measures():
                    without_m.append(_interval(cfg, sync))
    w, wo = statistics.median(with_m), statistics.median(without_m)
    shares = {k: v / wo for k, v in measure_costs(cfg, sync).items()}
    share_text = ", ".join(f"{k} {100 * v:.2f}%" for k, v in shares.items())
    print(f"  {name:<28}{threads:>4}  {wo:>8.2f}s {w:>8.2f}s  {w / wo:>6.3f}x  {share_text}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two cases, fewer repeats")
    ap.add_argument("--repeats", type=int, default=None, help="alternating repeats (default 3)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 3)
    names = QUICK if args.quick else tuple(CASES)
    print(f"bench_progress: one interval of {EVAL_EVERY} steps + 1 evaluation, with vs without "
          f"the progress measures, {args.device}, median of {repeats} alternating repeats")
    print("  share = one measure's time per evaluation / the interval without the measures")
    print(f"  {'case':<28}{'thr':>4}  {'without':>9} {'with':>9}  {'ratio':>7}  share")
    for threads in args.threads:
        for name in names:
            bench(name, threads, repeats, args.device)


if __name__ == "__main__":
    main()
