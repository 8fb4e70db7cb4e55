"""Render the config-key reference (docs/config.md) from the config classes' field docstrings.

One table per section (key, type, default, allowed values, description), built from the pydantic
fields of ``sweepgrok.config.trial``, so the reference cannot drift from the code. Regenerate with
``python -m sweepgrok.config.docs > docs/config.md``; tests/config/test_config_docs.py fails when
the committed file is stale.
"""

from __future__ import annotations

import json
import sys
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic.fields import FieldInfo

from sweepgrok.config.plugins import BUILTIN_ARCHS
from sweepgrok.config.tasks import TASKS
from sweepgrok.config.trial import SECTIONS, Config, describe_keys

REGENERATE = "python -m sweepgrok.config.docs > docs/config.md"
"""The command that rewrites docs/config.md (named in the file and in the staleness test)."""

PREAMBLE = f"""\
# Config reference

<!-- Generated from the field docstrings in sweepgrok/config/trial.py by
`{REGENERATE}`. Do not edit by hand: change the docstring, then regenerate. -->

A trial file has the sections {", ".join(f"`{s}`" for s in SECTIONS)}.
Every key is a dotted path (`model.norm`, `geomdr.target_dim`), used the same way in a trial
file, in `--set k=v`, in grids and searches, and as the column name in the `runs/` Parquet.
Unknown keys are errors. Rules the tables do not show (for example: `task.name: div` needs a
prime `task.p`, `model.d_model` divisible by `model.n_heads`, `optim.betas` in [0, 1),
`geomdr.layers` within `model.n_layers`, distinct `train.seeds`, a `task.train_fraction` that
leaves at least one training and one test example, `geometry.knn_k` below the training points
geometry is measured on) are checked when a config is loaded; a mistake exits with code 2 and
names the file, the key and the allowed values. Types are strict: `true` is not a number, `"7"`
(quoted) is not a number, and an integer key takes no `7.0`; numbers must be finite (no `.nan`,
`.inf`). Files and `--set` read numbers by YAML 1.2's rules: `1e-3`, `1E5` and `.5` are numbers
(`1e5` is a float: an integer key wants `100000`), `010` is ten, and `on`, `yes`, `1_000` are text.
Files are read within stated limits (size, encoding, nesting, aliases, duplicate keys): see
[grids.md](grids.md#limits-on-input-files).
"""


def _escape(text: str) -> str:
    """Make text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("*", "\\*")


def type_name(annotation: Any) -> str:
    """The type of a field as a YAML user reads it: int, float, bool, str, [float, float], ..."""
    if annotation is type(None):
        return "null"
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:  # a constrained type (list[Annotated[int, Field(ge=0)]]): its base
        return type_name(args[0])
    if origin is Literal:
        return "str"
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin is tuple:
        return "[" + ", ".join(type_name(a) for a in args) + "]"
    if origin is list:
        return f"list[{type_name(args[0])}]"
    if origin is dict:
        return "mapping"
    return str(getattr(annotation, "__name__", annotation))


def default_text(value: Any) -> str:
    """A default as it would be written in YAML (null, true, [0.9, 0.98], add)."""
    if isinstance(value, str):
        return value
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def _bounds(info: FieldInfo) -> str:
    """Numeric bounds as an interval: [2, 2000], (0.0, 1.0), >= 1, > 0.0; a list's length."""
    longest = [m.max_length for m in info.metadata if getattr(m, "max_length", None) is not None]
    if longest:
        return f"at most {longest[0]} items"
    bound = {k: getattr(m, k) for m in info.metadata for k in ("ge", "gt", "le", "lt")
             if getattr(m, k, None) is not None}
    lo = f"[{bound['ge']}" if "ge" in bound else f"({bound['gt']}" if "gt" in bound else ""
    hi = f"{bound['le']}]" if "le" in bound else f"{bound['lt']})" if "lt" in bound else ""
    if lo and hi:
        return f"{lo}, {hi}"
    if lo:
        return (">= " if lo[0] == "[" else "> ") + lo[1:]
    if hi:
        return ("<= " if hi[-1] == "]" else "< ") + hi[:-1]
    return ""


PLUGIN_KEYS = {"task.name": tuple(TASKS), "model.arch": BUILTIN_ARCHS}
"""Keys that name a built-in or a plugin (docs/extending.md): their built-in names."""


def allowed_text(info: FieldInfo, key: str = "") -> str:
    """What a non-null value must be beyond its type: the choices, or the bounds ("-": none).

    Whether null is allowed shows in the type column ("int or null").
    """
    if key in PLUGIN_KEYS:
        names = ", ".join(f"`{c}`" for c in PLUGIN_KEYS[key])
        return f"{names}, or a plugin ([extending.md](extending.md))"
    if get_origin(info.annotation) is Literal:
        return ", ".join(f"`{c}`" for c in get_args(info.annotation))
    if info.annotation is bool:
        return "`true`, `false`"
    return _bounds(info) or "-"


def section_table(section: str) -> str:
    """The Markdown table of one section's keys."""
    docs = describe_keys()
    lines = [
        f"## `{section}`",
        "",
        _escape(" ".join((Config.model_fields[section].description or "").split())),
        "",
        "| key | type | default | allowed values | description |",
        "|---|---|---|---|---|",
    ]
    for field, info in SECTIONS[section].model_fields.items():
        key = f"{section}.{field}"
        cells = [
            f"`{key}`",
            _escape(type_name(info.annotation)),
            f"`{default_text(info.default)}`",
            _escape(allowed_text(info, key)),
            _escape(docs[key]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render() -> str:
    """The whole of docs/config.md."""
    return "\n".join([PREAMBLE, *(section_table(s) for s in SECTIONS)])


def main() -> None:
    """Print the reference (redirect it to docs/config.md)."""
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
