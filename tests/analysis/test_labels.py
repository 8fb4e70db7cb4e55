"""sweepgrok.analysis.labels: short labels of config keys, and the notes a label needs."""

from __future__ import annotations

import pandas as pd

from sweepgrok.analysis.labels import (
    KEY_LABELS,
    key_labels,
    key_named,
    label_notes,
    unknown_key_message,
)


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


def test_every_label_names_its_key_back() -> None:
    # One mapping both ways: what a table's header shows, --by and --baseline accept.
    keys = list(KEY_LABELS)
    assert [key_named(KEY_LABELS[k], keys) for k in keys] == keys
    assert key_named("model.norm", keys) == "model.norm"
    assert key_named("norm", ["optim.lr"]) is None  # a label of a key the runs lack
    message = unknown_key_message("nrom", ["model.norm", "optim.lr"], ["model.norm"])
    assert message.startswith("unknown key 'nrom' (did you mean 'norm'?); keys that vary in "
                              "these runs: model.norm (norm); allowed: ")
