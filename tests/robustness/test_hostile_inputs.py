"""Hostile input files through the real commands: each exits 2 with one line naming the file,
never a traceback, never a hang (the limits are those of sweepgrok.config.yamlfile and spaces)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from conftest import tiny_tree
from typer.testing import CliRunner

from sweepgrok.cli import app
from sweepgrok.config.grid_file import MAX_TRIALS
from sweepgrok.config.yamlfile import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES
from sweepgrok.core.errors import QUOTE_LIMIT

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
BASE = tiny_tree({"task.p": 11})


def run(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, list(args))
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res.exit_code, res.output


def refused(path: Path, *words: str, command: str = "validate") -> str:
    """Run `sweepgrok <command> path`: exit 2, one line naming the file and all `words`."""
    code, out = run(command, str(path), *(["--dry-run"] if command == "launch" else []))
    lines = out.strip().splitlines()
    assert code == 2, out
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: "), out
    for word in words:
        assert word in lines[0], out
    return lines[0]


def write(tmp_path: Path, text: str | bytes, name: str = "f.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def grid(tmp_path: Path, name: str = "g.yaml", **doc: object) -> Path:
    return write(tmp_path, yaml.safe_dump({"name": "g", "base": BASE, **doc}), name)


# ---- 1. encodings and nesting ------------------------------------------------------------------


def test_utf16_binary_and_control_characters_are_refused(tmp_path):
    refused(write(tmp_path, "task: {p: 7}\n".encode("utf-16")), "not UTF-8")
    refused(write(tmp_path, bytes(range(256)) * 4), "not UTF-8")
    refused(write(tmp_path, "task: {p: 7}\x00\n"), "invalid YAML", "#x0000")


def test_a_thousand_levels_of_nesting_is_refused_not_a_recursion_error(tmp_path):
    for text in ("model: " + "[" * 1000 + "]" * 1000, "model: " + "{a: " * 1000 + "1" + "}" * 1000):
        refused(write(tmp_path, text), f"limit of {MAX_DEPTH} levels")
    # Aliases that stack shallow lists into a deep one are measured expanded.
    lines = ["a0: &a0 [[[[[[[[1]]]]]]]]"]
    lines += [f"a{i}: &a{i} [[[[[[[[*a{i - 1}]]]]]]]]" for i in range(1, 6)]
    refused(write(tmp_path, "\n".join(lines)), f"limit of {MAX_DEPTH} levels")


# ---- 2. user text is never rich markup ---------------------------------------------------------


def test_markup_in_keys_names_and_values_is_printed_literally(tmp_path):
    trial = ROOT / "search_spaces/trials/trial_quick.yaml"
    code, out = run("train", str(trial), "--set", "[/]=1")
    assert code == 2 and "unknown key '[/]'" in out
    named = write(tmp_path, yaml.safe_dump({"name": "[/]", "grid": {"model.norm": ["none"]}}))
    refused(named, "(got '[/]')")
    refused(named, "(got '[/]')", command="launch")
    bold = write(tmp_path, "model: {norm: '[bold]sphere[/]'}\n")
    refused(bold, "got '[bold]sphere[/]'")
    syntax = write(tmp_path, "grid: {model.norm: [none, sphere}\n")
    refused(syntax, "invalid YAML (line 1, column 33", "expected ',' or ']', but got '}'")


def test_a_storage_path_with_markup_is_printed_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = grid(tmp_path, grid={"model.norm": ["none", "sphere"]})
    code, out = run("launch", str(path), "--dry-run", "--storage", "[/]")
    assert code == 0 and "sweep folder: [/]/g" in out, out


def test_a_search_file_with_markup_is_refused_plainly(tmp_path):
    doc = {"name": "[bold]x", "search": {"space": {"optim.lr": {"uniform": [0.1, "[/]"]}}}}
    path = write(tmp_path, yaml.safe_dump(doc))
    code, out = run("search", str(path))
    assert code == 2 and out.startswith(f"error: {path}: ") and "'[/]'" in out, out


# ---- 3. alias bombs and long values ------------------------------------------------------------


def billion_laughs(levels: int, value: str = "lol") -> str:
    """A flow list of 9^levels values in a few hundred bytes: each level is an anchored list
    whose first item defines the level below and whose 8 others are aliases of it."""
    text = f"&a0 [{', '.join([value] * 9)}]"
    for i in range(1, levels):
        text = f"&a{i} [{text}, {', '.join([f'*a{i - 1}'] * 8)}]"
    return text


def test_an_alias_bomb_is_refused_at_the_node_limit(tmp_path):
    text = f"model: {{norm: {billion_laughs(9)}}}\n"
    assert len(text) < 1000
    refused(write(tmp_path, text), f"limit of {MAX_NODES:,} values", "aliases")
    grid_bomb = f"name: g\ngrid: {{model.norm: {billion_laughs(9)}}}\n"
    refused(write(tmp_path, grid_bomb), f"limit of {MAX_NODES:,} values", command="launch")


def test_a_long_value_is_quoted_as_a_short_excerpt(tmp_path):
    # 9^4 values, under the node limit: the message quotes a few of them, not all.
    bomb = billion_laughs(4, value="'[bold]x'")
    text = f"model: {{norm: {bomb}}}\n"
    line = refused(write(tmp_path, text), "model.norm: must be one of")
    grid_value = f"name: g\ngrid: {{model.norm: [{billion_laughs(4)}]}}\n"
    assert len(refused(write(tmp_path, grid_value), "trial 0 (model.norm=[")) < 400
    assert len(line) < 300, line
    long = write(tmp_path, f"model: {{norm: {'x' * 5000}}}\n")
    assert len(refused(long, "model.norm", "...")) < 300
    key = write(tmp_path, f"model: {{{'k' * 1000}: 1}}\n")  # YAML keys: <= 1024
    assert len(refused(key, "unknown key")) < 400
    seeds = write(tmp_path, f"train: {{seeds: [{', '.join(['1'] * 1000)}]}}\n")
    assert len(refused(seeds, "train.seeds must be")) < 400


def test_a_huge_integer_is_refused_not_a_traceback(tmp_path):
    refused(write(tmp_path, f"task: {{p: {'7' * 5000}}}\n"), "integer too large")
    sexagesimal = write(tmp_path, "task: {p: 1" + ":0" * 3000 + "}\n")
    refused(sexagesimal, "task.p", "must be an integer")  # YAML 1.2: text, not base 60


# ---- 4. huge and special files -----------------------------------------------------------------


def test_base_dev_zero_a_fifo_and_a_folder_are_refused(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for base in ("/dev/zero", str(fifo), str(tmp_path)):
        path = write(tmp_path, yaml.safe_dump({"base": base, "grid": {"model.norm": ["none"]}}))
        refused(path, f"base: {base}: not a regular file")
    refused(fifo, "not a regular file", command="train")


def test_a_file_over_the_size_limit_is_refused(tmp_path):
    big = write(tmp_path, "# padding\n" * (MAX_FILE_BYTES // 10 + 1), "big.yaml")
    refused(big, f"limit of {MAX_FILE_BYTES // 1024} KiB")
    path = write(tmp_path, yaml.safe_dump({"base": "big.yaml", "grid": {"model.norm": ["none"]}}))
    refused(path, "big.yaml: larger than the limit")


# ---- 5. not a mapping, empty axes, duplicate keys ----------------------------------------------


@pytest.mark.parametrize("text", ["0", "false", "[]", "''", "~", "", "# only a comment", "x"])
def test_a_document_that_is_not_a_mapping_is_refused(tmp_path, text):
    path = write(tmp_path, text + "\n")
    refused(path, "must be a mapping")
    refused(path, "must be a mapping", command="train")
    refused(path, "must be a mapping", command="launch")
    refused(path, "must be a mapping", command="search")


@pytest.mark.parametrize(
    ("axes", "words"),
    [
        ({"grid": []}, ["grid: must be a valid dictionary"]),
        ({"grid": {}}, ["grid: must have at least 1 item"]),
        ({"zip": 0}, ["zip: must be a valid list"]),
        ({"zip": []}, ["zip: must have at least 1 item"]),
        ({"zip": [{}]}, ["zip[0]: must have at least 1 item"]),
        ({"grid": {"model.norm": []}}, ["grid.model.norm: must be a non-empty list"]),
    ],
)
def test_empty_or_misshapen_axes_are_refused(tmp_path, axes, words):
    refused(grid(tmp_path, **axes), *words)


def test_a_base_file_that_is_empty_is_refused(tmp_path):
    write(tmp_path, "", "empty.yaml")
    path = write(tmp_path, yaml.safe_dump({"base": "empty.yaml", "grid": {"model.norm": ["none"]}}))
    refused(path, "base:", "empty.yaml: must be a mapping of sections (got an empty document)")


def test_duplicate_keys_are_refused_naming_the_key(tmp_path):
    refused(write(tmp_path, "task: {p: 7}\nmodel: {}\ntask: {p: 11}\n"), "duplicate key 'task'")
    refused(write(tmp_path, "model:\n  norm: none\n  norm: sphere\n"), "'norm' (line 3)")
    merged = write(tmp_path, "d: &d {p: 7}\n")  # a merge key may be overridden: not a duplicate
    assert "duplicate key" not in refused(merged, "unknown key 'd'")
    merge_ok = write(tmp_path, "task: {<<: {p: 7, name: add}, p: 11}\n")
    code, out = run("validate", str(merge_ok))
    assert code == 0 and "(p=11)" in out, out


# ---- 6. a secret file named by base: is never quoted -------------------------------------------


@pytest.mark.parametrize(
    "secret",
    [
        "TOKEN=hunter2-secret\n",
        "password: hunter2-secret\n",
        "- hunter2-secret\n",
        "task: {p: 7}\nkey: [hunter2-secret\n",
        "task: {p: 7}\n\thunter2-secret: 1\n",
    ],
)
def test_a_line_of_a_file_named_by_base_is_never_printed(tmp_path, secret):
    write(tmp_path, secret, "secret.env")
    path = write(tmp_path, yaml.safe_dump({"base": "secret.env", "grid": {"model.norm": ["none"]}}))
    line = refused(path, "secret.env")
    assert "hunter2" not in line


# ---- 7. grid size is checked before expanding --------------------------------------------------


def test_a_grid_of_a_hundred_million_trials_is_refused_before_expanding(tmp_path):
    axis = list(range(100))
    path = grid(
        tmp_path,
        grid={
            "task.data_seed": axis,
            "model.d_mlp": [a + 1 for a in axis],
            "train.max_steps": [a + 1 for a in axis],
        },
        seeds=axis,
    )
    line = refused(path, "100,000,000 trials (100 x 100 x 100 x 100)", f"{MAX_TRIALS:,} trials")
    assert "grid:" in line
    refused(path, "100,000,000 trials", command="launch")


def test_the_docs_state_the_limits_the_code_applies():
    text = " ".join((ROOT / "docs/grids.md").read_text().split())
    assert f"at most {MAX_FILE_BYTES // 2**20} MiB" in text
    assert f"at most {MAX_DEPTH} levels" in text
    assert f"at most {MAX_NODES:,} values" in text
    assert f"at most {MAX_TRIALS:,} trials" in text
    assert f"({QUOTE_LIMIT} characters)" in text
