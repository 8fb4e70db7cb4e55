"""Quoted figures of paper 2's twins: the MLP twin (speed-ups, collapse, success at 0.99, the
GeomDR arm's seeds run three times) and the division twin.
"""

from __future__ import annotations

import re
from functools import partial

import pandas as pd

from analysis.claims import DSTAR, P2
from analysis.quoted.common import REPRODUCTION, SUMMARIES, Quote, km95, line, p2, ratio, steps

P2_BASE = "GeomDR=false, GeomDR penalty=tail, budget=6000"


P2_GEOMDR = "GeomDR=true, GeomDR penalty=tail, budget=6000"


def _p2_at_99() -> str:
    """Paper 2's twin's GeomDR (tail) speed-up and p at test accuracy 0.99."""
    table = pd.read_csv(SUMMARIES / P2 / "groups_99.csv")
    g = table[table["label"] == P2_GEOMDR].iloc[0]
    return (f"one GeomDR seed never reached 0.99 within 6,000 steps: speed-up {ratio(g)}, "
            f"log-rank p = {p2(g['p'])}")


def _success_99() -> str:
    """Paper 2's twin at 0.99: how many runs of the GeomDR arm and the baseline grokked."""
    runs = pd.read_csv(SUMMARIES / P2 / "runs.csv")
    tail = runs[runs["geomdr.penalty"] == "tail"]
    arm, base = (tail[tail["geomdr.enabled"] == on]["grok_step_99"] for on in (True, False))
    return (f'"100% success with GeomDR" would read {arm.notna().sum()}/{arm.size} against the '
            f"baseline's {base.notna().sum()}/{base.size}")


def _seed_row(sweep: str, where: dict[str, object], note: str = "") -> str:
    """'| `sweep` (code ...) | grok step at 0.95 of seeds 1-8 | KM median |' for one arm."""
    runs = pd.read_csv(SUMMARIES / sweep / "runs.csv")
    for key, value in where.items():
        runs = runs[runs[key] == value]
    runs = runs.sort_values("train.seed")
    cells = [steps(t) if pd.notna(t) else "-" for t in runs["grok_step_95"]]
    km = km95(runs)
    commit = str(runs["git_commit"].iloc[0])
    code = f"code {commit[:7]}" if re.fullmatch(r"[0-9a-f]{40}", commit) else "code unknown"
    arm = f"`{sweep}`" + (f" {note}" if note else "")
    return f"| {arm} ({code}) | {' | '.join(cells)} | {steps(km)} |"


SEED_ROWS: tuple[tuple[str, dict[str, object], str], ...] = (
    (P2, {"geomdr.enabled": True, "geomdr.penalty": "tail"}, "GeomDR arm"),
    (DSTAR, {"geomdr.target_dim": 16}, "d* 16"),
    ("repro3_d16_avx2", {}, "AVX2 kernels"),
)
"""The GeomDR arm of paper 2's twin run three times (REPRODUCTION.md, the d* result)."""


QUOTES: tuple[Quote, ...] = (
    # Paper 2's MLP twin.
    Quote(REPRODUCTION, lambda: f"**GeomDR (tail)** {ratio(line(P2, P2_GEOMDR))} sooner than the "
          f"baseline, whose {steps(line(P2, P2_BASE)['km_median'])}-step median"),
    Quote(REPRODUCTION, _p2_at_99),
    Quote(REPRODUCTION, lambda: "(trace) speeds grokking up "
          f"{ratio(line(P2, 'GeomDR=true, GeomDR penalty=trace, budget=3000'))}"),
    Quote(REPRODUCTION, lambda: "(tail_fraction) "
          f"{ratio(line(P2, 'GeomDR=true, GeomDR penalty=tail_fraction, budget=6000'))}"),
    Quote(REPRODUCTION, lambda: f"at a median {steps(line(P2, P2_GEOMDR)['collapse_median'])} "
          f"steps against {steps(line(P2, P2_BASE)['collapse_median'])} without it"),
    Quote(REPRODUCTION, lambda: "median gap "
          f"{steps(line(P2, P2_GEOMDR)['collapse_to_grok_median'])} steps"),
    Quote(REPRODUCTION, lambda: "8, median gap "
          f"{steps(line(P2, P2_BASE)['collapse_to_grok_median'])} steps; a post-hoc row"),
    Quote(REPRODUCTION, lambda: "The gap is not narrower with GeomDR ("
          f"{steps(line(P2, P2_GEOMDR)['collapse_to_grok_median'])} against "
          f"{steps(line(P2, P2_BASE)['collapse_to_grok_median'])} steps"),
    Quote(REPRODUCTION, _success_99),
    Quote(REPRODUCTION, lambda: "the twin's baseline groks at a KM median of "
          f"{steps(line(P2, P2_BASE)['km_median'])} steps"),
    *(Quote(REPRODUCTION, partial(_seed_row, *row)) for row in SEED_ROWS),
    # The division twin.
    Quote(REPRODUCTION, lambda: "KM medians "
          f"{steps(line('repro2_division_cpu', 'GeomDR=false')['km_median'])} without GeomDR and "
          f"{steps(line('repro2_division_cpu', 'GeomDR=true')['km_median'])} with it: "
          f"{ratio(line('repro2_division_cpu', 'GeomDR=true'))}, exact p = "
          f"{p2(line('repro2_division_cpu', 'GeomDR=true')['p'])}"),
)  # fmt: skip
"""Paper 2's quoted figures, in REPRODUCTION.md's order."""
