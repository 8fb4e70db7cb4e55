"""Add each run's code commit and sweepgrok version to a committed runs.csv.

    python -m analysis.provenance_summaries SWEEP_DIR SUMMARY_DIR
    python -m analysis.provenance_summaries --unknown SUMMARY_DIR

Every run row in a sweep's ``runs/`` Parquet holds ``git_commit`` (HEAD of the checkout that
ran it) and ``sweepgrok_version`` (sweepgrok.store.provenance); the run summary that ``sweepgrok
report`` writes (``runs.csv``) does not keep them. The first form copies them from the sweep's
Parquet into the summary, per run_id. The second marks a summary whose Parquet is gone (the
Parquet is not committed) with `UNKNOWN`, rather than guessing a commit from the history.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sweepgrok.core.errors import USER_ERROR, error_line
from sweepgrok.store.sink import read_runs

COLUMNS = ("git_commit", "sweepgrok_version")
"""The provenance every committed summary row carries."""
UNKNOWN = "unknown (before provenance)"
"""A summary made before runs.csv carried provenance: its runs' Parquet rows held it, but was
not committed, so the code that ran them is not known from committed files."""


def add_provenance(summary: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The summary with COLUMNS from the runs/ rows (replacing earlier ones); `UNKNOWN` for a
    run the rows lack or a value they do not hold (a checkout outside git)."""
    values = runs.set_index("run_id").reindex(columns=list(COLUMNS))
    kept = summary.drop(columns=[c for c in COLUMNS if c in summary])
    return kept.join(values, on="run_id").fillna({c: UNKNOWN for c in COLUMNS})


def mark_unknown(path: Path) -> None:
    """Give every row of the runs.csv at `path` the COLUMNS, `UNKNOWN` where absent or empty.
    Text in, text out (csv module): every other cell keeps its exact characters, where a
    pandas round trip would rewrite some (an integer column with gaps as floats)."""
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    for column in COLUMNS:
        if column not in header:
            header.append(column)
            body = [[*row, ""] for row in body]
    at = [header.index(c) for c in COLUMNS]
    for row in body:
        for i in at:
            row[i] = row[i] or UNKNOWN
    with path.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([header, *body])


def code_versions(runs: pd.DataFrame) -> str:
    """The distinct code commits of some runs, as text ('unknown (before provenance)' or
    short hashes joined by ' + ', which says a summary mixes code versions)."""
    if "git_commit" not in runs:
        return UNKNOWN
    commits = sorted({str(c) for c in runs["git_commit"].fillna(UNKNOWN)})
    return " + ".join(c if c == UNKNOWN else c[:7] for c in commits)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the provenance columns into SUMMARY_DIR/runs.csv (exit 2 with one error line)."""
    args = list(sys.argv[1:] if argv is None else argv)
    unknown = args[:1] == ["--unknown"]
    if len(args) != 2:
        print(error_line(__doc__.strip().splitlines()[2].strip()), file=sys.stderr)
        return USER_ERROR
    path = Path(args[1]) / "runs.csv"
    if not path.is_file():
        print(error_line(f"{path}: no such file"), file=sys.stderr)
        return USER_ERROR
    if unknown:
        mark_unknown(path)
    else:
        add_provenance(pd.read_csv(path), read_runs(Path(args[0]))).to_csv(path, index=False)
    print(f"wrote {', '.join(COLUMNS)} into {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
