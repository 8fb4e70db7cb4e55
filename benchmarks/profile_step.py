"""Where a training step's GPU time goes: the top kernels of sweepgrok's eager step (torch
profiler), paper-1 model at Z_113, for each ensemble size given.

Run: ``python -m benchmarks.profile_step --members 1 256 [--norm layernorm] [--rows 22]``
(CUDA only; the step is profiled eagerly, ``train.cuda_graph: off``: a replayed graph shows as
one event, and its kernels are the eager step's).
"""

from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from sweepgrok.config.trial import from_flat
from sweepgrok.train.process import configure_process
from sweepgrok.train.trainer import Trainer

PAPER1 = {"task.p": 113, "task.train_fraction": 0.3, "model.d_model": 128, "model.n_heads": 4,
          "model.d_mlp": 512, "optim.weight_decay": 1.0, "optim.lr": 1e-4,
          "train.device": "cuda", "train.cuda_graph": "off"}
WARMUP, PROFILED = 5, 5


def profile_members(e: int, norm: str, rows: int) -> None:
    cfg = from_flat({**PAPER1, "model.norm": norm, "train.seeds": list(range(e))})
    configure_process(cfg.train)
    trainer = Trainer(cfg)
    for _ in range(WARMUP):
        trainer.step += 1
        trainer._train_step(0.0)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED):
            trainer.step += 1
            trainer._train_step(0.0)
        torch.cuda.synchronize()
    events = prof.key_averages()
    kernels = sum(ev.count for ev in events if ev.self_device_time_total > 0)
    gpu_ms = sum(ev.self_device_time_total for ev in events) / 1e3 / PROFILED
    print(f"=== E={e} {norm}: {kernels / PROFILED:.0f} kernels, "
          f"{gpu_ms:.3f} ms of GPU time per step")
    print(events.table(sort_by="self_device_time_total", row_limit=rows,
                       max_name_column_width=70))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, nargs="+", default=[1, 256])
    parser.add_argument("--norm", default="layernorm")
    parser.add_argument("--rows", type=int, default=22)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("profile_step needs a CUDA device")
    for e in args.members:
        profile_members(e, args.norm, args.rows)


if __name__ == "__main__":
    main()
