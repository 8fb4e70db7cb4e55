"""The claims of the reproduction report as data, their comparisons, verdicts and one table.

    python -m analysis.claims [--summaries DIR] [--report FILE]

Each `Claim` names a committed run summary (``analysis/reproduction/<sweep>/runs.csv``, one row
per run), its group and its baseline as key=value pairs (what ``--baseline`` takes; both name
the same keys), the grok threshold and the kind of claim (`analysis.verdicts.KINDS`). The
comparison is sweepgrok's own (``comparisons.analysis_table`` on the runs of the two groups;
a per-run measure through ``verdicts.measure_row``), Holm's adjustment runs over the tested
rows of each family (`FAMILIES`, `Claim.family`) separately, and `analysis.verdicts` gives
each verdict. The table
is written into analysis/REPRODUCTION.md between `BEGIN` and `END` (added after the verdict
rules when absent); running it again rewrites the same text.

Adding or repointing a claim is one entry of `CLAIMS`: a new sweep summary is its ``sweep``.

Columns: the claim, the paper's number, ours (estimate, 95% CI, n per group, p, p Holm), the
size ("paper's factor inside our CI", `verdicts.size`), planned or post hoc (`Claim.planned`),
the verdict. Cells: a speed-up whose baseline median lies beyond its runs (censored) is the
bound "> x" (longest baseline run, i.e. the budget, / group median), never a point estimate;
a group median beyond its runs gives "< x"; a median beyond the runs is "> longest run". A
paper's factor is compared with the CI or the bound in the size column; `verdicts.verdict`
turns a "no" there into "direction reproduced, size not". A ``fourier`` claim reads a runs.csv
column holding each run's concentration above chance at its last evaluation.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import provenance_summaries as provenance
from analysis import restat, verdicts
from analysis.verdicts import Row
from sweepgrok.analysis.comparisons import analysis_table, baseline_mask, parse_baseline
from sweepgrok.analysis.stats import AnalysisError, group_label, times_and_censoring, varying_keys
from sweepgrok.core.errors import USER_ERROR, error_line
from sweepgrok.train.events import tag

HERE = Path(__file__).resolve().parent
BEGIN = "<!-- claims:begin -->"
END = "<!-- claims:end -->"
RULES_HEADING = "## Verdict rules"
GROK_KINDS = ("faster", "slower", "equal", "success", "fails")
"""Kinds compared on the grok step (the others on a runs.csv column, `Claim.measure`)."""
PAPER_CLAIMS = "paper claims"
OUR_CONTROLS = "our controls"
GROKFAST_ROWS = "Grokfast"
FAMILIES = (PAPER_CLAIMS, OUR_CONTROLS, GROKFAST_ROWS)
"""The Holm families of the table (rules v4): the two papers' claims; the project's own
controls (no paper claims them); Grokfast's claims and controls (a third paper, run as a
control of the accelerators). Each is adjusted apart, so a paper claim is never made
untestable by the number of control rows beside it."""


@dataclass(frozen=True)
class Claim:
    """One line of the claims table."""

    text: str
    """The claim, as the report states it."""
    paper: str
    """The paper's number(s), as text (published mean ± std where the paper gives them)."""
    sweep: str
    """The summary folder whose runs.csv holds the runs, relative to analysis/reproduction/
    (``../accelerators`` for the accelerator comparison); the table names its last part."""
    group: str
    """The group's runs: key=value pairs (the keys of `baseline`)."""
    baseline: str = ""
    """The baseline's runs: key=value pairs (unused by ``precedes``)."""
    kind: str = "faster"
    """One of analysis.verdicts.KINDS."""
    threshold: float = 0.95
    """The grok threshold (the rules: 0.95 unless the claim says 0.99)."""
    measure: str = ""
    """``measure``/``fourier``: the runs.csv column; ``precedes``: the gap column (default
    collapse_to_grok_<threshold>: grok step - collapse onset)."""
    expect: str = "smaller"
    """``measure``: the group's measure against the baseline's (verdicts.EXPECTS)."""
    factor: float | None = None
    """The paper's factor on the estimate's scale (baseline / group), compared with our CI or
    bound (`verdicts.size`); outside the CI, a met directional rule reads "direction
    reproduced, size not"."""
    distribution: bool = False
    """Print each group's mean ± std of the grok step (set against a published mean ± std)."""
    delay: bool = False
    """Print the group's median delay (grok - fit step, grokked runs) with its bootstrap CI:
    for a paper that says the delay is gone, which a grok-step ratio alone does not test."""
    planned: bool = False
    """Whether the claim (text, groups, kind, measure) was committed before the summary it reads
    (planned) or not (post hoc, the default: a claim is post hoc unless shown otherwise);
    `when` gives the evidence."""
    when: str = ""
    """The commits that decide `planned`: the claim's and its data's (git log -S on the text)."""
    family: str = PAPER_CLAIMS
    """The Holm family the row is adjusted in (one of FAMILIES)."""


P1 = "repro2_paper1_cpu"
P1_SIZE = "paper1_sphere"
P2 = "repro2_paper2_cpu"
LN = "model.norm=layernorm,model.attention=softmax,optim.weight_decay=1"
SPHERE = "model.norm=sphere,model.attention=softmax,optim.weight_decay="
GEOMDR = "geomdr.enabled=true,geomdr.penalty=tail,train.max_steps=6000"
NO_GEOMDR = "geomdr.enabled=false,geomdr.penalty=tail,train.max_steps=6000"
SUB = "repro2_subsample_cpu"
S5 = "repro_s5_cpu"
SUBSAMPLE_PAPER = "the same speed-up from 5-25% of the data, 2.4-2.7x less runtime"
FOURIER_PAPER = ("the same Fourier features (FFT over the vocabulary); ours measures how "
                 "concentrated, not which frequencies")
CONTROL = "not claimed (our control; the paper has none)"
# The evidence for `planned`: the claim's first commit against its summary's commit. The paper-1
# twin's claims predate its summary, but their groups in it were named after it: post hoc.
P1_WHEN = ("claim 5acea69; its groups in this sweep named in ee6141d, after the summary "
           "f48efc9; rerun 17c74f5")
P2_WHEN = ("claim 5acea69 at 0.95; ee6141d (after the first arms ended) set 0.99, the summary "
           "b6f9281 restored 0.95; rerun b55df6a")
CONTROL_WHEN = ("the arms and their question in the grid 8234daf before its runs; the claim "
                "ee6141d (after the first arms ended), summary b6f9281; rerun b55df6a")
P2_POST_HOC_WHEN = "added 2026-12-04 (rules v3), after the summary b6f9281; rerun b55df6a"
P1_PAIR = "paper1_sphere+paper1_layernorm_h200"
P1_SIZE_PAPER = "LN 54,160 ± 13,490, sphere 2,400 ± 353 (10 each): ~22x"
P1_PAIR_WHEN = ("added 2026-12-07, after both summaries (sphere 6b885d0, rerun 3ddb198; "
                "LayerNorm f003d35); the arms ran on a CPU and an H200 with two codes")
DSTAR = "repro3_dstar_cpu"
DSTAR_WHEN = "claim 225c0da, summary dc82cc6"
GRID = "repro3_grid_cpu"
GRID_WHEN = "claim e54d923, summary 7298fd7"
START = "repro3_start_cpu"
START_WHEN = "claim 693bde3, summary b2a7c35"
LAMBDA = "repro3_lambda_cpu"
LAMBDA_WHEN = "claim and rule 9d4fcb6, the rule as code ea7a7d0, summary 4527322"
GROKFAST = "repro3_grokfast_cpu"
GROKFAST_WHEN = "claim 65faed3, summary adb10f9 (0861d1c ran part of it)"
GROKFAST_MLP = "repro3_grokfast_mlp_cpu"
GROKFAST_MLP_WHEN = "claim 65faed3, grid 5cf1f11, summary 3f7c264"
GROKFAST_REF = "repro3_grokfast_ref_cpu"
GROKFAST_REF_WHEN = "claim and grid 3fdb384, summary dcd3436"
GROKFAST_ADAM = "repro3_grokfast_adam_cpu"
GROKFAST_ADAM_WHEN = "claim and grid 93fb80d, summary 7c2e793"
GROKFAST_L2 = "repro3_grokfast_l2_cpu"
GROKFAST_L2_WHEN = ("claim and grid 77927c4, summary 1104f3f; its filter arm repeats "
                    "repro3_grokfast_adam_cpu's, whose data came before the plan")
GROKFAST_SEP = "repro3_grokfast_sep_cpu"
GROKFAST_TWIN_L2 = "repro3_grokfast_twin_l2_cpu"
GROKFAST_TWIN_L2_WHEN = "claim and grid b6f4579, summary de05711"
SLOW = "repro3_slow_cpu"
SLOW_WHEN = "claim fd645d3, summary adb10f9"
CONFIRM = "repro4_confirm_cpu"
CONFIRM_WHEN = "claim and search file before the search's data (4ee7083 and this commit)"
"""The confirm stage of the repro4_search_cpu search: its top-ranked schedule (arm search_1)
re-run on 8 fresh seeds beside the paper's schedule and the no-GeomDR baseline."""
DOSE = "repro4_dose_cpu"
DOSE_DIV = "repro4_dose_div_cpu"
DOSE_WHEN = "claims and grids before their runs (260d84d and this commit)"
"""The dose-response cells: the slow control's twin at weight decay 1.0, 0.1 and 0.03
(addition) and 0.1 and 0.03 (division), no GeomDR against GeomDR from t_s 2000."""


def dose_claims(sweep: str, task: str, weight_decays: Sequence[float],
                factor: float) -> tuple[Claim, ...]:
    """One cell's planned rows: GeomDR against the baseline in each cell (the paper's factor
    against the slowest), and the success rate in the slowest."""
    def arm(enabled: bool, weight_decay: float) -> str:
        return f"geomdr.enabled={str(enabled).lower()},optim.weight_decay={weight_decay:g}"

    slowest = min(weight_decays)
    faster = tuple(
        Claim(f"GeomDR (t_s = 2000) groks faster than the baseline at weight decay {wd:g} "
              f"({task})", f"{factor:g}x at the paper's baseline" if wd == slowest else
              "not given at this baseline", sweep, arm(True, wd), arm(False, wd),
              factor=factor if wd == slowest else None, planned=True, when=DOSE_WHEN)
        for wd in weight_decays)
    success = Claim(f"GeomDR groks in more runs than the baseline within 60,000 steps at weight "
                    f"decay {slowest:g} ({task})", "100% where the baseline failed", sweep,
                    arm(True, slowest), arm(False, slowest), "success", planned=True,
                    when=DOSE_WHEN)
    return (*faster, success)


BEST = {"tail": 0.1, "trace": 0.01, "tail_fraction": 10.0}
"""Each kind's best weight in repro3_lambda_cpu by analysis.best_weight's planned rule (a test
recomputes it from the committed summary)."""


def best(kind: str) -> str:
    return f"geomdr.penalty={kind},geomdr.lambda_max={BEST[kind]:g}"


def dstar_at(target_dim: int, start_step: int) -> str:
    """A group of the d* x t_s control."""
    return f"geomdr.target_dim={target_dim},geomdr.start_step={start_step}"


def grokfast(arch: str, kind: str, weight_decay: float) -> str:
    """A group of the Grokfast control."""
    return f"model.arch={arch},grokfast.kind={kind},optim.weight_decay={weight_decay:g}"


CLAIMS: tuple[Claim, ...] = (
    Claim("Paper size: sphere wd 0 = wd 1", "2,400 ± 353 (wd 1), 2,480 ± 464 (wd 0); 10 seeds "
          "each (text: ~2,100)", P1_SIZE, "optim.weight_decay=0", "optim.weight_decay=1",
          "equal", distribution=True, planned=True,
          when="claim ee6141d, summary 6b885d0; named in the rules 5113c7c; rerun 3ddb198"),
    Claim("Paper size: the sphere groks faster than LayerNorm (wd 1)", P1_SIZE_PAPER, P1_PAIR,
          "model.norm=sphere,optim.weight_decay=1", "model.norm=layernorm,optim.weight_decay=1",
          factor=22, distribution=True, when=P1_PAIR_WHEN),
    Claim("Sphere (wd 1) groks faster than LayerNorm", "LN 54,160 ± 13,490 vs sphere ~2,400",
          P1, SPHERE + "1", LN, factor=22, when=P1_WHEN),
    Claim("Sphere without weight decay groks faster than LayerNorm",
          "LN 54,160 ± 13,490 vs sphere (wd 0) 2,480 ± 464", P1, SPHERE + "0", LN, factor=22,
          when=P1_WHEN),
    Claim("Sphere: wd 0 = wd 1", "2,400 ± 353 (wd 1), 2,480 ± 464 (wd 0); 10 seeds each", P1,
          "model.norm=sphere,optim.weight_decay=0", "model.norm=sphere,optim.weight_decay=1",
          "equal", distribution=True, when=P1_WHEN),
    Claim("RMSNorm (epsilon 1e-5; the paper's notebook: 1e-8) = LayerNorm",
          "51,240 ± 11,200 vs 54,160 ± 13,490 (10 each)", P1,
          "model.norm=rmsnorm,model.attention=softmax,optim.weight_decay=1", LN, "equal",
          when=P1_WHEN),
    Claim("Uniform attention groks sooner (LayerNorm)", "no delay (removes it)", P1,
          "model.norm=layernorm,model.attention=uniform,optim.weight_decay=1", LN, delay=True,
          when=P1_WHEN + "; its text said 'removes the delay' before 2026-12-07"),
    Claim("Uniform attention groks on every seed (no norm)", "every seed", P1,
          "model.norm=none,model.attention=uniform", "model.norm=none,model.attention=softmax",
          "success", when=P1_WHEN),
    Claim("Accelerated models are as concentrated on Fourier features (sphere vs LayerNorm)",
          FOURIER_PAPER, P1, SPHERE + "1", LN, "fourier",
          measure="fourier_unembed_above_chance_last", planned=False,
          when="claim 5acea69, its measure column chosen in ee6141d after the summary f48efc9; "
               "its text says concentration since 2026-12-06; rerun 17c74f5"),
    Claim("Accelerated models are as concentrated on Fourier features (uniform vs softmax, "
          "LayerNorm)", FOURIER_PAPER, P1,
          "model.norm=layernorm,model.attention=uniform,optim.weight_decay=1", LN, "fourier",
          measure="fourier_unembed_above_chance_last", planned=False,
          when="added in ee6141d, after the summary f48efc9; its text says concentration "
               "since 2026-12-06; rerun 17c74f5"),
    Claim("S5 negative control: the sphere groks slower than LayerNorm", "sphere fails",
          S5, "model.norm=sphere,optim.weight_decay=1",
          "model.norm=layernorm,optim.weight_decay=1", "slower", planned=False,
          when="version-1 runs eaef0c0, claim 5acea69; rerun 7bc2bef"),
    Claim("S5 negative control: the sphere fails to grok where LayerNorm groks (a success "
          "rate; wd 3, d_model 128, 8 seeds)", "sphere fails", "repro3_s5_cpu",
          "model.norm=sphere", "model.norm=layernorm", "fails", planned=False,
          when="planned as 'the sphere groks slower' (grok step) in 80916e9 (seeds packed 2 "
               "per trial in 4b1eaf9), summary 356dc52; judged as the success rate the paper's "
               "'fails' states since rules v4 (2026-12-07), after the summary"),
    Claim("GeomDR accelerates the MLP on addition", "362K -> ~7K steps", P2, GEOMDR, NO_GEOMDR,
          factor=52, planned=True, when=P2_WHEN),
    Claim("Scale alone: the trace penalty (same weight) accelerates the MLP", CONTROL, P2,
          "geomdr.enabled=true,geomdr.penalty=trace,train.max_steps=3000", NO_GEOMDR,
          planned=True, when=CONTROL_WHEN,
          family=OUR_CONTROLS),
    Claim("Dimension alone: the tail-fraction penalty (same weight) accelerates the MLP",
          CONTROL, P2, "geomdr.enabled=true,geomdr.penalty=tail_fraction,train.max_steps=6000",
          NO_GEOMDR, planned=True, when=CONTROL_WHEN,
          family=OUR_CONTROLS),
    Claim("GeomDR accelerates the MLP on division", "39x", "repro2_division_cpu",
          "geomdr.enabled=true", "geomdr.enabled=false", factor=39,
          planned=True, when="claim 5acea69, summary 9f041da, rerun e9c7ae2"),
    Claim("100% success with GeomDR (addition)", "100% where the baseline failed", P2, GEOMDR,
          NO_GEOMDR, "success", planned=True, when=P2_WHEN),
    Claim("GeomDR collapses earlier (addition)", "earlier collapse onset", P2, GEOMDR,
          NO_GEOMDR, "measure", measure="collapse_step", planned=True, when=P2_WHEN),
    Claim("Collapse precedes grokking (addition, GeomDR)", "yes", P2, GEOMDR, kind="precedes",
          planned=True, when=P2_WHEN),
    Claim("Collapse precedes grokking (addition, baseline without GeomDR)",
          "yes (the paper's claim is about models without the penalty)", P2, NO_GEOMDR,
          kind="precedes", when=P2_POST_HOC_WHEN),
    Claim("GeomDR narrows the collapse-to-grok gap (addition)", "a shorter gap with GeomDR", P2,
          GEOMDR, NO_GEOMDR, "measure", measure="collapse_to_grok_95",
          when=P2_POST_HOC_WHEN),
    Claim("d* = 2 groks slower than d* = 16", "d* <= 8 slows or destabilizes", DSTAR,
          "geomdr.target_dim=2", "geomdr.target_dim=16", "slower", planned=True, when=DSTAR_WHEN),
    Claim("d* = 64 groks as fast as d* = 16", "moderate d* (16..64) works best", DSTAR,
          "geomdr.target_dim=64", "geomdr.target_dim=16", "equal", planned=True,
          when=DSTAR_WHEN),
    *(
        Claim(f"d* = 2 groks slower than d* = 16 (t_s = {ts})", "d* <= 8 slows or destabilizes",
              GRID, dstar_at(2, ts), dstar_at(16, ts), "slower", planned=True, when=GRID_WHEN)
        for ts in (100, 2000)
    ),
    *(
        Claim(f"d* = 64 groks as fast as d* = 16 (t_s = {ts})", "moderate d* (16..64) works best",
              GRID, dstar_at(64, ts), dstar_at(16, ts), "equal", planned=True, when=GRID_WHEN)
        for ts in (100, 2000)
    ),
    Claim("Too early a start helps less: t_s = 100 groks slower than t_s = 500",
          "a critical window for t_s", START, "geomdr.start_step=100", "geomdr.start_step=500",
          "slower", planned=True, when=START_WHEN),
    Claim("t_s = 2000 is best for MLPs: it groks faster than t_s = 500", "t_s = 2000 best (MLP)",
          START, "geomdr.start_step=2000", "geomdr.start_step=500", planned=True,
          when=START_WHEN),
    Claim("Dimension, not scale: the tail penalty at its best weight groks faster than the "
          "trace penalty at its best weight", CONTROL, LAMBDA, best("tail"), best("trace"),
          planned=True, when=LAMBDA_WHEN,
          family=OUR_CONTROLS),
    Claim("The tail fraction (dimension without scale) at its best weight groks as fast as "
          "the tail at its best weight", CONTROL, LAMBDA, best("tail_fraction"), best("tail"),
          "equal", planned=True, when=LAMBDA_WHEN,
          family=OUR_CONTROLS),
    Claim("Subsampling the covariance to 25% keeps the grok step", SUBSAMPLE_PAPER, SUB,
          "geomdr.subsample=0.25", "geomdr.subsample=1", "equal", planned=False,
          when="claim and summary in 83ced63, rerun 6095a0c"),
    Claim("Subsampling the covariance to 10% keeps the grok step", SUBSAMPLE_PAPER, SUB,
          "geomdr.subsample=0.1", "geomdr.subsample=1", "equal", planned=False,
          when="claim and summary in 83ced63, rerun 6095a0c"),
    Claim("GeomDR groks faster than the baseline (slow regime)", "362K -> ~7K steps", SLOW,
          "geomdr.enabled=true,geomdr.start_step=500",
          "geomdr.enabled=false,geomdr.start_step=500", factor=52, planned=True,
          when=SLOW_WHEN),
    Claim("t_s = 2000 groks faster than t_s = 500 (slow regime)", "t_s = 2000 best (MLP)", SLOW,
          "geomdr.enabled=true,geomdr.start_step=2000",
          "geomdr.enabled=true,geomdr.start_step=500", planned=True, when=SLOW_WHEN),
    Claim("Grokfast groks faster than its paper's baseline (Transformer)",
          "39,890 -> 910 steps (43.84x)", GROKFAST, grokfast("transformer", "ema", 0.005),
          grokfast("transformer", "none", 0), factor=43.84, planned=True, when=GROKFAST_WHEN,
          family=GROKFAST_ROWS),
    Claim("Grokfast's filter alone speeds grokking at weight decay 0.005 (Transformer)",
          "not claimed alone (its baseline also drops the weight decay)", GROKFAST,
          grokfast("transformer", "ema", 0.005), grokfast("transformer", "none", 0.005),
          planned=True, when=GROKFAST_WHEN,
          family=GROKFAST_ROWS),
    Claim("Grokfast groks faster than its paper's baseline (MLP)",
          "not given for the MLP (43.84x is the Transformer's)", GROKFAST_MLP,
          grokfast("mlp", "ema", 0.005), grokfast("mlp", "none", 0), planned=True,
          when=GROKFAST_MLP_WHEN,
          family=GROKFAST_ROWS),
    Claim("Grokfast's filter alone speeds grokking at weight decay 0.005 (MLP)",
          "not claimed alone (its baseline also drops the weight decay)", GROKFAST_MLP,
          grokfast("mlp", "ema", 0.005), grokfast("mlp", "none", 0.005), planned=True,
          when=GROKFAST_MLP_WHEN,
          family=GROKFAST_ROWS),
    Claim("Grokfast groks faster than its paper's baseline (reference task)",
          "39,890 -> 910 steps (43.84x)", GROKFAST_REF,
          "grokfast.kind=ema,optim.weight_decay=0.005", "grokfast.kind=none,optim.weight_decay=0",
          factor=43.84, planned=True,
          when=GROKFAST_REF_WHEN,
          family=GROKFAST_ROWS),
    Claim("Grokfast's filter alone speeds grokking at weight decay 0.005 (reference task)",
          "not claimed alone (its baseline also drops the weight decay)", GROKFAST_REF,
          "grokfast.kind=ema,optim.weight_decay=0.005",
          "grokfast.kind=none,optim.weight_decay=0.005", planned=True, when=GROKFAST_REF_WHEN,
          family=GROKFAST_ROWS),
    Claim("Grokfast groks faster than its paper's baseline (reference optimizer)",
          "39,890 -> 910 steps (43.84x)", GROKFAST_ADAM,
          "grokfast.kind=ema,optim.weight_decay=0.005", "grokfast.kind=none,optim.weight_decay=0",
          factor=43.84, planned=True, when=GROKFAST_ADAM_WHEN,
          family=GROKFAST_ROWS),
    Claim("Grokfast's filter alone speeds grokking at L2 0.005 (reference optimizer)",
          "not claimed alone (its baseline also drops the L2 term)", GROKFAST_L2,
          "grokfast.kind=ema", "grokfast.kind=none", planned=True, when=GROKFAST_L2_WHEN,
          family=GROKFAST_ROWS),
    *(Claim(f"Grokfast's filter alone speeds grokking at L2 0.005 ({name} twin, reference "
            "optimizer)", "not claimed alone (its baseline also drops the L2 term)",
            GROKFAST_TWIN_L2, f"model.arch={arch},grokfast.kind=ema",
            f"model.arch={arch},grokfast.kind=none", planned=True, when=GROKFAST_TWIN_L2_WHEN,
          family=GROKFAST_ROWS)
      for arch, name in (("transformer", "Transformer"), ("mlp", "MLP"))),
    Claim("The searched schedule groks sooner than the paper's hand-tuned schedule (d* 32, "
          "t_s = 2000; slow regime)", CONTROL, CONFIRM, "arm=search_1", "arm=paper",
          planned=True, when=CONFIRM_WHEN, family=OUR_CONTROLS),
    Claim("The searched schedule groks faster than the baseline (slow regime)",
          "362K -> ~7K steps", CONFIRM, "arm=search_1", "arm=baseline", factor=52,
          planned=True, when=CONFIRM_WHEN),
    *dose_claims(DOSE, "addition", (1.0, 0.1, 0.03), 52),
    *dose_claims(DOSE_DIV, "division", (0.1, 0.03), 39),
    Claim("GeomDR accelerates the Transformer", "~2x", "../accelerators",
          "model.arch=transformer,accelerator.arm=geomdr",
          "model.arch=transformer,accelerator.arm=baseline", factor=2,
          planned=True, when="claim 5acea69, summary 805613a; rerun b3fc227"),
)  # fmt: skip
"""The claims of analysis/REPRODUCTION.md, in the table's order."""


class ClaimError(ValueError):
    """A claim its runs.csv cannot answer (a spec matching no run, two specs that overlap)."""


# ---------------------------------------------------------------- reading the runs


TRAIN_SUMMARIES = {"paper1_layernorm_h200": 0.95}
"""Summaries of a `sweepgrok train` folder, with the grok threshold of its trial file: their
grok_step and censored columns are grok_step_<t> and censored_<t> of a report's runs.csv."""


def load_summary(sweep: str, summaries: Path) -> pd.DataFrame:
    """A committed runs.csv as a run summary; the version-1 summaries (restat.ARGS) with their
    collapse columns blanked (their onset predates today's definition, see analysis.restat).
    'a+b' joins the runs of two summaries (arms run on two machines or by two versions)."""
    if "+" in sweep:
        parts = [load_summary(part, summaries) for part in sweep.split("+")]
        return pd.concat(parts, ignore_index=True)
    path = summaries / sweep / "runs.csv"
    if sweep in restat.ARGS:
        return restat.read_summary(path)
    runs = pd.read_csv(path)
    if sweep in TRAIN_SUMMARIES:
        t = tag(TRAIN_SUMMARIES[sweep])
        runs = runs.rename(columns={"grok_step": f"grok_step_{t}", "censored": f"censored_{t}"})
        runs[f"delay_{t}"] = runs[f"grok_step_{t}"] - runs["fit_step"]
    return runs


def _specs(claim: Claim) -> tuple[dict[str, str], dict[str, str]]:
    group = parse_baseline(claim.group)
    base = parse_baseline(claim.baseline) if claim.baseline else {}
    if base and list(group) != list(base):
        raise ClaimError(f"the group ({claim.group}) and baseline ({claim.baseline}) must name "
                         "the same keys in the same order")  # fmt: skip
    return group, base


def _runs(summary: pd.DataFrame, claim: Claim) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(group runs, baseline runs); ClaimError when they overlap or differ in other keys."""
    group_spec, base_spec = _specs(claim)
    in_group = baseline_mask(summary, group_spec)
    in_base = baseline_mask(summary, base_spec) if base_spec else in_group & False
    if (in_group & in_base).any():
        raise ClaimError(f"{claim.group} and {claim.baseline} select the same runs")
    for rows in (summary[in_group], summary[in_base]):
        extra = [k for k in varying_keys(rows) if k not in group_spec]
        if extra:
            raise ClaimError(f"the runs of {claim.group} or {claim.baseline} also differ in "
                             f"{', '.join(extra)}: name it in both")  # fmt: skip
    return summary[in_group], summary[in_base]


# ---------------------------------------------------------------- one comparison


@dataclass(frozen=True)
class Compared:
    """A claim, its Row, and the text of the table's 'ours' cell (without p Holm)."""

    claim: Claim
    row: Row
    ours: str
    code: str = ""
    """The code commits of the claim's runs (`provenance.code_versions`)."""


def compare_claim(claim: Claim, summary: pd.DataFrame) -> Compared:
    """The claim's Row and 'ours' cell from its run summary."""
    if claim.kind not in verdicts.KINDS:
        raise ClaimError(f"kind {claim.kind!r}; allowed: {', '.join(verdicts.KINDS)}")
    if not claim.baseline and claim.kind != "precedes":
        raise ClaimError(f"a {claim.kind} claim needs a baseline")
    group, base = _runs(summary, claim)
    if claim.kind in GROK_KINDS:
        compared = _grok_comparison(claim, summary, group, base)
    elif claim.kind == "precedes":
        compared = _precedes(claim, group)
    else:
        compared = _measure(claim, group, base)
    code = provenance.code_versions(pd.concat([group, base]))
    return replace(compared, row=replace(compared.row, family=claim.family), code=code)


def _short_labels(claim: Claim) -> tuple[str, str]:
    """The group's and the baseline's labels over the keys where they differ."""
    group, base = _specs(claim)
    keys = [k for k in group if group[k] != base.get(k)]
    return group_label(keys, [group[k] for k in keys]), group_label(keys, [base[k] for k in keys])


def _grok_comparison(
    claim: Claim, summary: pd.DataFrame, group: pd.DataFrame, base: pd.DataFrame
) -> Compared:
    keys = list(parse_baseline(claim.group))
    both = summary.loc[group.index.union(base.index)]
    table = analysis_table(both, keys, claim.baseline, threshold=claim.threshold)
    g, b = table[~table["is_baseline"]].iloc[0], table[table["is_baseline"]].iloc[0]
    row = verdicts.from_table(g.to_dict(), b.to_dict(), claim.kind)
    row = replace(row, factor=math.nan if claim.factor is None else claim.factor)
    g_label, b_label = _short_labels(claim)
    arms = (
        f"{b_label} {_median(b)} (n = {row.n_baseline}) vs {g_label} {_median(g)} "
        f"(n = {row.n_group})"
    )
    if claim.kind in verdicts.RATE_KINDS:
        ours = (f"grokked at {claim.threshold:g}: {row.k_baseline}/{row.n_baseline} ({b_label}) "
                f"vs {row.k_group}/{row.n_group} ({g_label}); Fisher p = {_p(row.p)}")  # fmt: skip
        if claim.kind == "fails":
            ours += (f"; grok steps {g_label}: {_steps(group, claim)}; "
                     f"{b_label}: {_steps(base, claim)}")  # fmt: skip
        return Compared(claim, row, ours)
    ours = (f"grok at {claim.threshold:g}: {_ratio(row)}; KM medians {arms}; "
            f"log-rank p = {_p(row.p)}")  # fmt: skip
    if claim.distribution:
        ours += f"; mean ± std {b_label} {_spread(base, claim)}, {g_label} {_spread(group, claim)}"
    if claim.delay:
        ours += (f"; median delay {g_label} {_num(g['delay_median'])} "
                 f"[{_num(g['delay_median_lo'])}, {_num(g['delay_median_hi'])}] steps")
    return Compared(claim, row, ours)


def _measure(claim: Claim, group: pd.DataFrame, base: pd.DataFrame) -> Compared:
    column = claim.measure
    missing = _missing(column, group, base)
    if missing:
        return Compared(claim, Row(claim.kind, len(group), len(base), untestable=missing), "-")
    both = pd.concat([group[column], base[column]]).to_numpy(float)
    lowest = float(np.nanmin(both)) if np.isfinite(both).any() else math.nan
    row = verdicts.measure_row(base[column].to_numpy(float), group[column].to_numpy(float),
                               claim.kind, expect=claim.expect, lowest=lowest)  # fmt: skip
    row = replace(row, factor=math.nan if claim.factor is None else claim.factor)
    g_label, b_label = _short_labels(claim)
    ours = (
        f"{column}: ratio of medians {_ratio(row)}; medians {b_label} "
        f"{_num(base[column].median())} (n = {row.n_baseline}) vs {g_label} "
        f"{_num(group[column].median())} (n = {row.n_group}); Mann-Whitney p = {_p(row.p)}"
    )
    if claim.kind == "fourier":
        ours += f"; lowest run {lowest:.2f}"
    return Compared(claim, row, ours)


def _missing(column: str, *groups: pd.DataFrame) -> str:
    """Why `column` cannot be compared ('' when it can): absent, or empty in a group."""
    if not column or column not in groups[0]:
        return f"no {column or 'measure'} column in runs.csv"
    if any(rows[column].isna().all() for rows in groups):
        return f"{column} not recorded in one of the groups"
    return ""


def _precedes(claim: Claim, group: pd.DataFrame) -> Compared:
    column = claim.measure or f"collapse_to_grok_{tag(claim.threshold)}"
    missing = _missing(column, group)
    if missing:
        return Compared(claim, Row("precedes", len(group), untestable=missing), "-")
    row = verdicts.precedes_row(group[column].to_numpy(float))
    ours = (f"{row.k_group} of {row.n_group} runs with {column} > 0 (median "
            f"{_num(row.estimate)}); sign test p = {_p(row.p)}")  # fmt: skip
    return Compared(claim, row, ours)


# ---------------------------------------------------------------- cells


def _num(x: float) -> str:
    """A step count (integer, thousands separated); a fraction below 10 keeps two decimals."""
    if pd.isna(x):
        return "-"
    return f"{x:.2f}" if abs(x) < 10 and x != round(x) else f"{x:,.0f}"


def _p(p: float) -> str:
    return "-" if math.isnan(p) else f"{p:.2g}"


def _median(line: pd.Series) -> str:
    """A group's KM median, or '> longest run' when it lies beyond the runs (censored)."""
    if pd.isna(line["km_median"]):
        return f"> {_num(line['steps_run_max'])}"
    return _num(line["km_median"])


def _spread(rows: pd.DataFrame, claim: Claim) -> str:
    times, censored = times_and_censoring(rows, claim.threshold)
    grokked = times[~censored]
    if grokked.size < 2:
        return f"- ({grokked.size}/{len(rows)} grokked)"
    mean, std = grokked.mean(), grokked.std(ddof=1)
    return f"{_num(mean)} ± {_num(std)} ({grokked.size}/{len(rows)} grokked)"


def _steps(rows: pd.DataFrame, claim: Claim) -> str:
    """The grok steps of the runs that grokked, sorted ('none' when none did): for a claim
    that a group fails, the runs that did not."""
    times, censored = times_and_censoring(rows, claim.threshold)
    grokked = sorted(times[~censored])
    return ", ".join(_num(t) for t in grokked) if grokked else "none"


def _ratio(row: Row) -> str:
    """The estimate with its CI; a bound ('> x', '< x') where a median is censored."""
    if row.baseline_censored != row.group_censored:
        sign = ">" if row.baseline_censored else "<"
        return f"{sign} {row.bound:.2f}x (a bound)"
    if math.isnan(row.estimate):
        return "none (both medians beyond the runs)"
    return f"{row.estimate:.2f}x [{row.lo:.2f}, {row.hi:.2f}]"


DIRECTION_SHOWN = (verdicts.REPRODUCED, verdicts.DIRECTION_REPRODUCED, verdicts.SIZE_NOT)
"""Verdicts of a met directional rule: only then does the size column judge the size."""


def size_cell(row: Row, verdict: str) -> str:
    """The size column: `verdicts.size` and what it compared; where the direction is not
    shown (`verdict`), the CI still says whether the paper's factor is inside it, but neither
    a "yes" nor a "no" there judges the size, and the cell says so."""
    fits = verdicts.size(row)
    if fits == verdicts.SIZE_NONE:
        return "- (no factor in the paper)"
    factor = f"the paper's {row.factor:g}x"
    if row.baseline_censored != row.group_censored:
        sign = ">" if row.baseline_censored else "<"
        cell = f"{fits} ({factor}; ours a bound, {sign} {row.bound:.2f}x)"
    elif row.untestable:
        cell = f"{fits} ({factor}; no estimate: {row.untestable})"
    elif math.isnan(row.lo) or math.isnan(row.hi):
        cell = f"{fits} ({factor}; no estimate: both medians beyond the runs)"
    else:
        cell = f"{fits} ({factor}; CI [{row.lo:.2f}, {row.hi:.2f}])"
    # A "yes" or a "no" beside a direction not shown is no verdict on the size either way.
    if fits in (verdicts.SIZE_YES, verdicts.SIZE_NO) and verdict not in DIRECTION_SHOWN:
        cell += ", but the direction is not shown: the size is not judged"
    return cell


def planned_cell(claim: Claim) -> str:
    """The planned / post hoc column."""
    word = "planned" if claim.planned else "post hoc"
    return f"{word} ({claim.when})" if claim.when else word


# ---------------------------------------------------------------- the table


AWAITING = "planned before its runs, which are not in yet"
"""The reason of a planned claim whose summary is not committed yet: not tested."""


def awaits_runs(claim: Claim, summaries: Path) -> bool:
    """A planned claim whose runs.csv does not exist yet (committed before its data, as the
    rules ask); a post-hoc claim always has its runs, and a missing runs.csv stays an error."""
    return claim.planned and "+" not in claim.sweep and not (
        summaries / claim.sweep / "runs.csv"
    ).exists()


def compare_claims(claims: Sequence[Claim], summaries: Path) -> list[Compared]:
    """Each claim compared on the runs.csv under `summaries` (a planned claim whose runs are
    not in yet: not tested, `AWAITING`); p Holm not set. ClaimError names the file and claim."""
    cache: dict[str, pd.DataFrame] = {}
    compared = []
    for claim in claims:
        if awaits_runs(claim, summaries):
            factor = math.nan if claim.factor is None else claim.factor
            row = Row(claim.kind, 0, 0, untestable=AWAITING, factor=factor, family=claim.family)
            compared.append(Compared(claim, row, "-"))
            continue
        if claim.sweep not in cache:
            cache[claim.sweep] = load_summary(claim.sweep, summaries)
        try:
            compared.append(compare_claim(claim, cache[claim.sweep]))
        except (AnalysisError, ClaimError) as err:
            raise ClaimError(f"{claim.sweep}/runs.csv: claim {claim.text!r}: {err}") from err
    return compared


def claims_table(claims: Sequence[Claim], summaries: Path) -> str:
    """The claims table (Markdown) of `claims`, computed from the runs.csv under `summaries`."""
    compared = compare_claims(claims, summaries)
    rows = verdicts.adjust([c.row for c in compared])
    sizes = verdicts.family_sizes(rows)
    lines = [
        "| claim (summary) | paper | ours (95% CI; n per group) | paper's factor inside our CI "
        "| planned / post hoc | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for c, row in zip(compared, rows, strict=True):
        v = verdicts.verdict(row)
        ours = c.ours
        if verdicts.is_tested(row):
            ours += f"; p Holm = {_p(row.p_holm)} ({_family(row.family, sizes)})"
        ours += f"; code {c.code}" if c.code else ""
        name = f"{c.claim.text} (`{Path(c.claim.sweep).name}`)"
        verdict = f"**{v.verdict}** ({v.reason})"
        cells = (name, c.claim.paper, ours, size_cell(row, v.verdict), planned_cell(c.claim),
                 verdict)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _family(family: str, sizes: dict[str, int]) -> str:
    """'family our controls, m = 4': the row's Holm family and how many tested rows share it."""
    return f"family {family}, m = {sizes[family]}"


def with_table(text: str, table: str) -> str:
    """`text` with the table between BEGIN and END; the markers go right after the verdict
    rules section when absent."""
    note = (
        "Generated by `python -m analysis.claims` from the runs.csv each claim names;\n"
        "p Holm is adjusted within each Holm family (rules v4): "
        + ", ".join(f'"{f}"' for f in FAMILIES)
        + "; each row names its family and the family's m (its tested rows).\n\n"
    )
    block = f"{BEGIN}\n{note}{table}{END}"
    if BEGIN in text and END in text:
        pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
        return pattern.sub(lambda _m: block, text, count=1)
    start = text.find(RULES_HEADING)
    if start < 0:
        raise ClaimError(f"no {RULES_HEADING!r} section to put the claims table after")
    end = text.find("\n## ", start + len(RULES_HEADING))
    end = len(text) if end < 0 else end + 1
    return text[:end] + block + "\n\n" + text[end:]


def write_claims(claims: Sequence[Claim], summaries: Path, report: Path) -> bool:
    """Write the table into `report`; True when its text changed."""
    old = report.read_text()
    new = with_table(old, claims_table(claims, summaries))
    if new != old:
        report.write_text(new)
    return new != old


def main(argv: Sequence[str] | None = None, claims: Sequence[Claim] = CLAIMS) -> int:
    """`python -m analysis.claims`: rewrite the claims table of REPRODUCTION.md (exit 2 with
    one error line when a runs.csv is missing or cannot answer a claim)."""
    ap = argparse.ArgumentParser(prog="python -m analysis.claims", description=__doc__)
    ap.add_argument("--summaries", type=Path, default=HERE / "reproduction")
    ap.add_argument("--report", type=Path, default=HERE / "REPRODUCTION.md")
    args = ap.parse_args(argv)
    try:
        changed = write_claims(claims, args.summaries, args.report)
    except ClaimError as err:
        print(error_line(str(err)), file=sys.stderr)
        return USER_ERROR
    except FileNotFoundError as err:
        print(error_line(f"{err.filename}: no such file"), file=sys.stderr)
        return USER_ERROR
    print(f"{'wrote' if changed else 'unchanged'}: {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
