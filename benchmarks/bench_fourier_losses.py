"""Cost of the restricted / excluded losses (Nanda et al.) as a share of a run's time.

Run: ``python -m benchmarks.bench_fourier_losses [--quick] [--device cpu|cuda] [--members 1]``.

The paper-1 Transformer on addition mod 113 (d 128, d_mlp 512, 4 heads, train fraction 0.3,
geometry on, as the defaults), through ``sweepgrok.train.trainer.Trainer``. Timed side by side, in
rounds (round-robin, medians), wall clock and process CPU time:

- ``step``: one training step (``Trainer._train_step``);
- ``eval on``: one evaluation (``Trainer._evaluate``: every measure, the host read, the rows);
- ``eval off``: the same evaluation with the restricted / excluded losses switched off (the
  benchmark makes ``evaluation.fourier_losses_apply`` answer no);
- ``measure``: the added work alone: the key frequencies and the two losses from the logits
  that the evaluation has already computed.

The cost of the measure is ``measure`` (and, as a cross-check, ``eval on - eval off``) divided
by the time a run spends per evaluation at the default interval (``train.eval_every`` steps plus
one evaluation). Only the ratios are the result; absolute times move with the machine.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from sweepgrok.config.trial import TrainConfig, from_flat
from sweepgrok.train import evaluation
from sweepgrok.train import fourier_losses as fl
from sweepgrok.train.models import Transformer
from sweepgrok.train.process import configure_process
from sweepgrok.train.trainer import Trainer

PAPER1 = {"task.name": "add", "task.p": 113, "task.train_fraction": 0.3, "model.d_model": 128,
          "model.n_heads": 4, "model.d_mlp": 512}
EVAL_EVERY = TrainConfig().eval_every  # the default interval


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def timed(fn: Callable[[], object], sync: Callable[[], None]) -> tuple[float, float]:
    """(wall, cpu) seconds of one call of fn, the device drained before and after."""
    sync()
    w0, c0 = _clock()
    fn()
    sync()
    w1, c1 = _clock()
    return w1 - w0, c1 - c0


def variants(trainer: Trainer) -> dict[str, Callable[[], object]]:
    """The four timed calls (see the module docstring)."""
    real = evaluation.fourier_losses_apply

    def eval_off() -> object:
        evaluation.fourier_losses_apply = lambda cfg: False  # type: ignore[assignment]
        try:
            return trainer._evaluate(0, 0.0)
        finally:
            evaluation.fourier_losses_apply = real  # type: ignore[assignment]

    model = trainer.model
    assert isinstance(model, Transformer)  # the Fourier losses are measured on the Transformer
    with torch.no_grad():
        train_logits, test_logits = model(trainer.train_x), model(trainer.test_x)
    loss = trainer.cfg.optim.loss

    @torch.no_grad()
    def measure() -> object:
        freqs = fl.key_frequencies(model.token_embedding)
        return evaluation._fourier_losses((train_logits, trainer.train_y),
                                          (test_logits, trainer.test_y), freqs, loss)

    return {"step": lambda: trainer._train_step(0.0),
            "eval on": lambda: trainer._evaluate(0, 0.0),
            "eval off": eval_off,
            "measure": measure}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--members", type=int, default=1, help="seeds batched (train.seeds)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    rounds = 3 if args.quick else 7
    cfg = from_flat({**PAPER1, "train.device": args.device, "train.threads": args.threads,
                     "train.seeds": list(range(args.members))})
    configure_process(cfg.train)
    trainer = Trainer(cfg)
    trainer._t0 = time.perf_counter()
    cuda = trainer.train_x.is_cuda
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    calls = variants(trainer)
    for fn in calls.values():  # warm-up: first-touch memory, lazy inits
        timed(fn, sync)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            times[name].append(timed(fn, sync))
    report(times, args, rounds)


def report(times: dict[str, list[tuple[float, float]]], args: argparse.Namespace,
           rounds: int) -> None:
    """Print the medians and the cost shares, wall clock and CPU time."""
    med = {name: tuple(statistics.median(t[i] for t in ts) for i in (0, 1))
           for name, ts in times.items()}
    print(f"paper-1 Transformer, add mod 113, {args.members} member(s), {args.threads} "
          f"thread(s), {args.device}; {rounds} rounds, medians; train.eval_every = {EVAL_EVERY}")
    print("| clock | step ms | eval off ms | eval on ms | measure ms | measure / eval | "
          "measure / run | (on - off) / run |")
    print("|---|---|---|---|---|---|---|---|")
    for i, clock in enumerate(("wall", "cpu")):
        step, off, on, meas = (med[n][i] for n in ("step", "eval off", "eval on", "measure"))
        run = EVAL_EVERY * step + off  # a run's time per evaluation without the measure
        print(f"| {clock} | {1e3 * step:.1f} | {1e3 * off:.1f} | {1e3 * on:.1f} | "
              f"{1e3 * meas:.2f} | {meas / off:.1%} | {meas / run:.3%} | {(on - off) / run:.3%} |")


if __name__ == "__main__":
    main()
