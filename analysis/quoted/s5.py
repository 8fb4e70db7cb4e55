"""Quoted figures of the S5 (Transformer) twin, its version-3 pilots and its control.
"""

from __future__ import annotations

from functools import partial

import pandas as pd

from analysis.claims import S5
from analysis.last_values import last_values
from analysis.quoted.common import (
    REPRODUCTION,
    SUMMARIES,
    Quote,
    km95,
    packed_step_seconds,
    share,
    span,
    steps,
    value_range,
)


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


QUOTES: tuple[Quote, ...] = (
    # The S5 twin, its pilots and its control.
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
)  # fmt: skip
"""The S5 studies' quoted figures."""
