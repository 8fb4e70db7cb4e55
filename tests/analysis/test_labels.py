"""sweepgrok.analysis.labels: short labels of config keys, and the notes a label needs."""

from __future__ import annotations

import pandas as pd

from sweepgrok.analysis.labels import key_labels, label_notes


def test_known_keys_get_short_labels_and_clashes_keep_their_paths() -> None:
    assert key_labels(["optim.weight_decay", "model.norm"]) == ["wd", "norm"]
    assert key_labels(["model.foo", "optim.foo"]) == ["model.foo", "optim.foo"]


def test_wd_under_adam_is_said_to_be_an_l2_term() -> None:
    adam = pd.DataFrame({"optim.optimizer": ["adam", "adamw"], "optim.weight_decay": [0.0, 1.0]})
    (note,) = label_notes(adam, ["optim.weight_decay"])
    assert "L2 coefficient" in note and "optim.optimizer: adam" in note
    assert label_notes(adam, ["model.norm"]) == []  # no wd label in the tables
    adamw = adam.assign(**{"optim.optimizer": ["adamw", "adamw"]})
    assert label_notes(adamw, ["optim.weight_decay"]) == []
    assert label_notes(adam.drop(columns="optim.optimizer"), ["optim.weight_decay"]) == []
