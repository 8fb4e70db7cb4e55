"""A training step never reads a tensor back to the host from sweepgrok's code.

On a GPU every such read (``.item()``, ``.tolist()``, ``if t:``, ``float(t)``, ``.cpu()``)
stalls the launch queue until the device catches up. No GPU is needed to catch them: the
Tensor methods that read values are wrapped to record any call made from a frame inside the
sweepgrok package during ``Trainer._train_step``. Calls from torch itself are not counted
(AdamW reads its step count, which lives on the host, with ``.item()``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from conftest import tiny_config

import sweepgrok
from sweepgrok.config.trial import from_flat
from sweepgrok.train.geomdr import geomdr_lambda
from sweepgrok.train.trainer import Trainer

PACKAGE = str(Path(sweepgrok.__file__).resolve().parent)
READS = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__")

TINY = tiny_config(
    {"task.p": 11, "train.max_steps": 20, "train.threads": 1, "geometry.sample": 32,
     "geometry.knn_k": 3},
    # device auto: where there is a GPU the steps are checked on it, where reads stall.
    defaults=("train.eval_every", "train.early_evals", "train.device"),
)
GEOMDR = {"geomdr.enabled": True, "geomdr.target_dim": 4, "geomdr.start_step": 0,
          "geomdr.ramp_steps": 0, "geomdr.lambda_max": 0.1}


@pytest.fixture
def host_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Records 'file:line method' for each value read made directly from sweepgrok code."""
    seen: list[str] = []

    def wrap(name: str):
        original = getattr(torch.Tensor, name)

        def read(self, *args, **kwargs):
            caller = sys._getframe(1)
            source = Path(caller.f_code.co_filename).resolve()
            if str(source).startswith(PACKAGE):
                seen.append(f"{source.name}:{caller.f_lineno} {name}")
            return original(self, *args, **kwargs)
        return read

    for name in READS:
        monkeypatch.setattr(torch.Tensor, name, wrap(name))
    yield seen


@pytest.mark.parametrize("extra", [
    {},
    {"model.norm": "layernorm", "model.n_layers": 2},
    {"model.attention": "uniform", "model.norm": "sphere", "train.seeds": [0, 1, 2]},
    {**GEOMDR, "geomdr.subsample": 0.5, "optim.batch_size": 16, "train.seeds": [0, 1]},
    {**GEOMDR, "model.arch": "mlp", "model.n_layers": 2},
    {"model.arch": "mlp", "optim.warmup_steps": 5, "optim.batch_size": 8},
    # Step 1 seeds the warm bases (eigh), steps 2-3 refine them.
    {**GEOMDR, "geomdr.solver": "subspace", "geomdr.subsample": 0.5, "model.arch": "mlp",
     "model.n_layers": 2, "train.seeds": [0, 1]},
], ids=["plain", "layernorm-2-layers", "uniform-3-seeds", "geomdr-subsample-minibatch",
        "geomdr-mlp", "mlp-warmup-minibatch", "geomdr-subspace-solver"])
def test_a_training_step_reads_nothing_back(extra, host_reads):
    trainer = Trainer(from_flat({**TINY, **extra}))
    host_reads.clear()  # building the trainer checks the task's table once, on the host
    for step in range(1, 4):  # the inner loop of Trainer.run
        trainer._set_lr(step)
        trainer._train_step(geomdr_lambda(step, trainer.cfg.geomdr))
    assert host_reads == []


def test_the_check_sees_a_read(host_reads):
    # The same check catches a read made from sweepgrok code (here: the evaluation, whose
    # one host sync per evaluation is by design).
    trainer = Trainer(from_flat(TINY))
    trainer._t0 = 0.0
    trainer._evaluate(0, 0.0)
    assert any("evaluation.py" in r and ("cpu" in r or "tolist" in r) for r in host_reads)
