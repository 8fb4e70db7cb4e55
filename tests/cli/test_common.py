"""`sweepgrok --help` and each command's --help read as prose (sweepgrok/cli/common.py's
`ProseCommand`): sentences wrapped where the terminal ends, not where the docstring's source
lines did; one paragraph per command in the overview; no type tags (`<bool>`, `<path>`).

Each help is the real console script in a subprocess, at COLUMNS=100 (the width the issue read
it at) and at 150, where a line break kept from a docstring (wrapped at ~96 columns in the
source) can no longer hide behind the terminal's own wrapping."""

from __future__ import annotations

import inspect
import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sweepgrok.cli import app
from sweepgrok.cli.common import prose

SWEEPGROK = str(Path(sys.executable).parent / "sweepgrok")
COMMANDS = [info.callback for info in app.registered_commands]
NAMES = [command.__name__ for command in COMMANDS]  # type: ignore[union-attr]
WIDTHS = (100, 150)
TYPE_TAG = re.compile(
    r"<(?:bool|str|int|float|path|dir|file|text|list\[[^>]*\]|\w+ range)>"
    r"|\b(?:TEXT|INTEGER|BOOLEAN|FLOAT|PATH|DIRECTORY|FILENAME)\b",
    re.IGNORECASE,
)
"""Typer's type tags, new (`<bool>`, `<int range>`) and old (`TEXT`, `INTEGER`)."""


def help_page(args: list[str], columns: int) -> str:
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    done = subprocess.run([SWEEPGROK, *args, "--help"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


TEXT_COLUMN = re.compile(r"(?:^\s*|\s{2,})(\S)")
"""Where a line's last column of text starts: after its indent, or after the last gap of two or
more spaces between columns (a table's name, type and help)."""


def _region(line: str, columns: int) -> tuple[str, int]:
    """A help line's text region and the column its text may not reach: inside a panel (│ ... │)
    the part between the borders (one space of padding before the right one); outside, the whole
    line (one-space margins)."""
    if line.startswith("│") and line.rstrip().endswith("│"):
        inner = line.rstrip()[1:-1]
        return inner, len(inner) - 1
    return line, columns - 1


def early_breaks(page: str, columns: int) -> list[str]:
    """Each line of text that ends where the next line's first word would still have fitted: a
    line break the terminal did not need, kept from the source. The next line continues the text
    when it starts in the column where the line's last column of text starts (a new row of a
    panel starts left of it, a new paragraph after a blank line). Rich puts a parameter's
    `[default: ...]` and `[required]` on a line of their own when its help is long: not text."""
    found = []
    for above, below in itertools.pairwise(page.splitlines()):
        text_above, end = _region(above, columns)
        text_below, end_below = _region(below, columns)
        columns_above = list(TEXT_COLUMN.finditer(text_above))
        words = text_below.split()
        if not words or not columns_above or words[0].startswith("[") or end != end_below:
            continue
        start = columns_above[-1].start(1)
        if len(text_below) - len(text_below.lstrip()) != start or "─" in above:
            continue  # a new row, panel or paragraph
        if len(text_above[start:].rstrip()) + 1 + len(words[0]) <= end - start:
            found.append(f"{text_above[start:].strip()!r} | {words[0]!r}")
    return found


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("command", [None, *NAMES], ids=["sweepgrok", *NAMES])
def test_help_wraps_sentences_at_the_terminal_and_shows_no_type_tags(command, columns):
    page = help_page([command] if command else [], columns)
    assert "Usage: sweepgrok" in page
    assert early_breaks(page, columns) == []
    assert TYPE_TAG.findall(page) == []


def test_the_overview_gives_each_command_the_first_paragraph_of_its_help():
    page = help_page([], 100)
    panel = page.split("Commands")[1]
    rows: dict[str, str] = {}
    name = ""
    for line in panel.splitlines():
        if not line.startswith("│"):
            continue
        inner = line.strip()[1:-1].strip()
        head, _, rest = inner.partition(" ")
        if head in NAMES and line[2:3] != " ":
            name, inner = head, rest
        rows[name] = f"{rows.get(name, '')} {inner.strip()}".strip()
    for command in COMMANDS:
        first = str(prose(inspect.getdoc(command))).split("\n\n")[0]
        assert rows[command.__name__] == first  # type: ignore[union-attr]
        assert first[0].isupper() and first.endswith("."), first


def test_prose_joins_lines_within_paragraphs_and_keeps_verbatim_ones():
    doc = """One sentence
    broken in the source.

    \b
    kept
      as written"""
    assert prose(doc) == "One sentence broken in the source.\n\n\b\nkept\n  as written"
