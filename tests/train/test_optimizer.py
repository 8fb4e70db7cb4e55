"""optim.optimizer: AdamW's decoupled decay against Adam's L2 term, checked on the first step
of a real trainer against Adam's formulas written out by hand.

On step 1 Adam's bias-corrected moments are m = g' and v = g'^2, so the update is
lr * g' / (|g'| + eps), with g' the gradient the optimizer sees:
- adamw: g' = g, then the weights shrink by lr * wd * w, outside the moments;
- adam: g' = g + wd * w (the L2 term goes through the moments).
"""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_config

from sweepgrok.config.trial import ConfigError, from_flat
from sweepgrok.train.trainer import Trainer

LR, WD, EPS = 0.01, 0.5, 1e-8
TINY = tiny_config({"task.p": 11, "train.threads": 1, "optim.lr": LR, "optim.weight_decay": WD,
                    "optim.eps": EPS, "train.device": "cpu"})


Tensors = list[torch.Tensor]


def _first_step(optimizer: str) -> tuple[Tensors, Tensors, Tensors]:
    """(weights before, raw task gradients, weights after) of every parameter with a gradient."""
    trainer = Trainer(from_flat({**TINY, "optim.optimizer": optimizer}))
    params = list(trainer.model.parameters())
    before = [p.detach().clone() for p in params]
    trainer._step_body(0.0, False)
    # Neither optimizer writes into p.grad: it still holds the task gradient g.
    kept = [i for i, p in enumerate(params) if p.grad is not None]
    return ([before[i] for i in kept], [params[i].grad.clone() for i in kept],
            [params[i].detach().clone() for i in kept])


def test_adamw_decays_outside_the_moments():
    before, grads, after = _first_step("adamw")
    for w, g, w1 in zip(before, grads, after, strict=True):
        expected = w * (1 - LR * WD) - LR * g / (g.abs() + EPS)
        torch.testing.assert_close(w1, expected, rtol=1e-5, atol=1e-7)


def test_adam_adds_the_l2_term_to_the_gradient():
    before, grads, after = _first_step("adam")
    assert before
    for w, g, w1 in zip(before, grads, after, strict=True):
        coupled = g + WD * w
        expected = w - LR * coupled / (coupled.abs() + EPS)
        torch.testing.assert_close(w1, expected, rtol=1e-5, atol=1e-7)


def test_the_two_optimizers_differ_where_decay_acts():
    # Not the same step under two names: with wd 0.5 the first steps differ.
    _, _, adamw = _first_step("adamw")
    _, _, adam = _first_step("adam")
    assert max((a - b).abs().max().item() for a, b in zip(adamw, adam, strict=True)) > 1e-4


def test_an_unknown_optimizer_names_the_key_and_the_choices():
    with pytest.raises(ConfigError) as err:
        from_flat({**TINY, "optim.optimizer": "sgd"})
    message = str(err.value)
    assert "optim.optimizer" in message and "adamw" in message and "adam" in message


def test_without_weight_decay_adam_and_adamw_are_the_same_optimizer():
    # Why a weight-decay-0 baseline run with AdamW also stands for Adam (repro3_grokfast_twin_l2_cpu
    # does not rerun it): three steps of each give the same weights to the last bit.
    def three_steps(optimizer: str) -> list[torch.Tensor]:
        trainer = Trainer(from_flat({**TINY, "optim.optimizer": optimizer,
                                     "optim.weight_decay": 0.0}))
        for _ in range(3):
            trainer._step_body(0.0, False)
        return [p.detach().clone() for p in trainer.model.parameters()]

    for a, b in zip(three_steps("adam"), three_steps("adamw"), strict=True):
        assert torch.equal(a, b)
