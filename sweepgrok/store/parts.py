"""The part files of a sweep folder that the readers read, and what is wrong with a damaged one.

A reader lists ``<sweep>/<kind>/*.parquet`` in name order (write order) and leaves out:

- hidden names (``.tmp-part-...parquet``, from versions that wrote their temporary parts so)
  and any other name (``.tmp-part-...parquet.tmp``: a writer killed between its write and its
  rename): never a finished part;
- symbolic links, with a warning: the writer never makes one, and a link may point outside the
  sweep folder.

A listed part that is gone when it is read (a compaction replaced it meanwhile:
sweepgrok.store.compact) raises PartVanished, damaged or not, skipped or not: the reader lists
again (sink.read_table), and finds the compacted part that was renamed in before any part it
replaces was removed.

Any other entry must be a readable Parquet file whose columns fit the kind's schema, with the
kind's required columns (REQUIRED: a metrics part without test_acc holds no grok step) and
values in range (RANGES: accuracies are fractions in [0, 1]; a value outside, -5 or 95 logged
in percent, would silently change every grok step). A damaged
one (empty, truncated, not Parquet, a folder, a column of the wrong type) raises DamagedPart by
default: a run silently left out would bias every statistic. With ``skip_damaged`` it is left
out with a warning instead.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
from pyarrow.fs import LocalFileSystem

log = logging.getLogger(__name__)

ARROW_ERRORS = (pa.ArrowException, OSError)
"""What pyarrow raises on an unreadable file (ArrowInvalid, ArrowIOError = OSError, ...)."""


REQUIRED = {"metrics": ("test_acc",)}
"""Columns every part of a kind must hold (the rest may be missing: read as null)."""
RANGES = {"metrics": {"train_acc": (0.0, 1.0), "test_acc": (0.0, 1.0)}}
"""Allowed closed ranges of a kind's columns (null and NaN pass: a run not evaluated)."""
RANGE_EPS = 1e-6
"""Rounding slack on a range's ends."""


class DamagedPart(ValueError):
    """A part file (or kind folder) of a sweep folder that cannot be read as rows of its kind.

    ``sweep_dir`` is the folder as given, ``part`` the path inside it (``metrics/part-...``),
    ``reason`` what is wrong with it.
    """

    def __init__(self, sweep_dir: Path, part: str, reason: str) -> None:
        super().__init__(f"{sweep_dir}: {part}: {reason}")
        self.sweep_dir = sweep_dir
        self.part = part
        self.reason = reason


class PartVanished(FileNotFoundError):
    """A part listed a moment ago is gone (compacted meanwhile): list the folder again."""


def _short(err: BaseException) -> str:
    """Arrow's message without the file's path (the error line names it) on one line."""
    text = " ".join(str(err).split())
    text = re.sub(r"^Could not open Parquet input source '[^']*': ", "", text)
    return text.split(". ")[0].rstrip(".")


def _fits(have: pa.DataType, want: pa.DataType) -> bool:
    """A file column of type `have` reads as `want` without changing what it means."""
    if pa.types.is_dictionary(have):
        have = have.value_type
    if pa.types.is_null(have) or have == want:
        return True
    if pa.types.is_floating(want):
        return pa.types.is_integer(have) or pa.types.is_floating(have)
    if pa.types.is_integer(want):
        return pa.types.is_integer(have)
    if pa.types.is_string(want):  # numbers and flags read as their text (hand-built sweeps)
        return any(
            check(have)
            for check in (
                pa.types.is_large_string,
                pa.types.is_integer,
                pa.types.is_floating,
                pa.types.is_boolean,
            )
        )
    return False


def schema_problem(have: pa.Schema, want: pa.Schema) -> str | None:
    """The first schema column the file holds with a type that does not fit, as a reason."""
    for field in have:
        if field.name in want.names and not _fits(field.type, want.field(field.name).type):
            expected = want.field(field.name).type
            return f"column {field.name} holds {field.type} values, expected {expected}"
    return None


def _entry_problem(path: Path) -> str | None:
    """What makes a listed entry no Parquet file at all (checked before Arrow opens it)."""
    if path.is_dir():
        return "a folder, not a part file"
    if not path.is_file():
        return "not a regular file"
    try:
        empty = path.stat().st_size == 0
    except FileNotFoundError:
        return "gone"  # damaged() tells a vanished part from a damaged one
    return "an empty file (0 bytes)" if empty else None


def _file_problem(fragment: ds.ParquetFileFragment, schema: pa.Schema) -> str | None:
    """A reason when the file's footer cannot be read or its columns do not fit `schema`."""
    try:
        # The footer, read once and kept on the fragment: the scan that follows reuses it.
        fragment.ensure_complete_metadata()
        have = fragment.physical_schema
    except ARROW_ERRORS as err:
        return f"not a readable Parquet file, truncated or garbage ({_short(err)})"
    return schema_problem(have, schema)


def as_dataset(fragments: Sequence[ds.Fragment], schema: pa.Schema) -> ds.Dataset:
    """One dataset over `fragments` in their order (their footers already read, not re-read)."""
    return ds.FileSystemDataset(list(fragments), schema, ds.ParquetFileFormat(), LocalFileSystem())


def scan_problem(
    fragment: ds.Fragment, schema: pa.Schema, columns: Sequence[str] | None
) -> str | None:
    """A reason when the rows of one part cannot be read (its footer was fine)."""
    try:
        as_dataset([fragment], schema).to_table(columns=columns)
    except ARROW_ERRORS as err:
        return f"unreadable rows, truncated or corrupt ({_short(err)})"
    return None


def damaged(sweep_dir: Path, path: Path, reason: str, skip: bool) -> None:
    """Raise DamagedPart, or (``skip``) log that the part is left out; PartVanished when it is
    gone (the reader's listing is out of date, the part was not damaged)."""
    if not os.path.lexists(path):
        raise PartVanished(path)
    err = DamagedPart(sweep_dir, path.relative_to(sweep_dir).as_posix(), reason)
    if not skip:
        raise err
    log.warning("%s: left out (damaged)", err)


def _candidates(sweep_dir: Path, kind: str, skip: bool) -> list[Path]:
    """Finished part names of ``sweep_dir/kind`` in write order; links left out."""
    folder = sweep_dir / kind
    if folder.exists() and not folder.is_dir():
        damaged(sweep_dir, folder, f"a file, not the {kind}/ folder", skip)
        return []
    names = sorted(p for p in folder.glob("*.parquet") if not p.name.startswith("."))
    links = [p for p in names if p.is_symlink()]
    for link in links:
        log.warning(
            "%s: %s: a symbolic link, ignored (part files are never links)",
            sweep_dir,
            link.relative_to(sweep_dir).as_posix(),
        )
    return [p for p in names if not p.is_symlink()]


def part_files(
    sweep_dirs: Sequence[Path], kind: str, schema: pa.Schema, skip: bool = False
) -> list[ds.Fragment]:
    """The readable part files of `kind` in each folder, in write order (see the module doc).

    Fragments rather than paths: each footer is read once, here, for its schema and the scan.
    """
    out = []
    for sweep_dir in sweep_dirs:
        listed = []
        for path in _candidates(sweep_dir, kind, skip):
            problem = _entry_problem(path)
            if problem:
                damaged(sweep_dir, path, problem, skip)
            else:
                listed.append(path)
        if not listed:
            continue
        try:
            dataset = ds.dataset([str(p) for p in listed], schema=schema, format="parquet")
        except FileNotFoundError as err:
            raise PartVanished(str(err)) from err
        for path, fragment in zip(listed, dataset.get_fragments(), strict=True):
            problem = _file_problem(fragment, schema) or _missing(fragment, kind)
            if problem:
                damaged(sweep_dir, path, problem, skip)
            else:
                out.append(fragment)
    return out


def _missing(fragment: ds.ParquetFileFragment, kind: str) -> str | None:
    """A reason when the part lacks a column its kind requires (REQUIRED)."""
    have = fragment.physical_schema.names
    gone = [c for c in REQUIRED.get(kind, ()) if c not in have]
    return f"no {', '.join(gone)} column (every {kind} part has one)" if gone else None


def range_problem(table: pa.Table, kind: str) -> str | None:
    """A reason when a column of `table` holds a value outside its range (RANGES)."""
    import pyarrow.compute as pc

    for col, (low, high) in RANGES.get(kind, {}).items():
        if col not in table.column_names:
            continue
        values = pc.drop_null(table.column(col))
        values = pc.filter(values, pc.invert(pc.is_nan(values))) if len(values) else values
        if not len(values):
            continue
        span = pc.min_max(values)
        lo, hi = span["min"].as_py(), span["max"].as_py()
        if lo < low - RANGE_EPS or hi > high + RANGE_EPS:
            bad = lo if lo < low - RANGE_EPS else hi
            hint = ": logged in percent?" if bad > 1 and high == 1.0 else ""
            return f"{col} holds {bad:g}, outside [{low:g}, {high:g}] (a fraction){hint}"
    return None


def drop_out_of_range(
    parts: Sequence[ds.Fragment], schema: pa.Schema, kind: str, skip: bool
) -> list[ds.Fragment]:
    """`parts` without those holding values outside RANGES (DamagedPart unless `skip`)."""
    cols = [c for c in RANGES.get(kind, {}) if c in schema.names]
    kept = []
    for part in parts:
        try:
            table = as_dataset([part], schema).to_table(columns=cols)
        except ARROW_ERRORS as err:  # read whole a moment ago: gone since (compacted)
            raise PartVanished(part.path) from err
        problem = range_problem(table, kind)
        if problem is None:
            kept.append(part)
            continue
        path = Path(part.path)  # <sweep_dir>/<kind>/<name>, as part_files built it
        damaged(path.parents[1], path, problem, skip)
    return kept
