"""Turn sweep folders into a Markdown report with PNG figures and CSV tables.

    python -m analysis.report SWEEP_DIR [SWEEP_DIR ...] --out DIR
        [--by k1,k2] [--baseline k=v,...] [--threshold 0.95|0.99] [--html]

The same as ``sweepgrok report``: a thin wrapper around sweepgrok.analysis.reporting (which writes
DIR/report.md, DIR/groups_<t>.csv, DIR/runs.csv, DIR/figures/*.png and with --html the
self-contained DIR/report.html from Parquet alone).
A mistake exits 2 with one line on stderr, in the CLI's style (sweepgrok.core.errors).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from sweepgrok.analysis import stats
from sweepgrok.analysis.reporting import HTML_FILE, THRESHOLDS, build_report
from sweepgrok.core.errors import (
    USER_ERROR,
    analysis_option,
    damaged_part_message,
    error_line,
)
from sweepgrok.store.outputs import os_reason, output_problem
from sweepgrok.store.parts import DamagedPart


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """Argparse's usage errors in the one error style (exit 2)."""
        print(error_line(message), file=sys.stderr)
        sys.exit(USER_ERROR)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = _Parser(prog="python -m analysis.report", description=__doc__)
    ap.add_argument("sweep_dirs", nargs="+", type=Path, metavar="SWEEP_DIR")
    ap.add_argument("--out", type=Path, required=True, help="report folder (created)")
    ap.add_argument("--by", default=None, help="comma-separated config keys (default: varying)")
    ap.add_argument("--baseline", default=None, help="baseline runs as key=value[,key=value]")
    ap.add_argument("--paired", action="store_true", help="match runs by seed (see analyze)")
    ap.add_argument(
        "--skip-damaged",
        action="store_true",
        help="leave out damaged part files (warned) instead of exiting 2",
    )
    ap.add_argument(
        "--html",
        action="store_true",
        help="also write report.html, one self-contained file (figures, definitions, configs)",
    )
    ap.add_argument(
        "--threshold",
        type=float,
        choices=THRESHOLDS,
        default=None,
        help="test accuracy of grokking for the figures (both go in the tables); default: "
        "the runs' train.grok_threshold when they share one, else 0.99",
    )
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: exit 2 with a message (no traceback) on bad input."""
    args = _parse(argv)
    missing = [d for d in args.sweep_dirs if not d.is_dir()]
    if missing:
        print(error_line("not a folder (SWEEP_DIR)", str(missing[0])), file=sys.stderr)
        return USER_ERROR
    problem = output_problem(args.out, folder=True)
    if problem:
        print(error_line(problem, "--out"), file=sys.stderr)
        return USER_ERROR
    by = [k.strip() for k in args.by.split(",") if k.strip()] if args.by else None
    try:
        report = build_report(
            args.sweep_dirs,
            args.out,
            by,
            args.baseline,
            args.threshold,
            args.paired,
            skip_damaged=args.skip_damaged,
            html=args.html,
        )
    except stats.AnalysisError as err:
        print(error_line(str(err), analysis_option(err)), file=sys.stderr)
        return USER_ERROR
    except DamagedPart as err:
        print(error_line(damaged_part_message(err), str(err.sweep_dir)), file=sys.stderr)
        return USER_ERROR
    except OSError as err:  # reading raises DamagedPart: this is the report's folder
        print(error_line(f"{args.out}: cannot write: {os_reason(err)}", "--out"), file=sys.stderr)
        return USER_ERROR
    print(f"wrote {report}")
    if args.html:
        print(f"wrote {args.out / HTML_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
