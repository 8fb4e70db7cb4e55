"""Quoted figures of version 3's Grokfast controls (the Transformer and MLP twins, the reference
task, the optimizer x norm and L2 follow-ups).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pandas as pd

from analysis.claims import (
    GROKFAST,
    GROKFAST_ADAM,
    GROKFAST_L2,
    GROKFAST_MLP,
    GROKFAST_REF,
    GROKFAST_SEP,
    GROKFAST_TWIN_L2,
)
from analysis.last_values import last_values
from analysis.quoted.common import REPRODUCTION, SUMMARIES, Quote, km95, share, span, steps

GROKFAST_ARMS = {
    ("ema", 0.005): "with the filter",
    ("none", 0.005): "without it at weight decay 0.005",
    ("none", 0.0): "without it at weight decay 0",
}
"""The arms of the Grokfast controls (grokfast.kind, optim.weight_decay), as the prose names
them."""


def grokfast_arms(runs: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """A Grokfast control's runs per arm, in GROKFAST_ARMS' order, with the prose's name."""
    arms = dict(list(runs.groupby(["grokfast.kind", "optim.weight_decay"])))
    return [(name, arms[key]) for key, name in GROKFAST_ARMS.items() if key in arms]


def _grokfast_arms() -> str:
    """The Grokfast control's Transformer at weight decay 0.005: fit steps and best test
    accuracies, with and without the filter."""
    runs = pd.read_csv(SUMMARIES / GROKFAST / "runs.csv")
    runs = runs[(runs["model.arch"] == "transformer") & (runs["optim.weight_decay"] == 0.005)]
    ema, none = (runs[runs["grokfast.kind"] == kind] for kind in ("ema", "none"))
    peak = "peak_test_acc"
    return (
        f"**{share(ema['grok_step_95'])} grokked** in both within "
        f"{steps(runs['steps_run'].max())} steps (at 0.95). Every run fit its training set "
        f"(median fit step {steps(ema['fit_step'].median())} with the filter, "
        f"{steps(none['fit_step'].median())} without); the best test accuracy a run reached had a "
        f"median of {ema[peak].median():.2f} with the filter and {none[peak].median():.2f} "
        f"without (largest {ema[peak].max():.2f} and {none[peak].max():.2f})"
    )


def _grokfast_mlp_arms() -> str:
    """The Grokfast control's MLP: grok counts per arm, fit steps, whether any test accuracy
    rose above its step-0 value, and where the weight norm and test loss ended."""
    runs = pd.read_csv(SUMMARIES / GROKFAST_MLP / "runs.csv").set_index("run_id")
    metrics = pd.read_parquet(SUMMARIES / GROKFAST_MLP / "metrics.parquet")
    later = metrics[metrics["step"] > 0].groupby("run_id")["test_acc"].max()
    start = metrics[metrics["step"] == 0].set_index("run_id")["test_acc"]
    last = last_values(metrics, ["weight_norm", "test_loss"]).reindex(runs.index)
    cells = {name: (arm, last.loc[arm.index].median()) for name, arm in grokfast_arms(runs)}
    grokked = ", ".join(f"{share(a['grok_step_95'])} {name}" for name, (a, _) in cells.items())
    ends = "; ".join(f"{m['weight_norm_last']:.0f} and {m['test_loss_last']:.0f} {name}"
                     for name, (_, m) in cells.items())
    above = int((later > start.reindex(later.index)).sum())
    end = steps(runs["steps_run"].max())
    return (
        f"MLP: **{grokked}** grokked within {end} steps (at 0.95). Every run fit its training "
        f"set by step {steps(runs['fit_step'].max())}; {above} of {len(runs)} runs ever had a "
        f"test accuracy above its step-0 value (largest step-0 value {start.max():.3f}; chance "
        f"1/47 = {1 / 47:.3f}). Median weight norm and test loss at step {end}: {ends}"
    )


def _grokfast_ref_arms(
    sweep: str = GROKFAST_REF, title: str = "Reference task", shared: str = "the tests"
) -> str:
    """A Grokfast control on its reference task: grok counts, runs that fit their training set
    (0.99), the median best test accuracy and the median weight norm at the end, per arm;
    `shared`: what else ran on the 2 cores."""
    runs = pd.read_csv(SUMMARIES / sweep / "runs.csv").set_index("run_id")
    metrics = pd.read_parquet(SUMMARIES / sweep / "metrics.parquet")
    last = last_values(metrics, ["weight_norm", "train_acc"]).reindex(runs.index)
    start = metrics.loc[metrics["step"] == 0, "test_acc"].max()
    wall = metrics.groupby("run_id")["wall_time"].max().reindex(runs.index) / 60
    cells = grokfast_arms(runs)

    def each(cell: Callable[[pd.DataFrame], str]) -> str:
        return ", ".join(f"{cell(arm)} {name}" for name, arm in cells)

    def count(column: str) -> Callable[[pd.DataFrame], str]:
        return lambda arm: share(arm[column])

    def median(values: pd.Series, form: str) -> Callable[[pd.DataFrame], str]:
        return lambda arm: format(values.loc[arm.index].median(), form)

    return (
        f"{title}: **{each(count('grok_step_95'))}** grokked within "
        f"{steps(runs['steps_run'].max())} steps (at 0.95). Runs that fit their training set "
        f"(0.99): {each(count('fit_step'))}; median best test accuracy "
        f"{each(median(runs['peak_test_acc'], '.2f'))} (at step 0 at most {start:.3f}; chance "
        f"1/97 = {1 / 97:.3f}); at the end, median train accuracy "
        f"{each(median(last['train_acc_last'], '.2f'))} and weight norm "
        f"{each(median(last['weight_norm_last'], '.0f'))}; minutes of wall clock per arm (8 "
        f"seeds packed; 2 cores, at times shared with {shared}) {each(median(wall, '.0f'))}"
    )


def _grokfast_sep_cells() -> str:
    """The optimizer x norm follow-up: each cell's grok count, KM median and grok-step range,
    runs that fit their training set and the median best test accuracy."""
    runs = pd.read_csv(SUMMARIES / GROKFAST_SEP / "runs.csv")
    budget = steps(runs["steps_run"].max())
    cells = []
    for (optimizer, norm), arm in runs.groupby(["optim.optimizer", "model.norm"]):
        name = f"{'Adam with an L2 term' if optimizer == 'adam' else 'AdamW'}, norm {norm}"
        grok = arm["grok_step_95"].dropna()
        when = (f"KM median {steps(km95(arm))}, grok steps {span(grok)}" if len(grok)
                else f"within {budget}")
        cells.append(f"**{share(arm['grok_step_95'])} grokked with {name}** ({when}; "
                     f"{share(arm['fit_step'])} fit their training set, median best test "
                     f"accuracy {arm['peak_test_acc'].median():.2f})")
    return "; ".join(cells)


def _grokfast_l2_arms() -> str:
    """The filter-alone follow-up: grok counts and grok-step ranges per arm."""
    runs = pd.read_csv(SUMMARIES / GROKFAST_L2 / "runs.csv")
    parts = []
    for kind, name in (("ema", "with the filter"), ("none", "without it")):
        grok = runs.loc[runs["grokfast.kind"] == kind, "grok_step_95"]
        parts.append(f"{share(grok)} {name} (grok steps {span(grok)})")
    return "At L2 0.005: " + ", ".join(parts)


def _grokfast_twin_l2() -> str:
    """The twins under Adam with an L2 term: grok counts, KM medians and grok-step ranges per
    twin and arm, and the latest grok step of all."""
    runs = pd.read_csv(SUMMARIES / GROKFAST_TWIN_L2 / "runs.csv")
    parts = []
    for arch, name in (("transformer", "Transformer"), ("mlp", "MLP")):
        for kind, arm in (("ema", "with the filter"), ("none", "without")):
            cell = runs[(runs["model.arch"] == arch) & (runs["grokfast.kind"] == kind)]
            grok = cell["grok_step_95"]
            parts.append(f"{name} {arm} {share(grok)} (KM median {steps(km95(cell))}, "
                         f"{span(grok)})")
    return f"grokked within {steps(runs['grok_step_95'].max())} steps: " + "; ".join(parts)


QUOTES: tuple[Quote, ...] = (
    # Version 3's Grokfast control.
    Quote(REPRODUCTION, _grokfast_arms),
    Quote(REPRODUCTION, _grokfast_mlp_arms),
    Quote(REPRODUCTION, _grokfast_ref_arms),
    Quote(REPRODUCTION, partial(_grokfast_ref_arms, GROKFAST_ADAM, "Reference optimizer",
                                "other sweeps")),
    Quote(REPRODUCTION, _grokfast_sep_cells),
    Quote(REPRODUCTION, _grokfast_l2_arms),
    Quote(REPRODUCTION, _grokfast_twin_l2),
)  # fmt: skip
"""The Grokfast controls' quoted figures."""
