"""Seeded fuzzing of `sweepgrok validate` with mutants of the shipped trial, grid and search files.

Each mutant (byte flips, truncation, key/value swaps, deep nesting, alias bombs, wrong types,
rich markup, huge numbers, NaN, duplicated lines, UTF-16) goes through the real command in
process (Typer's CliRunner) under a per-case timeout (pytest-timeout). Whatever the mutant, the
command exits 0 or 2, prints no traceback, and either summarizes the file (exit 0: and then the
library loader accepts the file too) or prints one line naming it (exit 2). Known-bad mutants
must exit 2.
"""

from __future__ import annotations

import contextlib
import faulthandler
import math
import random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from sweepgrok.cli import app
from sweepgrok.cli.validate import summarize

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "search_spaces").glob("*/*.yaml"))
"""Trial, grid and search files: search_spaces/<kind>/<name>.yaml."""
SEED = 20261203
MUTANTS_PER_FILE = 15
CASE_SECONDS = 10
"""A case that runs longer is a hang (a valid file validates in well under a second)."""

BOMB = "__FUZZ_BOMB__"
DEEP = "__FUZZ_DEEP__"
HUGE_INT = "__FUZZ_HUGE_INT__"
WRONG_VALUES: list[Any] = [
    None, True, False, 0, -1, 2, 10**30, 1e308, math.inf, -math.inf, math.nan, "", "x" * 500,
    "[/]", "[bold]sphere[/]", [], {}, [[1, [2]]], {"a": {"b": 1}}, "1", 0.5, -0.0,
    BOMB, DEEP, HUGE_INT,
]  # fmt: skip
"""What a wrong-type mutation writes over a value (placeholders are expanded in the text)."""


@dataclass(frozen=True)
class Mutant:
    """One case: the file it came from, how it was made, its bytes, and whether it must fail."""

    source: str
    how: str
    data: bytes
    must_fail: bool


# ---- the mutators ------------------------------------------------------------------------------


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path (keys / indices) to a value inside the document."""
    items: Any = []
    if isinstance(doc, dict):
        items = doc.items()
    elif isinstance(doc, list):
        items = enumerate(doc)
    for key, value in items:
        yield (*prefix, key)
        yield from _paths(value, (*prefix, key))


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


def _bomb(levels: int = 9) -> str:
    text = f"&b0 [{', '.join(['lol'] * 9)}]"
    for i in range(1, levels):
        text = f"&b{i} [{text}, {', '.join([f'*b{i - 1}'] * 8)}]"
    return text


def _dump(doc: Any) -> str:
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    for placeholder, value in (
        (BOMB, _bomb()),
        (DEEP, "[" * 1000 + "]" * 1000),
        (HUGE_INT, "9" * 5000),
    ):
        text = text.replace(f"'{placeholder}'", value).replace(placeholder, value)
    return text


def wrong_type(rng: random.Random, doc: Any, text: str) -> tuple[str, bool]:
    path = rng.choice(list(_paths(doc)))
    value = rng.choice(WRONG_VALUES)
    _parent(doc, path)[path[-1]] = value
    return _dump(doc), isinstance(value, str) and value in (BOMB, DEEP)


def hostile_value(rng: random.Random, doc: Any, text: str) -> tuple[str, bool]:
    """An alias bomb, a thousand levels of nesting, a 5000-digit integer, NaN or infinity."""
    path = rng.choice(list(_paths(doc)))
    value = rng.choice([BOMB, DEEP, HUGE_INT, math.nan, math.inf, 10**400])
    _parent(doc, path)[path[-1]] = value
    return _dump(doc), value in (BOMB, DEEP)


def swap_key_value(rng: random.Random, doc: Any, text: str) -> tuple[str, bool]:
    entries = [p for p in _paths(doc) if isinstance(_parent(doc, p), dict)]
    path = rng.choice(entries)
    parent = _parent(doc, path)
    value = parent.pop(path[-1])
    parent[value if isinstance(value, str | int | float | bool) else str(value)] = path[-1]
    return _dump(doc), False


def rename_key(rng: random.Random, doc: Any, text: str) -> tuple[str, bool]:
    entries = [p for p in _paths(doc) if isinstance(_parent(doc, p), dict)]
    path = rng.choice(entries)
    parent = _parent(doc, path)
    new = rng.choice(["[/]", "[bold]", "x" * 300, "model.norm", "name", "base", "1", "~"])
    parent[new] = parent.pop(path[-1])
    return _dump(doc), False


def drop_key(rng: random.Random, doc: Any, text: str) -> tuple[str, bool]:
    entries = [p for p in _paths(doc) if isinstance(_parent(doc, p), dict)]
    path = rng.choice(entries)
    del _parent(doc, path)[path[-1]]
    return _dump(doc), False


def flip_bytes(rng: random.Random, doc: Any, text: str) -> tuple[bytes, bool]:
    data = bytearray(text.encode())
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    return bytes(data), False


def truncate(rng: random.Random, doc: Any, text: str) -> tuple[str, bool]:
    return text[: rng.randrange(len(text))], False


def duplicate_line(rng: random.Random, doc: Any, text: str) -> tuple[str, bool]:
    """Repeat a top-level `key: value` line: the key appears twice, which is refused."""
    lines = text.splitlines(keepends=True)
    top = [i for i, line in enumerate(lines) if line[:1].isalpha() and ":" in line]
    i = rng.choice(top)
    return "".join([*lines[: i + 1], lines[i], *lines[i + 1 :]]), True


def insert_markup(rng: random.Random, doc: Any, text: str) -> tuple[str, bool]:
    i = rng.randrange(len(text))
    markup = rng.choice(["[/]", "[bold]", "[/bold]", "[red]x[/]", "\\[/]"])
    return text[:i] + markup + text[i:], False


def control_character(rng: random.Random, doc: Any, text: str) -> tuple[str, bool]:
    i = rng.randrange(len(text))
    return text[:i] + rng.choice(["\x00", "\x07", "\x1b[31m", "\ufeff", "\u202e"]) + text[i:], False


def utf16(rng: random.Random, doc: Any, text: str) -> tuple[bytes, bool]:
    return text.encode(rng.choice(["utf-16", "utf-16-le", "utf-32"])), True


def not_a_mapping(rng: random.Random, doc: Any, text: str) -> tuple[str, bool]:
    return rng.choice(["0\n", "false\n", "[]\n", "''\n", "~\n", "", "- a\n- b\n", "x\n"]), True


MUTATORS = [
    wrong_type, wrong_type, wrong_type, hostile_value, hostile_value, swap_key_value,
    rename_key, drop_key, flip_bytes, flip_bytes, truncate, duplicate_line, insert_markup,
    control_character, utf16, not_a_mapping,
]  # fmt: skip
"""Weighted: wrong types and byte flips reach the most code."""


def shipped_name(path: Path) -> str:
    """`path` relative to search_spaces/ (kind/name.yaml)."""
    return path.relative_to(ROOT / "search_spaces").as_posix()


def mutants() -> list[Mutant]:
    rng = random.Random(SEED)
    out = [Mutant(shipped_name(p), "unmutated", p.read_bytes(), False) for p in SHIPPED]
    for path in SHIPPED:
        text = path.read_text()
        for _ in range(MUTANTS_PER_FILE):
            mutate = rng.choice(MUTATORS)
            data, must_fail = mutate(rng, yaml.safe_load(text), text)
            raw = data if isinstance(data, bytes) else data.encode()
            out.append(Mutant(shipped_name(path), mutate.__name__, raw, must_fail))
    return out


CASES = mutants()


# ---- the test ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of search_spaces/, so the mutants' `base:` paths resolve beside them."""
    dest = tmp_path_factory.mktemp("fuzz") / "search_spaces"
    shutil.copytree(ROOT / "search_spaces", dest)
    return dest


@contextlib.contextmanager
def hard_deadline(seconds: float) -> Iterator[None]:
    """End the whole run, with every thread's stack, past `seconds`: a hang inside C code (the
    repr of an alias bomb) holds the GIL, so neither a signal nor a Python thread can stop it;
    faulthandler's watchdog is a C thread."""
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


# Per case, its own call only (not the session's fixtures): a hang in Python fails the case.
@pytest.mark.timeout(CASE_SECONDS, func_only=True)
@pytest.mark.parametrize(
    "index", range(len(CASES)), ids=[f"{i}-{c.source}-{c.how}" for i, c in enumerate(CASES)]
)
def test_validate_exits_0_or_2_without_a_traceback(folder: Path, index: int) -> None:
    case = CASES[index]
    # Beside its source file, so that its `base:` path resolves.
    path = folder / Path(case.source).parent / f"mutant_{index}.yaml"
    path.write_bytes(case.data)
    with hard_deadline(2 * CASE_SECONDS):
        res = CliRunner().invoke(app, ["validate", str(path)])
    out = res.output
    assert "Traceback" not in out, out
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code in (0, 2), out
    lines = out.strip().splitlines()
    if res.exit_code == 2:
        assert len(lines) == 1 and lines[0].startswith(f"error: {path}: "), out
        return
    assert not case.must_fail, f"{case.how} of {case.source} was accepted: {out}"
    # The summary line (a hint or warning on stderr may come before it, e.g. for shared GPUs).
    assert case.how != "unmutated" or any(
        line.split()[0] in ("trial", "grid", "search") for line in lines if line.strip())
    summarize(path)  # the library loader accepts what the command accepted
    assert isinstance(yaml.safe_load(case.data.decode()), dict)


def test_every_shipped_file_is_a_case_and_validates(folder: Path) -> None:
    unmutated = [c for c in CASES if c.how == "unmutated"]
    assert [c.source for c in unmutated] == [shipped_name(p) for p in SHIPPED]
    assert len(SHIPPED) >= 10
    for case in unmutated:
        res = CliRunner().invoke(app, ["validate", str(folder / case.source)])
        assert res.exit_code == 0, res.output
    kinds = {c.how for c in CASES}
    assert kinds == {"unmutated", *(m.__name__ for m in MUTATORS)}, kinds
