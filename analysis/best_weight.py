"""The rule, fixed before the data (REPRODUCTION.md, version 3), that picks each GeomDR penalty
kind's best weight in `repro3_lambda_cpu`: the lambda_max with the lowest Kaplan-Meier median
grok step at 0.95; a tie goes to the smaller weight. A kind whose weights all have no median
(under half grokked) has no best weight.

    python -m analysis.best_weight [SWEEP]     # prints each kind's KM medians and its pick
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import pandas as pd

from sweepgrok.analysis.stats import times_and_censoring
from sweepgrok.analysis.survival import km_median

SUMMARIES = Path(__file__).resolve().parent / "reproduction"
SWEEP = "repro3_lambda_cpu"
KIND, WEIGHT = "geomdr.penalty", "geomdr.lambda_max"
THRESHOLD = 0.95
"""The grok threshold the rule reads (the claims' threshold)."""


def km_medians(runs: pd.DataFrame, kind: str) -> dict[float, float]:
    """lambda_max -> KM median grok step at 0.95 (nan: under half grokked) for one kind."""
    out: dict[float, float] = {}
    for weight, arm in runs[runs[KIND] == kind].groupby(WEIGHT):
        out[float(cast(float, weight))] = float(km_median(*times_and_censoring(arm, THRESHOLD)))
    return out


def best_weight(runs: pd.DataFrame, kind: str) -> float | None:
    """The kind's weight by the rule (None when no weight has a median)."""
    medians = {w: m for w, m in km_medians(runs, kind).items() if not math.isnan(m)}
    if not medians:
        return None
    return min(medians, key=lambda w: (medians[w], w))


def load(sweep: str = SWEEP) -> pd.DataFrame:
    return pd.read_csv(SUMMARIES / sweep / "runs.csv")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    runs = load(*args[:1])
    for kind in sorted(runs[KIND].unique()):
        medians = ", ".join(f"{w:g}: {m:,.0f}" for w, m in km_medians(runs, kind).items())
        print(f"{kind}: KM medians {medians}; best weight {best_weight(runs, kind)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
