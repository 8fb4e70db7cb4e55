"""docs/config.md is generated from the config field docstrings; the committed file is current."""

import subprocess
import sys
from pathlib import Path

from sweepgrok.config.docs import REGENERATE, allowed_text, render, section_table, type_name
from sweepgrok.config.trial import SECTIONS, all_keys, describe_keys

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "config.md"


def test_committed_reference_is_current():
    assert DOC.read_text() == render(), (
        f"docs/config.md is stale (a config field or its docstring changed): run `{REGENERATE}`"
    )


def test_every_key_has_one_row_with_its_docstring():
    text = render()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == all_keys()
    for row, key in zip(rows, all_keys(), strict=True):
        assert describe_keys()[key].replace("|", "\\|").replace("*", "\\*") in row


def test_cells_show_type_default_choices_and_bounds():
    task = section_table("task")
    assert "| `task.name` | str | `add` | `add`, `sub`, `mul`, `div`, `s5`, `div_odd_sub`, " in task
    assert "| `task.p` | int | `113` | [2, 2000] |" in task
    assert "| `task.train_fraction` | float | `0.3` | (0.0, 1.0) |" in task
    optim = section_table("optim")
    assert "| `optim.betas` | [float, float] | `[0.9, 0.98]` | - |" in optim
    assert "| `optim.batch_size` | int or null | `null` | [1, 4000000] |" in optim
    assert "| `optim.warmup_steps` | int | `0` | [0, 100000000] |" in optim
    assert type_name(SECTIONS["train"].model_fields["seeds"].annotation) == "list[int] or null"
    assert allowed_text(SECTIONS["train"].model_fields["seeds"]) == "at most 1024 items"
    assert allowed_text(SECTIONS["geomdr"].model_fields["subsample"]) == "(0.0, 1.0]"
    assert allowed_text(SECTIONS["model"].model_fields["temperature"]) == "> 0.0"


def test_pipes_in_docstrings_do_not_split_a_table_row():
    row = next(line for line in section_table("model").splitlines() if "`model.norm`" in line)
    assert "\\|\\|h\\|\\|" in row
    assert row.replace("\\|", "").count("|") == 6  # five cells


def test_module_prints_the_reference():
    out = subprocess.run(
        [sys.executable, "-m", "sweepgrok.config.docs"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    assert out == render()
