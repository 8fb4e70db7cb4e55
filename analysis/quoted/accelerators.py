"""Quoted figures of the accelerator comparison (its README's table and claims), as
REPRODUCTION.md and README.md summarise them.
"""

from __future__ import annotations

from functools import partial

import pandas as pd

from analysis.last_values import last_values
from analysis.quoted.common import (
    ACCELERATORS,
    REPRODUCTION,
    SUMMARIES,
    Quote,
    groups,
    p2,
    ratio,
    steps,
    value_range,
)

ACC = "../accelerators"


def _acc_row(arch: str, arm: str) -> str:
    table = groups(ACC)
    g = table[(table["model.arch"] == arch) & (table["accelerator.arm"] == arm)].iloc[0]
    name = "Transformer" if arch == "transformer" else "MLP"
    km = f"> {steps(g['steps_run_max'])}" if pd.isna(g["km_median"]) else steps(g["km_median"])
    if arm == "baseline":
        speed, p = "-", "-"
    else:
        speed = (
            f"< {g['speedup_bound']:.2f}"
            if pd.isna(g["km_median"])
            else f"{g['speedup']:.2f} [{g['speedup_lo']:.2f}, {g['speedup_hi']:.2f}]"
        )
        p = p2(g["p_holm"])
    shown = "plain" if arm == "baseline" else arm
    return f"| {name} | {shown} | {g['n_grokked']}/{g['n']} | {km} | {speed} | {p} |"


ACC_ROWS = [
    ("transformer", a)
    for a in ("baseline", "sphere", "uniform", "geomdr", "grokfast", "stablemax_perp",
              "stablemax_perp+wd0")
] + [("mlp", a) for a in ("baseline", "geomdr", "grokfast", "stablemax_perp",
                          "stablemax_perp+wd0")]  # fmt: skip


def _acc(arm: str, arch: str = "transformer") -> pd.Series:
    table = groups(ACC)
    return table[(table["model.arch"] == arch) & (table["accelerator.arm"] == arm)].iloc[0]


def _acc_x(arm: str, arch: str) -> str:
    """'3.84x': an arm's speed-up over its architecture's plain model."""
    return f"{_acc(arm, arch)['speedup']:.2f}x"


def _acc_ci(arm: str, arch: str, holm: bool = True) -> str:
    """'0.74x [0.65, 0.79], p Holm 0.0016': an arm's speed-up with its CI (and Holm's p)."""
    g = _acc(arm, arch)
    text = f"{g['speedup']:.2f}x [{g['speedup_lo']:.2f}, {g['speedup_hi']:.2f}]"
    return text + (f", p Holm {p2(g['p_holm'])}" if holm else "")


def _acc_perp_wd0() -> str:
    """The Transformer's StableMax + perpendicular-gradient arm without weight decay: its grok
    steps, and where the other runs ended (test and train accuracy at the budget)."""
    runs = pd.read_csv(SUMMARIES / ACC / "runs.csv")
    arm = runs[(runs["model.arch"] == "transformer")
               & (runs["accelerator.arm"] == "stablemax_perp+wd0")].set_index("run_id")
    grok = arm["grok_step_95"].dropna().sort_values()
    metrics = pd.read_parquet(SUMMARIES / ACC / "metrics.parquet")
    rest = last_values(metrics, ["test_acc", "train_acc"]).loc[arm.index.difference(grok.index)]
    at = ", ".join(steps(t) for t in grok.iloc[:-1]) + f" and {steps(grok.iloc[-1])}"
    test, train = rest["test_acc_last"], rest["train_acc_last"]
    return (
        f"without decay {len(grok)} of {len(arm)} runs reach 0.95 within "
        f"{steps(arm['steps_run'].max())} steps (at {at} steps), and the other {len(rest)} end "
        f"at {value_range(test, '{:.3f}'.format)} test accuracy (train accuracy "
        f"{value_range(train, '{:.2f}'.format)})"
    )


QUOTES: tuple[Quote, ...] = (
    # The accelerator comparison, and README's summary of it.
    *(Quote(ACCELERATORS, partial(_acc_row, *a)) for a in ACC_ROWS),
    Quote(ACCELERATORS, lambda: f"GeomDR speeds up the MLP ({_acc_x('geomdr', 'mlp')})"),
    Quote(ACCELERATORS, lambda: f"grokking of the MLP ({_acc_ci('grokfast', 'mlp')}) and is not "
          f"faster on the Transformer ({_acc_ci('grokfast', 'transformer')}: no difference shown)"),
    Quote(ACCELERATORS, lambda: f"(delay ~0; {_acc_x('stablemax_perp+wd0', 'mlp')} without"),
    Quote(ACCELERATORS, _acc_perp_wd0),
    Quote("README.md", lambda: f"the sphere groks {ratio(_acc('sphere'))} sooner than the plain "
          f"model, uniform attention {_acc('uniform')['speedup']:.2f}x"),
    Quote("README.md", lambda: "Grokfast is not faster there "
          f"({_acc_ci('grokfast', 'transformer', holm=False)}, not significant) and slower on the "
          f"MLP ({_acc_ci('grokfast', 'mlp', holm=False)})"),
    # The GeomDR arm on the Transformer, as REPRODUCTION.md quotes it.
    Quote(REPRODUCTION, lambda: f"KM medians {steps(_acc('baseline')['km_median'])} (baseline) "
          f"and {steps(_acc('geomdr')['km_median'])} (GeomDR), {ratio(_acc('geomdr'))}, p = "
          f"{p2(_acc('geomdr')['p'])}, {_acc('geomdr')['n_grokked']} of 8 grokked in each arm"),
)  # fmt: skip
"""The accelerator comparison's quoted figures."""
