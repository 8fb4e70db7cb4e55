"""The run-derived numbers quoted in prose (README.md, analysis/REPRODUCTION.md,
analysis/accelerators/README.md), each computed from the committed summary it comes from (the
GeomDR step costs: from docs/speed.md's table, where they were measured).

    python -m analysis.quoted      # prints every quote that is missing or stale

The claims table is generated (`analysis.claims`); prose around it quotes figures by hand. Each
`Quote` names a document and a function that writes the text the document must contain,
from the committed ``groups_95.csv`` / ``runs.csv`` files, so a number that no longer matches
its summary fails `tests/repro_analysis/test_claims.py` instead of drifting. Whitespace is compared
collapsed (prose wraps). The per-sweep tables of REPRODUCTION.md are rows of that sweep's generated
``report.md`` (`copied_rows`).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd

from analysis.claims import (
    DSTAR,
    GRID,
    GROKFAST,
    GROKFAST_ADAM,
    GROKFAST_L2,
    GROKFAST_MLP,
    GROKFAST_REF,
    GROKFAST_SEP,
    GROKFAST_TWIN_L2,
    P1,
    P1_SIZE,
    P2,
    S5,
    SLOW,
    SUB,
)
from analysis.last_values import last_values
from sweepgrok.analysis.stats import times_and_censoring
from sweepgrok.analysis.survival import km_median

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SUMMARIES = HERE / "reproduction"
REPRODUCTION = "analysis/REPRODUCTION.md"
ACCELERATORS = "analysis/accelerators/README.md"


@dataclass(frozen=True)
class Quote:
    """A text one document must contain, computed from committed summaries."""

    doc: str
    """The document, relative to the repository root."""
    text: Callable[[], str]
    """The quoted text, from the summaries."""


def groups(sweep: str) -> pd.DataFrame:
    """A committed groups_95.csv (``../accelerators`` for the accelerator comparison)."""
    return pd.read_csv(SUMMARIES / sweep / "groups_95.csv")


def line(sweep: str, label: str) -> pd.Series:
    """The group line with this label (sweepgrok's group label)."""
    table = groups(sweep)
    return table[table["label"] == label].iloc[0]


def steps(x: float) -> str:
    return f"{x:,.0f}"


def ratio(g: pd.Series, unit: str = "x") -> str:
    """'3.57x [2.39, 4.14]': the speed-up and its CI, two decimals."""
    return f"{g['speedup']:.2f}{unit} [{g['speedup_lo']:.2f}, {g['speedup_hi']:.2f}]"


def p2(x: float) -> str:
    return f"{x:.2g}"


def share(values: pd.Series) -> str:
    """'3/8': how many runs have a value (a grok or fit step), of how many."""
    return f"{int(values.notna().sum())}/{values.size}"


def value_range(values: pd.Series, fmt: Callable[[float], str]) -> str:
    """'0.96-1.00': the smallest and largest value as `fmt` prints them ('0.96' when both
    print alike)."""
    low, high = fmt(values.min()), fmt(values.max())
    return low if low == high else f"{low}-{high}"


def span(values: pd.Series) -> str:
    """'750-1,700': the smallest and largest value (steps)."""
    return value_range(values, steps)


def km95(runs: pd.DataFrame) -> float:
    """The Kaplan-Meier median grok step of these runs at test accuracy 0.95."""
    return km_median(*times_and_censoring(runs, 0.95))


P2_BASE = "GeomDR=false, GeomDR penalty=tail, budget=6000"
P2_GEOMDR = "GeomDR=true, GeomDR penalty=tail, budget=6000"
ACC = "../accelerators"


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


ACC_ROWS = [
    ("transformer", a)
    for a in ("baseline", "sphere", "uniform", "geomdr", "grokfast", "stablemax_perp",
              "stablemax_perp+wd0")
] + [("mlp", a) for a in ("baseline", "geomdr", "grokfast", "stablemax_perp",
                          "stablemax_perp+wd0")]  # fmt: skip


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


def _p1_fourier_medians() -> str:
    """The paper-1 twin's median last Fourier concentration, sphere (wd 1) and LayerNorm."""
    runs = pd.read_csv(SUMMARIES / P1 / "runs.csv")
    runs = runs[(runs["model.attention"] == "softmax") & (runs["optim.weight_decay"] == 1)]
    median = runs.groupby("model.norm")["fourier_unembed_above_chance_last"].median()
    return f"(medians {median['sphere']:.2f} vs {median['layernorm']:.2f};"


def _s5() -> str:
    """The S5 twin: how many runs grokked per group, where train accuracy ended, and the best
    test accuracy."""
    runs = pd.read_csv(SUMMARIES / S5 / "runs.csv")
    metrics = pd.read_parquet(SUMMARIES / S5 / "metrics.parquet")
    train = last_values(metrics, ["train_acc"])["train_acc_last"]
    counts = runs.groupby(["model.norm", "optim.weight_decay"])["grok_step_95"].agg(share)
    grokked = "no run grokked" if runs["grok_step_95"].isna().all() else "some runs grokked"
    return (f"**{grokked.capitalize()}** ({', '.join(counts)} by group, budget "
            f"{steps(runs['steps_run'].max())}): train accuracy ended at "
            f"{value_range(train, '{:.2f}'.format)} and peak test accuracy "
            f"{value_range(runs['peak_test_acc'], '{:.3f}'.format)}")


S5_PILOTS = ("repro3_s5_pilot_cpu", "repro3_s5_pilot2_cpu", "repro3_s5_pilot3_cpu",
             "repro3_s5_pilot4_cpu", "repro3_s5_pilot5_cpu")
"""The version-3 pilots that looked for a setting where the S5 twin's LayerNorm baseline groks."""
S5_CONTROL = "repro3_s5_cpu"


def _at_steps(values: pd.Series) -> str:
    """' (at steps 200-300)' for the steps where runs got there; '' when none did."""
    reached = values.dropna()
    if reached.empty:
        return ""
    at = span(reached)
    return f" (at step{'s' * ('-' in at)} {at})"


def _s5_pilot(sweep: str) -> str:
    """A pilot's arms: per weight decay, how many runs fit (and when), how many grokked, train
    accuracy at the last evaluation and the best test accuracy; then the steps run."""
    runs = pd.read_csv(SUMMARIES / sweep / "runs.csv")
    metrics = pd.read_parquet(SUMMARIES / sweep / "metrics.parquet")
    runs = runs.join(last_values(metrics, ["train_acc"]), on="run_id")
    arms = []
    for wd, arm in runs.groupby("optim.weight_decay"):
        arms.append(
            f"weight decay {wd:g}: fit {share(arm['fit_step'])}{_at_steps(arm['fit_step'])}, "
            f"grokked {share(arm['grok_step_95'])}{_at_steps(arm['grok_step_95'])}, last train "
            "accuracy "
            f"{value_range(arm['train_acc_last'], '{:.2f}'.format)}, best test accuracy "
            f"{arm['peak_test_acc'].max():.3f}"
        )
    return f"{'; '.join(arms)} (steps run: {span(runs['steps_run'])})"


def _s5_rise() -> str:
    """Pilot 3 at weight decay 1: each seed's test accuracy at step 9,000 and at its last step
    (where it began to rise)."""
    sweep = S5_PILOTS[2]
    metrics = pd.read_parquet(SUMMARIES / sweep / "metrics.parquet")
    runs = pd.read_csv(SUMMARIES / sweep / "runs.csv")
    arm = metrics[metrics["run_id"].isin(runs.loc[runs["optim.weight_decay"] == 1, "run_id"])]
    seeds = []
    for _, run in arm.sort_values("step").groupby("run_id"):
        at = run.set_index("step")["test_acc"]
        seeds.append(f"{at[9000]:.3f} at step 9,000 to {at.iloc[-1]:.3f} at {steps(at.index[-1])}")
    return f"test accuracy rose from {' and from '.join(seeds)}"


def _s5_repeat() -> str:
    """Pilot 4's weight-decay-1 runs against pilot 3's (same seeds and setting, another budget):
    every evaluated column equal at every evaluation both ran."""
    merged = []
    for sweep in (S5_PILOTS[3], S5_PILOTS[2]):
        runs = pd.read_csv(SUMMARIES / sweep / "runs.csv")
        runs = runs[runs["optim.weight_decay"] == 1][["run_id", "train.seed"]]
        merged.append(pd.read_parquet(SUMMARIES / sweep / "metrics.parquet").merge(runs))
    both = merged[0].merge(merged[1], on=["train.seed", "step"], suffixes=("", "_other"))
    columns = [c for c in merged[0] if c not in ("run_id", "train.seed", "step", "wall_time")]
    same = all(both[c].fillna(-1).equals(both[f"{c}_other"].fillna(-1)) for c in columns)
    evaluations = both.groupby("train.seed").size()
    return (f"{'repeat' if same else 'differ from'} pilot 3's bit for bit over the "
            f"{steps(both['step'].max())} steps they ran (every evaluated column at all "
            f"{evaluations.min()} evaluations, both seeds)")


def _s5_together() -> str:
    """Pilot 4 at weight decay 3: train accuracy at each run's first evaluation with test
    accuracy above twice chance (2/120), where its test accuracy began to rise."""
    runs = pd.read_csv(SUMMARIES / S5_PILOTS[3] / "runs.csv")
    metrics = pd.read_parquet(SUMMARIES / S5_PILOTS[3] / "metrics.parquet")
    arm = metrics[metrics["run_id"].isin(runs.loc[runs["optim.weight_decay"] == 3, "run_id"])]
    rising = arm[arm["test_acc"] > 2 / 120].sort_values("step").groupby("run_id").head(1)
    return (f"train accuracy {value_range(rising['train_acc'], '{:.2f}'.format)} at the first "
            "evaluation with test accuracy above twice chance")


def _s5_pairs() -> str:
    """Pilot 5's sphere against pilot 4's LayerNorm at weight decay 1, seed by seed (the same
    seeds and setting): each one's grok step."""
    grok = {}
    for norm, sweep in (("sphere", S5_PILOTS[4]), ("LayerNorm", S5_PILOTS[3])):
        runs = pd.read_csv(SUMMARIES / sweep / "runs.csv")
        grok[norm] = runs[runs["optim.weight_decay"] == 1].set_index("train.seed")["grok_step_95"]
    return "; ".join(f"seed {seed}: sphere {steps(grok['sphere'][seed])}, LayerNorm "
                     f"{steps(grok['LayerNorm'][seed])}" for seed in sorted(grok["sphere"].index))


def _s5_runs(norm: str) -> pd.DataFrame:
    """The S5 control's runs of one arm."""
    runs = pd.read_csv(SUMMARIES / S5_CONTROL / "runs.csv")
    return runs[runs["model.norm"] == norm]


def _s5_arm(norm: str) -> str:
    """An arm of the S5 control: how many fit and grokked (at which steps, KM median), and where
    the runs that did not grok ended (train accuracy: best and last; best test accuracy)."""
    metrics = pd.read_parquet(SUMMARIES / S5_CONTROL / "metrics.parquet")
    best_train = metrics.groupby("run_id")["train_acc"].max().rename("best_train_acc")
    arm = _s5_runs(norm).join(last_values(metrics, ["train_acc", "test_acc"]), on="run_id")
    arm = arm.join(best_train, on="run_id")
    grok = arm["grok_step_95"]
    text = f"fit {share(arm['fit_step'])}, grokked {share(grok)}{_at_steps(grok)}"
    if grok.notna().sum() * 2 >= len(arm):
        text += f", KM median {steps(km95(arm))}"
    rest = arm[grok.isna()]
    if len(rest):
        acc = "{:.2f}".format
        text += (f"; {len(rest)} not by step {steps(rest['steps_run'].max())}: best train "
                 f"accuracy {value_range(rest['best_train_acc'], acc)}, last "
                 f"{value_range(rest['train_acc_last'], acc)}; best test accuracy "
                 f"{value_range(rest['peak_test_acc'], acc)}, last "
                 f"{value_range(rest['test_acc_last'], acc)}")
    return text


def _s5_delays() -> str:
    """'0, 0, 0, 300 and 1,700 steps': the LayerNorm arm's delays (grok - fit step)."""
    arm = _s5_runs("layernorm")
    delays = sorted((arm["grok_step_95"] - arm["fit_step"]).dropna())
    text = [steps(d) for d in delays]
    return f"{', '.join(text[:-1])} and {text[-1]} steps"


def _s5_earliest() -> str:
    """The sphere's earliest grokking runs: how many, at which step, their best test accuracy
    and how many of them fit."""
    arm = _s5_runs("sphere")
    first = arm[arm["grok_step_95"] == arm["grok_step_95"].min()]
    return (f"{len(first)} sphere runs grokked at step {steps(first['grok_step_95'].iloc[0])}, "
            f"with best test accuracy {value_range(first['peak_test_acc'], '{:.3f}'.format)}; "
            f"{int(first['fit_step'].notna().sum())} of them fit")


FALLBACK_MIN = 0.05
"""A test accuracy that falls this far below its best so far counts as falling back."""


def _s5_fallback(norm: str) -> str:
    """'6 of 8 runs, by 0.14-0.42': the runs of an S5-control arm whose test accuracy fell back
    from its best so far by more than FALLBACK_MIN at some evaluation, and by how much."""
    metrics = pd.read_parquet(SUMMARIES / S5_CONTROL / "metrics.parquet").sort_values("step")
    ids = set(_s5_runs(norm)["run_id"])
    arm = metrics[metrics["run_id"].isin(ids)]
    below_best = arm.groupby("run_id")["test_acc"].cummax() - arm["test_acc"]
    drop = below_best.groupby(arm["run_id"]).max()
    fell = drop[drop > FALLBACK_MIN]
    return f"{len(fell)} of {len(ids)} runs, by {value_range(fell, '{:.2f}'.format)}"


def _s5_control() -> str:
    """Both arms of the S5 control."""
    return f"LayerNorm: {_s5_arm('layernorm')}. The sphere: {_s5_arm('sphere')}."


def _s5_step_seconds() -> str:
    """'0.14 s per packed step of 2 seeds at d_model 64 and 0.27-0.28 s at d_model 128': each
    pilot arm's seconds per packed step, pilots 1 and 3."""
    small = [packed_step_seconds(S5_PILOTS[0], "optim.weight_decay", wd) for wd in (0.1, 0.3)]
    wide = [packed_step_seconds(S5_PILOTS[2], "optim.weight_decay", wd) for wd in (0.3, 1.0)]
    return (f"{value_range(pd.Series(small), '{:.2f}'.format)} s per packed step of 2 seeds at "
            f"d_model 64 and {value_range(pd.Series(wide), '{:.2f}'.format)} s at d_model 128")


def _fourier_range(sweep: str) -> str:
    """'0.67-0.96': the lowest and highest run's last Fourier concentration above chance."""
    runs = pd.read_csv(SUMMARIES / sweep / "runs.csv")
    col = runs["fourier_unembed_above_chance_last"]
    return value_range(col, "{:.2f}".format)


def _optuna() -> str:
    """The Optuna search's compute saved by the exact time cap, and its fANOVA importances."""
    summary = json.loads((SUMMARIES / "repro_optuna_cpu" / "search_summary.json").read_text())
    c, imp = summary["compute"], summary["importances"]
    return (f"The exact time cap stopped {c['capped_runs']} of {c['runs']} runs once they could "
            f"no longer win and ran {steps(c['steps_run'])} steps instead of "
            f"{steps(c['steps_without_cap'])} ({c['saved_fraction']:.1%} saved); the fANOVA "
            f"importances are d* {imp['geomdr.target_dim']:.2f}, T_ramp "
            f"{imp['geomdr.ramp_steps']:.2f}, t_s {imp['geomdr.start_step']:.2f}, lambda_max "
            f"{imp['geomdr.lambda_max']:.2f}")


def _step_cost(variant: str) -> tuple[str, float]:
    """docs/speed.md's GeomDR step-cost row `variant`: (its range of six runs, its median)."""
    text = (ROOT / "docs" / "speed.md").read_text()
    found = re.search(rf"^\| {re.escape(variant)} \| ([\d.]+-[\d.]+)x \| \**([\d.]+)x", text,
                      re.MULTILINE)
    if found is None:
        raise ValueError(f"docs/speed.md: no step-cost row {variant!r}")
    return found.group(1), float(found.group(2))


def _subsample_cost() -> str:
    """REPRODUCTION.md's GeomDR step costs, as docs/speed.md measured them."""
    (part_range, part), (whole_range, whole) = (
        _step_cost(f"GeomDR subsample {s}, eigh") for s in ("0.1", "1.0"))
    return (f"costs {part:.2f}x a plain step (median of six runs, {part_range}x) against "
            f"{whole:.2f}x ({whole_range}x) for the whole batch (`benchmarks/bench_geomdr`, on "
            f"paper 2's MLP at Z_97; docs/speed.md), i.e. {whole / part:.1f}x less per step")


def packed_step_seconds(sweep: str, key: str, value: float) -> float:
    """Wall-clock seconds per step of one arm's packed trial, from step 100 (after the early
    evaluations) to the step where its first member stopped (all seeds still training)."""
    runs = pd.read_csv(SUMMARIES / sweep / "runs.csv")
    arm = set(runs.loc[runs[key] == value, "run_id"])
    columns = ["run_id", "step", "wall_time"]
    metrics = pd.read_parquet(SUMMARIES / sweep / "metrics.parquet", columns=columns)
    metrics = metrics[metrics["run_id"].isin(arm)]
    last = metrics.groupby("run_id")["step"].max().min()
    wall = metrics.groupby("step")["wall_time"].max()
    return float((wall[last] - wall[100]) / (last - 100))


def _subsample_wall() -> str:
    """The subsample sweep's own wall clock per packed step (all, 25%, 10% of the data)."""
    every, quarter, tenth = (
        packed_step_seconds(SUB, "geomdr.subsample", s) for s in (1, 0.25, 0.1)
    )
    return (f"in this sweep's own wall clock (a shared machine) {every:.2f}, {quarter:.2f} and "
            f"{tenth:.2f} s per packed step of 8 seeds (all, 25%, 10%): {every / tenth:.1f}x")


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


def _grid_cell(g: pd.Series) -> str:
    """'2,000 (7/8)': a d* x t_s cell's KM median at 0.95 and how many grokked."""
    return f"{steps(g['km_median'])} ({g['n_grokked']}/{g['n']})"


def _grid_row(start_step: int) -> str:
    """A row of REPRODUCTION.md's d* x t_s table (t_s 500 from the d* control)."""
    if start_step == 500:
        cells = [_grid_cell(line(DSTAR, f"d*={d}")) for d in (2, 16, 64)]
        name = f"500 (`{DSTAR}`)"
    else:
        cells = [_grid_cell(line(GRID, f"t_s={start_step}, d*={d}")) for d in (2, 16, 64)]
        name = str(start_step)
    return f"| {name} | {' | '.join(cells)} |"


def _grid_ratio(start_step: int, target_dim: int) -> str:
    """'0.45x [0.26, 0.83], log-rank p = 0.012': a d* claim of the grid control."""
    g = line(GRID, f"t_s={start_step}, d*={target_dim}")
    return f"{ratio(g)}, log-rank p = {p2(g['p'])}"


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
    # Version 3's slow-baseline control.
    Quote(REPRODUCTION, _slow_medians),
    Quote(REPRODUCTION, _slow_unfinished),
    # The d* x t_s control.
    *(Quote(REPRODUCTION, partial(_grid_row, ts)) for ts in (100, 500, 2000)),
    Quote(REPRODUCTION, lambda: f"at t_s 100, {_grid_ratio(100, 2)}; at t_s 2000, "
          f"{_grid_ratio(2000, 2).replace('log-rank ', '')}"),
    Quote(REPRODUCTION, lambda: f"at t_s 100, {ratio(line(GRID, 't_s=100, d*=64'))}"),
    Quote(REPRODUCTION, lambda: f"at t_s 2000, {ratio(line(GRID, 't_s=2000, d*=64'))}"),
    Quote(REPRODUCTION, lambda: f"(p = {p2(line(GRID, 't_s=2000, d*=64')['p'])})"),
    Quote(REPRODUCTION, lambda: f"t_s 2000 against the baseline, "
          f"{ratio(line(SLOW, 'GeomDR=true, t_s=2000'))}, exact p = "
          f"{p2(line(SLOW, 'GeomDR=true, t_s=2000')['p'])}"),
    # Version 3's Grokfast control.
    Quote(REPRODUCTION, _grokfast_arms),
    Quote(REPRODUCTION, _grokfast_mlp_arms),
    Quote(REPRODUCTION, _grokfast_ref_arms),
    Quote(REPRODUCTION, partial(_grokfast_ref_arms, GROKFAST_ADAM, "Reference optimizer",
                                "other sweeps")),
    Quote(REPRODUCTION, _grokfast_sep_cells),
    Quote(REPRODUCTION, _grokfast_l2_arms),
    Quote(REPRODUCTION, _grokfast_twin_l2),
    # Division, subsample, the Transformer.
    Quote(REPRODUCTION, lambda: "KM medians "
          f"{steps(line('repro2_division_cpu', 'GeomDR=false')['km_median'])} without GeomDR and "
          f"{steps(line('repro2_division_cpu', 'GeomDR=true')['km_median'])} with it: "
          f"{ratio(line('repro2_division_cpu', 'GeomDR=true'))}, exact p = "
          f"{p2(line('repro2_division_cpu', 'GeomDR=true')['p'])}"),
    Quote(REPRODUCTION, lambda: "KM medians "
          f"{steps(line(SUB, 'subsample=1')['km_median'])} (all), "
          f"{steps(line(SUB, 'subsample=0.25')['km_median'])} (25%), "
          f"{steps(line(SUB, 'subsample=0.1')['km_median'])} (10%); means "
          f"{steps(line(SUB, 'subsample=1')['grok_mean'])}, "
          f"{steps(line(SUB, 'subsample=0.25')['grok_mean'])}, "
          f"{steps(line(SUB, 'subsample=0.1')['grok_mean'])}. The ratios "
          f"{ratio(line(SUB, 'subsample=0.25'))} and {ratio(line(SUB, 'subsample=0.1'))}"),
    Quote(REPRODUCTION, _subsample_cost),
    Quote(REPRODUCTION, _s5),
    *(Quote(REPRODUCTION, partial(_s5_pilot, sweep)) for sweep in S5_PILOTS),
    Quote(REPRODUCTION, _s5_rise),
    Quote(REPRODUCTION, _s5_repeat),
    Quote(REPRODUCTION, _s5_together),
    Quote(REPRODUCTION, _s5_pairs),
    Quote(REPRODUCTION, _s5_control),
    Quote(REPRODUCTION, _s5_delays),
    Quote(REPRODUCTION, _s5_earliest),
    Quote(REPRODUCTION, lambda: f"fell back from its best by more than {FALLBACK_MIN} in "
          f"{_s5_fallback('sphere')}; LayerNorm's in {_s5_fallback('layernorm')}"),
    Quote(REPRODUCTION, _s5_step_seconds),
    Quote(REPRODUCTION, _subsample_wall),
    # The Optuna search.
    Quote(REPRODUCTION, _optuna),
    Quote(REPRODUCTION, lambda: f"KM medians {steps(_acc('baseline')['km_median'])} (baseline) "
          f"and {steps(_acc('geomdr')['km_median'])} (GeomDR), {ratio(_acc('geomdr'))}, p = "
          f"{p2(_acc('geomdr')['p'])}, {_acc('geomdr')['n_grokked']} of 8 grokked in each arm"),
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
)  # fmt: skip
"""Every quoted run-derived figure, with its source."""


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def stale() -> list[str]:
    """The quotes a document lacks (the text it should hold, per document)."""
    docs: dict[str, str] = {}
    missing = []
    for quote in QUOTES:
        if quote.doc not in docs:
            docs[quote.doc] = _collapsed((ROOT / quote.doc).read_text())
        want = _collapsed(quote.text())
        if want not in docs[quote.doc]:
            missing.append(f"{quote.doc}: {want}")
    return missing


ROW = re.compile(r"^\| .* \| \d+/\d+ \d+% \[\d+%, \d+%\] \|.*\|$")
"""A group row of a `sweepgrok report` table (its 'grokked [95% CI]' cell)."""


def copied_rows(doc: str = REPRODUCTION) -> list[str]:
    """The report-table rows of `doc` that no committed report.md holds (stale copies)."""
    reports = "\n".join(p.read_text() for p in sorted(HERE.glob("**/report.md")))
    known = set(reports.splitlines())
    rows = [r for r in (ROOT / doc).read_text().splitlines() if ROW.match(r)]
    return [r for r in rows if r not in known]


def main() -> int:
    problems = stale() + [f"{REPRODUCTION}: not in any report.md: {r}" for r in copied_rows()]
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
