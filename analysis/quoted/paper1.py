"""Quoted figures of paper 1's studies: the sphere and LayerNorm arms at paper size, and the
paper-1 twin (its grok counts, its Fourier concentration, how many runs repeat version 1).
"""

from __future__ import annotations

import pandas as pd

from analysis.claims import P1, P1_SIZE, P2
from analysis.quoted.common import (
    REPRODUCTION,
    SUMMARIES,
    Quote,
    line,
    p2,
    ratio,
    steps,
    value_range,
)
from sweepgrok.analysis.survival import km_median

SPHERE_PUBLISHED = {1: (2400.0, 353.0), 0: (2480.0, 464.0)}
"""Paper 1's sphere grok steps, mean and std over its 10 seeds, by weight decay."""


def _sphere_row(wd: int) -> str:
    """A row of the sphere arms' table: ours, the published mean and std, median, range, fit."""
    runs = pd.read_csv(SUMMARIES / P1_SIZE / "runs.csv")
    arm = runs[runs["optim.weight_decay"] == wd]
    t = arm["grok_step_95"]
    g = line(P1_SIZE, f"wd={wd}")
    mean, std = SPHERE_PUBLISHED[wd]
    return (f"| wd {wd} | {t.size} | {steps(t.mean())} ± {steps(t.std(ddof=1))} | "
            f"{steps(mean)} ± {steps(std)} | {steps(g['grok_median'])} "
            f"[{steps(g['grok_median_lo'])}, {steps(g['grok_median_hi'])}] | "
            f"{steps(g['grok_min'])}-{steps(g['grok_max'])} | {steps(arm['fit_step'].mean())} |")


def _sphere_welch() -> str:
    """How far our sphere means lie from the published ones, with Welch's t on the summaries."""
    from scipy.stats import ttest_ind_from_stats

    runs = pd.read_csv(SUMMARIES / P1_SIZE / "runs.csv")
    gaps, ps = [], []
    for wd, (mean, std) in SPHERE_PUBLISHED.items():
        t = runs.loc[runs["optim.weight_decay"] == wd, "grok_step_95"]
        test = ttest_ind_from_stats(t.mean(), t.std(ddof=1), t.size, mean, std, 10,
                                    equal_var=False)
        gaps.append(t.mean() - mean)
        ps.append(f"{test.pvalue:.2f}")
    where = [f"{steps(abs(g))} steps {'below' if g < 0 else 'above'}" for g in gaps]
    return (f"The means lie {where[0]} (wd 1) and {where[1]} (wd 0) the published ones (Welch's "
            f"t from the published mean and std: p = {ps[0]} and {ps[1]};")


def _sphere_runs() -> str:
    """How many sphere runs grokked, and the longer trial's wall clock."""
    runs = pd.read_csv(SUMMARIES / P1_SIZE / "runs.csv")
    wall = pd.read_parquet(SUMMARIES / P1_SIZE / "metrics.parquet", columns=["wall_time"])
    grokked = int(runs["grok_step_95"].notna().sum())
    return (f"{grokked} of {len(runs)} runs grokked ({wall['wall_time'].max() / 60:.0f} minutes "
            "of wall clock for the longer of the two trials")


def _layernorm_h200() -> str:
    runs = pd.read_csv(SUMMARIES / "paper1_layernorm_h200" / "runs.csv")
    grokked = runs[~runs["censored"]]["grok_step"]
    censored = runs[runs["censored"]]
    times = runs["grok_step"].fillna(runs["steps_run"]).to_numpy(float)
    km = km_median(times, runs["censored"].to_numpy(bool))
    last = ", ".join(f"seed {s} censored at {steps(t)}"
                     for s, t in zip(censored["train.seed"], censored["steps_run"], strict=True))
    end = steps(runs["steps_run"].max())
    return (f"{grokked.size} of {len(runs)} seeds grokked by step {end}: "
            f"mean {steps(grokked.mean())} ± {steps(grokked.std(ddof=1))} (n = {grokked.size}) "
            f"against the published 54,160 ± 13,490; Kaplan-Meier median {steps(km)} "
            f"(n = {len(runs)}, {last}).")


def _same_grok_steps(new: str, old: str, where: dict[str, object] | None = None) -> tuple[int, int]:
    """(runs of `new` whose grok step equals `old`'s run with the same config, runs matched):
    runs matched on the config keys varying in `old`, besides the budget."""
    a = pd.read_csv(SUMMARIES / new / "runs.csv")
    b = pd.read_csv(SUMMARIES / old / "runs.csv")
    for key, value in (where or {}).items():
        a = a[a[key] == value]
    keys = [k for k in b.columns if "." in k and k != "train.max_steps" and b[k].nunique() > 1]
    both = a.merge(b, on=keys, suffixes=("_new", "_old"))
    same = both["grok_step_95_new"].eq(both["grok_step_95_old"]).sum()
    return int(same), len(both)


def _v1_repeats() -> str:
    """How many seed-1-3 runs of the committed version-2 twins repeat version 1's grok step."""
    p1 = _same_grok_steps(P1, "repro_paper1_cpu")
    p2_tail = _same_grok_steps(P2, "repro_paper2_cpu", {"geomdr.penalty": "tail"})
    div = _same_grok_steps("repro2_division_cpu", "repro_paper2_cpu")
    p2_same, p2_all = p2_tail[0] + div[0], p2_tail[1] + div[1]
    return (f"{p1[0]} of {p1[1]} paper-1 runs grok at version 1's step, and {p2_same} of "
            f"{p2_all} paper-2 runs (the tail arms and division)")


def _h200_vs_sphere() -> str:
    """The LayerNorm arm on the H200 against the CPU sphere arm at weight decay 1: KM medians."""
    runs = pd.read_csv(SUMMARIES / "paper1_layernorm_h200" / "runs.csv")
    times = runs["grok_step"].fillna(runs["steps_run"]).to_numpy(float)
    layernorm = km_median(times, runs["censored"].to_numpy(bool))
    sphere = line(P1_SIZE, "wd=1")
    return (f"(KM median {steps(sphere['km_median'])}, n = {sphere['n']}, run on a CPU with other "
            f"code), the ratio of KM medians is about {layernorm / sphere['km_median']:.0f}x")


def _sphere_member_step() -> str:
    """The paper-1 model's CPU cost per member-step, from the paper1_sphere sweep: its runs'
    steps over its trials' wall clock (each trial ran on one core)."""
    runs = pd.read_csv(SUMMARIES / P1_SIZE / "runs.csv")
    metrics = pd.read_parquet(SUMMARIES / P1_SIZE / "metrics.parquet",
                              columns=["run_id", "wall_time"])
    trial = metrics["run_id"].str.rsplit("-s", n=1).str[0]
    core_seconds = metrics.groupby(trial)["wall_time"].max().sum()
    member_steps = runs["steps_run"].sum()
    return (f"{1000 * core_seconds / member_steps:.0f} ms per member-step for the paper-1 model "
            f"in the `paper1_sphere` sweep above (10 packed seeds per trial, partly beside other "
            f"sweeps: {steps(member_steps)} member-steps in {core_seconds / 60:.0f} core-minutes")


def _grokked(sweep: str) -> str:
    runs = pd.read_csv(SUMMARIES / sweep / "runs.csv")
    return f"{int(runs['grok_step_95'].notna().sum())} of {len(runs)} runs grokked"


def _fourier_range(sweep: str) -> str:
    """'0.67-0.96': the lowest and highest run's last Fourier concentration above chance."""
    runs = pd.read_csv(SUMMARIES / sweep / "runs.csv")
    col = runs["fourier_unembed_above_chance_last"]
    return value_range(col, "{:.2f}".format)


def _p1_fourier_medians() -> str:
    """The paper-1 twin's median last Fourier concentration, sphere (wd 1) and LayerNorm."""
    runs = pd.read_csv(SUMMARIES / P1 / "runs.csv")
    runs = runs[(runs["model.attention"] == "softmax") & (runs["optim.weight_decay"] == 1)]
    median = runs.groupby("model.norm")["fourier_unembed_above_chance_last"].median()
    return f"(medians {median['sphere']:.2f} vs {median['layernorm']:.2f};"


QUOTES: tuple[Quote, ...] = (
    # Paper 1 at paper size.
    Quote(REPRODUCTION, _sphere_runs),
    Quote(REPRODUCTION, _layernorm_h200),
    Quote(REPRODUCTION, _h200_vs_sphere),
    Quote(REPRODUCTION, _v1_repeats),
    Quote(REPRODUCTION, _sphere_member_step),
    Quote(REPRODUCTION, lambda: _sphere_row(1)),
    Quote(REPRODUCTION, lambda: _sphere_row(0)),
    Quote(REPRODUCTION, _sphere_welch),
    Quote(REPRODUCTION, lambda: "ratio of KM medians "
          f"{ratio(line('paper1_sphere', 'wd=0'), '')} (exact p = "
          f"{p2(line('paper1_sphere', 'wd=0')['p'])})"),
    Quote(REPRODUCTION, lambda: f"step (above chance {_fourier_range('paper1_sphere')} of the way"),
    # The paper-1 twin.
    Quote(REPRODUCTION, lambda: _grokked(P1)),
    Quote(REPRODUCTION, lambda: "concentrated on a few frequencies, "
          f"{_fourier_range('repro2_paper1_cpu')} of the way"),
    Quote(REPRODUCTION, _p1_fourier_medians),
)  # fmt: skip
"""Paper 1's quoted figures, in REPRODUCTION.md's order."""
