"""Quoted figures of version 3's slow-baseline control (GeomDR from t_s 500 and 2000 against a
baseline that groks late).
"""

from __future__ import annotations

import pandas as pd

from analysis.claims import SLOW
from analysis.last_values import last_values
from analysis.quoted.common import REPRODUCTION, SUMMARIES, Quote, line, p2, ratio, steps


def _slow_arm(label: str) -> str:
    """'15,850 (12,900-18,500)': a slow-regime arm's KM median and range at 0.95 (with its
    grokked count where not all grokked)."""
    g = line(SLOW, label)
    count = "" if g["n_grokked"] == g["n"] else f"; {g['n_grokked']}/{g['n']}"
    return f"{steps(g['km_median'])} ({steps(g['grok_min'])}-{steps(g['grok_max'])}{count})"


def _slow_medians() -> str:
    """The slow-regime arms' KM medians and ranges, as REPRODUCTION.md quotes them."""
    base, early, late = (_slow_arm(f"GeomDR={on}, t_s={ts}")
                         for on, ts in (("false", 500), ("true", 500), ("true", 2000)))
    return f"the baseline KM median {base}, GeomDR from t_s 500 {early}, from t_s 2000 {late}"


def _slow_unfinished() -> str:
    """The slow-regime run that had neither ended nor passed 0.95 when the sweep stopped."""
    runs = pd.read_csv(SUMMARIES / SLOW / "runs.csv").set_index("run_id")
    unfinished = runs[(runs["status"] == "interrupted") & runs["grok_step_95"].isna()]
    open_ = unfinished.iloc[0]
    metrics = pd.read_parquet(SUMMARIES / SLOW / "metrics.parquet")
    last = last_values(metrics, ["test_acc"])["test_acc_last"][unfinished.index[0]]
    return (f"seed {open_['train.seed']} of the t_s {open_['geomdr.start_step']} arm, censored "
            f"at {steps(open_['steps_run'])} of its {steps(open_['train.max_steps'])} steps "
            f"({last:.2f} test accuracy)")


QUOTES: tuple[Quote, ...] = (
    # Version 3's slow-baseline control.
    Quote(REPRODUCTION, _slow_medians),
    Quote(REPRODUCTION, _slow_unfinished),
    Quote(REPRODUCTION, lambda: f"t_s 2000 against the baseline, "
          f"{ratio(line(SLOW, 'GeomDR=true, t_s=2000'))}, exact p = "
          f"{p2(line(SLOW, 'GeomDR=true, t_s=2000')['p'])}"),
)  # fmt: skip
"""The slow-baseline control's quoted figures."""
