"""Read a user's YAML file within stated limits: a bad or hostile file is refused, never a hang.

A trial, grid or search file (and a file named by ``base:``) must be

- a regular file of at most ``MAX_FILE_BYTES`` (1 MiB): no device, pipe or folder;
- UTF-8 text (not UTF-16, not binary);
- one YAML document without duplicate keys, nested at most ``MAX_DEPTH`` levels and of at most
  ``MAX_NODES`` values once its aliases (``*name``) are expanded (an "alias bomb" of a few
  hundred bytes would otherwise expand to billions of values).

Plain scalars are typed by the YAML 1.2 core schema (what published configs assume), not
PyYAML's YAML 1.1 rules: ``1e-3`` and ``.5`` are floats, ``010`` is ten (not octal eight),
``0o17`` and ``0x1F`` are integers, only ``true``/``false`` (any case of the first letter, or all
caps) are booleans (``on``, ``off``, ``yes``, ``no`` stay text), and ``1_000``, ``1:20`` and dates
stay text. Types stay strict after that: a quoted ``'0.001'`` is text, and a key checks its type.

Every refusal is a ``YamlInputError`` whose message is one line, without the file name (the
caller adds it) and without any line of the file: a file named by ``base:`` may be anything.
Docs: docs/grids.md ("Limits on input files").
"""

from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from sweepgrok.core.errors import excerpt

MAX_FILE_BYTES = 1024 * 1024
"""Largest file read (bytes)."""
MAX_DEPTH = 32
"""Deepest nesting of lists and mappings, aliases expanded (sweep files need 4 levels)."""
MAX_NODES = 100_000
"""Most values (scalars, lists, mappings, keys) in a document once its aliases are expanded."""


class YamlInputError(ValueError):
    """A file refused: unreadable, too large, not UTF-8, not YAML, or past a limit."""


def read_text(path: Path) -> str:
    """The UTF-8 text of a regular file of at most MAX_FILE_BYTES."""
    try:
        # stat first: opening a FIFO blocks, and /dev/zero never ends.
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise YamlInputError("not a regular file (a device, pipe or folder cannot be read)")
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise YamlInputError(f"cannot read ({err.strerror})") from None
    if len(data) > MAX_FILE_BYTES:
        raise YamlInputError(f"larger than the limit of {MAX_FILE_BYTES // 1024} KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise YamlInputError(
            f"not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start}); "
            "save it as UTF-8"
        ) from None


class StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses duplicate keys and documents past the limits."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        # The composer recurses once per level: stop long before Python's recursion limit.
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlInputError(f"nested deeper than the limit of {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Node | None:
        node = super().get_single_node()
        if node is not None:
            _expanded_size(node, {})
        return node  # type: ignore[no-any-return]

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *defaults` keys may be overridden: that is their purpose
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # unhashable: the base class reports it
                continue
            if duplicate:
                line = key_node.start_mark.line + 1
                raise YamlInputError(
                    f"duplicate key '{excerpt(str(key))}' (line {line}): each key may appear once"
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]

    def construct_yaml_int(self, node: ScalarNode) -> int:
        """A YAML 1.2 integer: decimal (leading zeros too), 0o octal, 0x hexadecimal."""
        text = str(self.construct_scalar(node))
        sign = -1 if text.startswith("-") else 1
        digits = text.lstrip("+-")
        base = {"0o": 8, "0x": 16}.get(digits[:2].lower(), 10)
        try:
            return sign * int(digits[2:] if base != 10 else digits, base)
        except ValueError:  # more than 4300 digits, or text tagged !!int
            what = "integer too large" if digits.isdigit() else f"not an integer ({excerpt(text)})"
            raise ConstructorError(None, None, what, node.start_mark) from None

    def construct_yaml_float(self, node: ScalarNode) -> float:
        """A YAML 1.2 float: 1e-3, .5, 1., -.inf, .nan (Python's float() reads all but the
        infinities and NaN, spelled .inf / .nan in YAML)."""
        text = str(self.construct_scalar(node))
        special = text.lower().lstrip("+-")
        if special == ".inf":
            return -math.inf if text.startswith("-") else math.inf
        if special == ".nan":
            return math.nan
        try:
            return float(text)
        except ValueError:  # an explicit !!float tag on text that is no number
            raise ConstructorError(
                None, None, f"not a number ({excerpt(text)})", node.start_mark
            ) from None


CORE_SCHEMA = (
    ("tag:yaml.org,2002:bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    ("tag:yaml.org,2002:int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
    (
        "tag:yaml.org,2002:float",
        r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
        r"|[-+]?\.(inf|Inf|INF)|\.nan|\.NaN|\.NAN",
        "-+.0123456789",
    ),
    ("tag:yaml.org,2002:null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:merge", r"<<", "<"),  # `<<: *defaults`, as PyYAML reads it
)
"""(tag, pattern, first characters) of the plain scalars that are not text: YAML 1.2's core
schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution), int before float (1 is an int)."""

StrictLoader.yaml_implicit_resolvers = {}  # PyYAML's YAML 1.1 rules, replaced (not extended)
for _tag, _pattern, _first in CORE_SCHEMA:
    StrictLoader.add_implicit_resolver(_tag, re.compile(rf"^(?:{_pattern})$"), list(_first))
StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
StrictLoader.add_constructor("tag:yaml.org,2002:float", StrictLoader.construct_yaml_float)


def _expanded_size(node: Node, memo: dict[int, tuple[int, int] | None]) -> tuple[int, int]:
    """(values, depth) of the node with aliases expanded; raises past MAX_NODES / MAX_DEPTH.

    Each node is measured once (an alias is the same node object as its anchor), so an alias
    bomb is measured in time proportional to its text, not to its expansion.
    """
    key = id(node)
    if key in memo:
        known = memo[key]
        if known is None:
            raise YamlInputError("an alias refers to a list or mapping that contains it")
        return known
    memo[key] = None
    children: list[Node] = []
    if isinstance(node, SequenceNode):
        children = list(node.value)
    elif isinstance(node, MappingNode):
        children = [n for pair in node.value for n in pair]
    size, depth = 1, 0
    for child in children:
        child_size, child_depth = _expanded_size(child, memo)
        size, depth = size + child_size, max(depth, child_depth)
    depth += 1 if children else 0
    if size > MAX_NODES:
        raise YamlInputError(
            f"more than the limit of {MAX_NODES:,} values once its aliases are expanded"
        )
    if depth > MAX_DEPTH:
        raise YamlInputError(
            f"nested deeper than the limit of {MAX_DEPTH} levels once its aliases are expanded"
        )
    memo[key] = (size, depth)
    return size, depth


def yaml_error_text(err: yaml.YAMLError) -> str:
    """A parser error in one line: where and what, never the file's text around it."""
    if isinstance(err, ReaderError) and isinstance(err.character, int):
        return (
            f"invalid YAML (character #x{err.character:04x} at offset {err.position}: "
            "control characters are not allowed)"
        )
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or type(err).__name__
    context = getattr(err, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    what = f"{context}: {problem}" if context else str(problem)
    return f"invalid YAML ({where}{excerpt(what, 120)})"


def parse(text: str) -> Any:
    """One YAML document from text, within the limits (YamlInputError otherwise)."""
    try:
        return yaml.load(text, Loader=StrictLoader)  # a SafeLoader subclass
    except yaml.YAMLError as err:
        raise YamlInputError(yaml_error_text(err)) from None
    except RecursionError:  # not reached within MAX_DEPTH; kept so no input can traceback
        raise YamlInputError(f"nested deeper than the limit of {MAX_DEPTH} levels") from None


def load_file(path: Path) -> Any:
    """The YAML document of a file, within the limits (YamlInputError otherwise)."""
    return parse(read_text(path))
