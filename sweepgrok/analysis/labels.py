"""Short, unambiguous labels of config keys for table headers, group labels and legends.

A key's last part alone is ambiguous (``task.name`` and ``model.name`` would both be "name";
``geomdr.enabled`` says nothing as "enabled"), so known keys get a label that names what they
are and every other key keeps its dotted path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sweepgrok.config.suggest import did_you_mean
from sweepgrok.core.errors import quoted

if TYPE_CHECKING:  # the CLI imports labels at start-up, before any command needs pandas
    import pandas as pd

KEY_LABELS = {
    "task.name": "task",
    "task.p": "p",
    "task.train_fraction": "train frac",
    "model.arch": "arch",
    "model.norm": "norm",
    "model.norm_eps": "norm eps",
    "model.attention": "attention",
    "model.n_layers": "layers",
    "model.d_model": "d_model",
    "optim.lr": "lr",
    "optim.weight_decay": "wd",
    "geomdr.enabled": "GeomDR",
    "geomdr.target_dim": "d*",
    "geomdr.penalty": "GeomDR penalty",
    "geomdr.solver": "GeomDR solver",
    "geomdr.start_step": "t_s",
    "geomdr.lambda_max": "lambda_max",
    "geomdr.ramp_steps": "T_ramp",
    "geomdr.subsample": "subsample",
    "grokfast.kind": "Grokfast",
    "optim.optimizer": "optimizer",
    "optim.loss": "loss",
    "optim.perpendicular_grad": "perp grad",
    "accelerator.arm": "arm",  # derived by analysis/accelerator_summary.py: the lever a run pulls
    "train.seed": "seed",
    "train.max_steps": "budget",
}
"""Dotted key -> its label; keys not listed are shown as their dotted path."""


def key_labels(keys: Sequence[str]) -> list[str]:
    """The labels of `keys`; the dotted paths where two labels would coincide."""
    labels = [KEY_LABELS.get(k, k) for k in keys]
    return labels if len(set(labels)) == len(labels) else list(keys)


def key_named(word: str, keys: Sequence[str]) -> str | None:
    """The key of `keys` that `word` names: the dotted key itself, or the key whose table label
    it is (``norm`` -> ``model.norm``: what a table's header shows is accepted back)."""
    if word in keys:
        return word
    return next((k for k in keys if KEY_LABELS.get(k) == word), None)


def unknown_key_message(word: str, keys: Sequence[str], varying: Sequence[str]) -> str:
    """Why `word` names none of `keys`: the closest key or label, the keys that vary (with
    their labels), then every key."""
    names = [*keys, *(KEY_LABELS[k] for k in keys if k in KEY_LABELS)]
    shown = [f"{k} ({KEY_LABELS[k]})" if k in KEY_LABELS else k for k in varying]
    return (
        f"unknown key {quoted(word)}{did_you_mean(word, names)}; keys that vary in these runs: "
        f"{', '.join(shown) or 'none'}; allowed: any of the runs' keys, dotted or by the "
        f"table's label: {', '.join(keys) or '(none)'}"
    )


def label_notes(summary: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    """What a label cannot say by itself, for the grouping `keys` of these runs: "wd" is
    decoupled weight decay under AdamW but an L2 term in the gradient under Adam."""
    under_adam = "optim.optimizer" in summary and (summary["optim.optimizer"] == "adam").any()
    if "optim.weight_decay" in keys and under_adam:
        return [
            "`wd` (`optim.weight_decay`) is the L2 coefficient added to the gradient for runs "
            "with `optim.optimizer: adam`, and decoupled weight decay for runs with adamw."
        ]
    return []
