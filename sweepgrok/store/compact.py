"""Compaction: when a command that writes a sweep folder ends, one row per key on disk.

The sink never changes a part file: a retried or resumed run writes new parts, and the
readers (sweepgrok.store.sink.read_table) keep the last-written row per key. A plain reader
(``pd.read_parquet``, DuckDB, Polars) keeps every row: 2 rows for a resumed run. So when
``launch``, ``search`` or ``train`` ends (interrupted too), each part folder (runs, metrics,
geometry) that holds a key more than once is replaced by one part holding what the readers
read, the last-written row per key:

1. read the folder's parts as the readers do (validated, deduplicated), and remember which;
   a damaged part leaves the folder as it is (a warning): compaction never drops a row;
2. write the rows to a temporary name in the same folder (hidden and not ``*.parquet``: no
   reader lists it) and flush it to disk;
3. in one ``critical()`` block: rename it to ``part-<seq>-<uid>.parquet``, flush the folder,
   then remove the parts read, and only those.

What a reader sees meanwhile: up to the rename, the old parts. From the rename to the last
removal, the old parts and the compacted one, whose row for each key is the last-written row
of the old parts: a deduplicating reader reads the same rows wherever the new part sorts among
them, and a plain reader sees duplicates for that moment. After, one row per key. ``<seq>`` is
the newest part's read, so a part written after the listing (none is, at an end) still sorts
after the compacted one and supersedes it. A crash (SIGKILL, power) before the rename leaves
the old parts and a temporary file no reader lists; after it, a half-compacted folder that the
readers read right and the next end compacts. A reader of sweepgrok that listed a part this
removes lists again (PartVanished). A signal only ends the command after the block. Nothing
outside the sweep folder is touched: a part folder that is a symbolic link is left alone, and
the readers never list a linked part.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sweepgrok.core.interrupt import critical
from sweepgrok.store.parts import ARROW_ERRORS, DamagedPart, as_dataset
from sweepgrok.store.sink import KEYS, SCHEMAS, dedupe, part_path, read_parts, temporary_name
from sweepgrok.store.sweepdir import PART_FOLDERS

log = logging.getLogger(__name__)

_SEQ = re.compile(r"^part-(\d+)-")


def compact_sweep(sweep_dir: str | Path) -> list[str]:
    """Compact each part folder of `sweep_dir` that holds a key twice; the folders compacted.

    Never raises for the folder's state (damaged parts, a full disk, permissions): the parts
    stay as they are, readable by the readers, and a warning says why."""
    done = []
    for kind in PART_FOLDERS:
        try:
            if compact_folder(Path(sweep_dir), kind):
                done.append(kind)
        except (DamagedPart, *ARROW_ERRORS) as err:
            log.warning("%s/%s: left as it is, not compacted: %s", sweep_dir, kind, err)
    return done


def compact_folder(sweep_dir: Path, kind: str) -> bool:
    """Replace the parts of ``sweep_dir/kind`` by one with a row per key, if a key is held twice.

    Raises DamagedPart (nothing changed) or OSError (nothing changed but, after the rename,
    parts not yet removed: a half-compacted folder the readers read right)."""
    folder = sweep_dir / kind
    if folder.is_symlink() or not folder.is_dir():
        return False
    keys, parts = read_parts([sweep_dir], kind, KEYS[kind], False)
    written = sum(part.metadata.num_rows for part in parts)
    if keys.num_rows == written:  # no key twice: every reader reads it right already
        return False
    table = dedupe(as_dataset(parts, SCHEMAS[kind]).to_table(), KEYS[kind])
    paths = [Path(part.path) for part in parts]
    _replace(folder, paths, table)
    log.debug("%s/%s: %d parts, %d rows -> 1 part, %d rows (one per key)", sweep_dir, kind,
             len(paths), written, table.num_rows)
    return True


def _replace(folder: Path, paths: list[Path], table: pa.Table) -> None:
    """Write `table` as the part that replaces `paths` (steps 2 and 3 of the module doc)."""
    seqs = [int(m.group(1)) for p in paths if (m := _SEQ.match(p.name))]
    final = part_path(folder, max(seqs, default=None))
    tmp = temporary_name(final)
    try:
        with critical():
            pq.write_table(table, tmp)
            _flush(tmp)
            os.replace(tmp, final)
            _flush(folder)
            for path in paths:
                path.unlink(missing_ok=True)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def _flush(path: Path) -> None:
    """fsync a file or folder: the rows are on disk before the parts they replace go."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
