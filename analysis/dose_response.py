"""Version 4's dose-response claims, judged from the committed runs (REPRODUCTION.md, "GeomDR's
speed-up against the baseline's delay", planned before its data):

    python -m analysis.dose_response [--summaries DIR] [--out DIR]

Reads ``repro4_dose_cpu/runs.csv`` (addition at weight decay 1.0, 0.1, 0.03), the reused 0.3
cell of ``repro3_slow_cpu/runs.csv`` (its runs without GeomDR and its GeomDR runs from t_s 2000
only) and ``repro4_dose_div_cpu/runs.csv`` (division at 0.1, 0.03). Writes into --out (default
the addition summary's folder) ``dose_response.md`` (the claims and what they rest on),
``dose_response_cells.csv`` (one row per cell) and ``figures/dose_response.png``. While a
runs.csv is missing (the sweeps have not run) it names them and writes nothing (exit 0).

Claims (rules fixed before the data; grok at 0.95, the project's censoring,
``stats.times_and_censoring``):

- 3, trend (addition, four cells): log T = a(cell) + b GeomDR + c GeomDR log10(1 / weight decay)
  + s e, a log-normal AFT fitted by maximum likelihood with censoring (`analysis.aft`). Held
  ("reproduced") when c < 0 with the one-sided Wald p below 0.05 after Holm in the "our
  controls" family of the claims table; contradicted when c > 0 with the one-sided p for c > 0
  below 0.05 after the same Holm (each p enters Holm with the family's tested rows). Shown,
  not judged: exp(-c) with its 95% Wald CI, and Spearman's rank correlation between each
  cell's baseline KM median and its speed-up with its exact one-sided permutation p.
- 4, fixed time (addition): GeomDR's KM median at the slowest cell (weight decay 0.03) over
  that at the fastest (1.0), with sweepgrok's bootstrap CI (``stats.speedup``). Held when the
  CI lies inside (0.5, 2) (open), contradicted when it lies wholly outside (strictly), else
  not shown; "reproduced"/"contradicted" need n >= 8 per arm, as every rule does.

The verdict words are the claims table's (`analysis.verdicts.VERDICTS`): held is "reproduced".
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter
from matplotlib.transforms import offset_copy
from scipy import stats as sps

from analysis import claims, verdicts
from analysis.aft import AftFit, fit_lognormal_aft
from analysis.verdicts import Values, Verdict
from sweepgrok.analysis.comparisons import baseline_mask, parse_baseline
from sweepgrok.analysis.stats import AnalysisError, speedup, speedup_bound, times_and_censoring
from sweepgrok.analysis.survival import holm, km_median
from sweepgrok.config.thresholds import tag
from sweepgrok.core.errors import USER_ERROR, error_line

SUMMARIES = claims.HERE / "reproduction"
THRESHOLD = 0.95
"""The grok threshold the claims are judged at."""
ADDITION, DIVISION = "addition", "division"
ENABLED, WD = "geomdr.enabled", "optim.weight_decay"
PAPER_FACTOR = {ADDITION: 52.0, DIVISION: 39.0}
"""Paper 2's speed-ups, marked on the figure."""
FIXED_TIME_MARGIN = (0.5, 2.0)
"""Claim 4: GeomDR's KM median within a factor of 2 across the cells (open interval)."""
ALPHA = verdicts.ALPHA
OUT_MD, OUT_CSV = "dose_response.md", "dose_response_cells.csv"
OUT_FIGURE = "figures/dose_response.png"


@dataclass(frozen=True)
class Source:
    """A committed runs.csv and the runs of it the dose-response reads."""

    sweep: str
    task: str
    arms: tuple[str, ...] = ()
    """key=value specs of the runs kept (any one matches); empty: every run."""


REUSED_ARMS = ("geomdr.enabled=false", "geomdr.enabled=true,geomdr.start_step=2000")
"""repro3_slow_cpu's runs that form the addition cell at weight decay 0.3 (its t_s 500 arm is
another schedule)."""
SOURCES = (
    Source(claims.DOSE, ADDITION),
    Source(claims.SLOW, ADDITION, REUSED_ARMS),
    Source(claims.DOSE_DIV, DIVISION),
)


class DoseError(ValueError):
    """A runs.csv the dose-response cannot read (a column missing, a value not understood)."""


# ---------------------------------------------------------------- the runs


def missing_sources(summaries: Path) -> list[Path]:
    """The runs.csv files of SOURCES not present under `summaries`."""
    paths = [summaries / s.sweep / "runs.csv" for s in SOURCES]
    return [p for p in paths if not p.is_file()]


def _as_bool(value: Any) -> bool:
    word = str(value).strip().lower()
    if word not in ("true", "false", "1", "0", "1.0", "0.0"):
        raise DoseError(f"{ENABLED} {value!r}; allowed: true, false")
    return word in ("true", "1", "1.0")


def select(runs: pd.DataFrame, source: Source) -> pd.DataFrame:
    """The runs of `source` the dose-response reads, with its task and a boolean GeomDR arm."""
    missing = [c for c in (ENABLED, WD, "steps_run", f"grok_step_{tag(THRESHOLD)}")
               if c not in runs]  # fmt: skip
    if missing:
        raise DoseError(f"no column {', '.join(missing)}")
    keep = pd.Series(not source.arms, index=runs.index)
    for spec in source.arms:
        try:
            keep |= baseline_mask(runs, parse_baseline(spec))
        except AnalysisError as err:
            raise DoseError(str(err)) from err
    out = runs[keep].copy()
    out[ENABLED] = out[ENABLED].map(_as_bool)
    out.insert(0, "task", source.task)
    out.insert(1, "source", source.sweep)
    return out


def load_runs(summaries: Path) -> pd.DataFrame:
    """Every run of SOURCES (DoseError naming the file that cannot be read)."""
    parts = []
    for source in SOURCES:
        try:
            parts.append(select(claims.load_summary(source.sweep, summaries), source))
        except DoseError as err:
            raise DoseError(f"{summaries / source.sweep / 'runs.csv'}: {err}") from err
    return pd.concat(parts, ignore_index=True)


def log_inverse(weight_decay: float) -> float:
    """x = log10(1 / weight decay): one unit per tenfold lower weight decay."""
    return math.log10(1.0 / weight_decay)


# ---------------------------------------------------------------- cells


def _arm_stats(rows: pd.DataFrame, prefix: str) -> dict[str, Any]:
    times, censored = times_and_censoring(rows, THRESHOLD)
    median = km_median(times, censored)
    finite = times[np.isfinite(times)]
    return {
        f"n_{prefix}": len(rows),
        f"grokked_{prefix}": int((~censored).sum()),
        f"{prefix}_median": median,
        f"{prefix}_censored": len(rows) > 0 and math.isnan(median),
        f"{prefix}_longest": float(finite.max()) if finite.size else math.nan,
    }


def cell_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, weight decay), fastest cell (largest weight decay) first: each arm's
    n, runs grokked, KM median (NaN: beyond its runs, ``*_censored``) and longest run, and the
    speed-up (baseline / GeomDR KM median) with its bootstrap CI and its bound, as sweepgrok's
    comparisons compute them."""
    rows = []
    for (task, wd), cell in runs.groupby(["task", WD], sort=False):
        base, geo = cell[~cell[ENABLED]], cell[cell[ENABLED]]
        bt, bc = times_and_censoring(base, THRESHOLD)
        gt, gc = times_and_censoring(geo, THRESHOLD)
        ratio, lo, hi = speedup(bt, bc, gt, gc)
        bound = speedup_bound(bt, bc, gt, gc)
        wd = float(cast(float, wd))
        rows.append({"task": task, "weight_decay": wd, "x": log_inverse(wd),
                     **_arm_stats(base, "baseline"), **_arm_stats(geo, "geomdr"),
                     "speedup": ratio, "speedup_lo": lo, "speedup_hi": hi,
                     "speedup_bound": bound})  # fmt: skip
    table = pd.DataFrame(rows)
    order = [ADDITION, DIVISION]
    table["_task"] = table["task"].map(order.index)
    return table.sort_values(["_task", "weight_decay"], ascending=[True, False]).drop(
        columns="_task").reset_index(drop=True)  # fmt: skip


# ---------------------------------------------------------------- claim 3: the trend


def aft_design(runs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """(X, times, censored, names) of the trend model: one intercept per weight decay
    (largest first), GeomDR, GeomDR x log10(1 / weight decay)."""
    cells = sorted(runs[WD].astype(float).unique(), reverse=True)
    wd = runs[WD].to_numpy(float)
    geo = runs[ENABLED].to_numpy(bool).astype(float)
    x = np.log10(1.0 / wd)
    columns = [(wd == w).astype(float) for w in cells] + [geo, geo * x]
    names = (*(f"a(wd={w:g})" for w in cells), "b", "c")
    times, censored = times_and_censoring(runs, THRESHOLD)
    return np.column_stack(columns), times, censored, names


def fit_trend(runs: pd.DataFrame) -> AftFit:
    """The trend model fitted to `runs` (one task's)."""
    return fit_lognormal_aft(*aft_design(runs))


@dataclass(frozen=True)
class Trend:
    """c with its Wald test and the speed-up's growth exp(-c) per tenfold lower weight decay."""

    c: float
    se: float
    p_less: float
    """One-sided Wald p for c < 0 (the claim's side): Phi(c / se)."""
    p_greater: float
    """One-sided Wald p for c > 0 (the contradiction's side): 1 - Phi(c / se)."""
    growth: float
    growth_lo: float
    growth_hi: float


def trend(fit: AftFit, confidence: float = 0.95) -> Trend:
    """The Wald test of c and exp(-c) with its CI from `fit` (NaN where the fit has no SE)."""
    i = fit.index("c")
    c, se = float(fit.coef[i]), float(fit.se[i])
    z = c / se if se > 0 else math.nan
    q = float(sps.norm.ppf(0.5 + confidence / 2))
    return Trend(c, se, float(sps.norm.cdf(z)), float(sps.norm.sf(z)), math.exp(-c),
                 math.exp(-c - q * se), math.exp(-c + q * se))  # fmt: skip


def holm_pair(t: Trend, family: Sequence[float]) -> tuple[float, float]:
    """(p Holm of p_less, p Holm of p_greater), each adjusted with the family's tested p's."""
    return (float(holm([t.p_less, *family])[0]), float(holm([t.p_greater, *family])[0]))


def smallest_arm(runs: pd.DataFrame) -> int:
    """The fewest runs in any (cell, arm) of `runs`: the n the rules' n >= 8 binds."""
    counts = runs.groupby([WD, ENABLED]).size()
    return int(counts.min()) if len(counts) else 0


def trend_verdict(fit: AftFit | None, t: Trend | None, p_holm: tuple[float, float], n: int
                  ) -> Verdict:
    """Claim 3's verdict (module docstring) from the fit, its test, the Holm-adjusted pair
    (`holm_pair`) and the smallest arm's n."""
    if fit is None or t is None:
        return Verdict(verdicts.NOT_TESTED, "the model cannot be fitted to these runs")
    if n < verdicts.N_TESTABLE:
        return Verdict(verdicts.NOT_TESTED, f"n = {n} < {verdicts.N_TESTABLE}")
    if not fit.converged or math.isnan(t.se):
        return Verdict(verdicts.NOT_TESTED, "no maximum-likelihood estimate (the fit did not "
                                            "converge to a finite optimum)")  # fmt: skip
    p_less, p_greater = p_holm
    short = f"n = {n} < {verdicts.N_MIN}" if n < verdicts.N_MIN else ""
    if t.c < 0:
        reason = f"c = {t.c:.3g}, one-sided p Holm = {p_less:.2g}"
        if not short and p_less < ALPHA:
            return Verdict(verdicts.REPRODUCED, reason)
        return Verdict(verdicts.DIRECTION_ONLY, "; ".join(filter(None, (reason, short))))
    reason = f"c = {t.c:.3g} >= 0, one-sided p Holm (c > 0) = {p_greater:.2g}"
    if not short and t.c > 0 and p_greater < ALPHA:
        return Verdict(verdicts.CONTRADICTED, reason)
    return Verdict(verdicts.NOT_IN_DIRECTION, reason)


def control_family_p(summaries: Path) -> list[float]:
    """The raw p of every tested row of the claims table's "our controls" family (the Holm
    family claim 3 joins), from the runs.csv under `summaries`."""
    family = [c for c in claims.CLAIMS if c.family == claims.OUR_CONTROLS]
    rows = [c.row for c in claims.compare_claims(family, summaries)]
    return [r.p for r in rows if verdicts.is_tested(r)]


# ---------------------------------------------------------------- Spearman


def spearman_exact(x: Values, y: Values) -> tuple[float, float]:
    """(rho, p): Spearman's rank correlation (midranks) and its exact one-sided permutation p
    for rho > 0, the share of the n! orderings of y whose rho is at least the observed one.
    +inf ranks last (a censored median beyond every other value). NaN with under 3 points or
    ranks that do not vary."""
    rx, ry = sps.rankdata(np.asarray(x, float)), sps.rankdata(np.asarray(y, float))
    if rx.size != ry.size:
        raise ValueError("x and y need one value per cell each")
    if rx.size < 3 or np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return math.nan, math.nan
    if rx.size > 8:
        raise ValueError("the exact p enumerates n! orderings: at most 8 cells")

    def rho(r: np.ndarray) -> float:
        return float(np.corrcoef(rx, r)[0, 1])

    observed = rho(ry)
    perms = [rho(np.asarray(p)) for p in itertools.permutations(ry)]
    at_least = sum(r >= observed - 1e-12 for r in perms)
    return observed, at_least / len(perms)


def ranked_values(values: np.ndarray, bounds: np.ndarray) -> np.ndarray | None:
    """`values` for ranking, or None when a rank is unknown. +inf (a median beyond its runs,
    known only to lie above its bound) ranks last, 0 (a speed-up whose GeomDR median is beyond
    its runs: below its bound) first; a bound that does not clear every other value leaves
    that rank unknown."""
    known = values[np.isfinite(values) & (values > 0)]
    top = known.max() if known.size else -math.inf
    bottom = known.min() if known.size else math.inf
    if (bounds[np.isinf(values)] <= top).any() or (bounds[values == 0] >= bottom).any():
        return None
    return values


def cell_spearman(cells: pd.DataFrame) -> tuple[float, float, str]:
    """(rho, p, note) between the baseline's KM median and the speed-up over a task's cells
    (cells with neither median left out)."""
    rows = cells[~cells["speedup"].isna()]
    base = np.where(rows["baseline_censored"], math.inf, rows["baseline_median"])
    x = ranked_values(base, rows["baseline_longest"].to_numpy(float))
    y = ranked_values(rows["speedup"].to_numpy(float), rows["speedup_bound"].to_numpy(float))
    if x is None or y is None:
        return math.nan, math.nan, "a censored cell's bound does not clear the others: rank unknown"
    rho, p = spearman_exact(x, y)
    return rho, p, f"{len(rows)} cells"


# ---------------------------------------------------------------- claim 4: fixed time


@dataclass(frozen=True)
class FixedTime:
    """GeomDR's KM median at the slowest cell over the fastest, with its bootstrap CI."""

    slow_wd: float
    fast_wd: float
    ratio: float
    lo: float
    hi: float
    n: int
    """The smaller GeomDR arm's n."""


def fixed_time(runs: pd.DataFrame) -> FixedTime | None:
    """Claim 4's ratio over one task's runs (None with fewer than two cells)."""
    geo = runs[runs[ENABLED]]
    cells = sorted(geo[WD].astype(float).unique())
    if len(cells) < 2:
        return None
    slow, fast = (geo[np.isclose(geo[WD].astype(float), w)] for w in (cells[0], cells[-1]))
    st, sc = times_and_censoring(slow, THRESHOLD)
    ft, fc = times_and_censoring(fast, THRESHOLD)
    ratio, lo, hi = speedup(st, sc, ft, fc)  # "baseline" / "group" = slow / fast
    return FixedTime(cells[0], cells[-1], ratio, lo, hi, min(len(slow), len(fast)))


def fixed_time_verdict(ft: FixedTime | None) -> Verdict:
    """Claim 4's verdict (module docstring)."""
    if ft is None:
        return Verdict(verdicts.NOT_TESTED, "fewer than two cells with GeomDR runs")
    if ft.n < verdicts.N_TESTABLE:
        return Verdict(verdicts.NOT_TESTED, f"n = {ft.n} < {verdicts.N_TESTABLE}")
    if math.isnan(ft.ratio):
        return Verdict(verdicts.NOT_TESTED, "both medians beyond the runs")
    low, high = FIXED_TIME_MARGIN
    ci = f"CI [{ft.lo:.4g}, {ft.hi:.4g}]"
    enough = ft.n >= verdicts.N_MIN
    short = "" if enough else f"; n = {ft.n} < {verdicts.N_MIN}"
    if enough and low < ft.lo and ft.hi < high:
        return Verdict(verdicts.REPRODUCED, f"{ci} inside ({low:g}, {high:g})")
    if enough and (ft.lo > high or ft.hi < low):
        return Verdict(verdicts.CONTRADICTED, f"{ci} wholly outside ({low:g}, {high:g})")
    if low < ft.ratio < high:
        return Verdict(verdicts.DIRECTION_ONLY, f"{ci} not inside ({low:g}, {high:g}){short}")
    return Verdict(verdicts.NOT_IN_DIRECTION, f"ratio {ft.ratio:.3g} outside ({low:g}, {high:g})"
                                              f", {ci}{short}")  # fmt: skip


# ---------------------------------------------------------------- the figure


SERIES = {ADDITION: ("o", "--"), DIVISION: ("s", ":")}
"""Each task's marker and the line style of the paper's mark."""
ARROW_POINTS = 26
"""Length of a bound's arrow, in points."""
BOUND_GID = "lower-bound"
"""The gid of the arrows that mark a bound (a censored median), for tests and SVG readers."""


def _arrow(ax: plt.Axes, x: float, y: float, dx: float, dy: float, color: Any) -> None:
    """An arrow from (x, y) in data units, `dx`, `dy` points long (log axes: constant size)."""
    head = offset_copy(ax.transData, fig=cast(Figure, ax.figure), x=dx, y=dy, units="points")
    ax.annotate("", xy=(x, y), xycoords=head, xytext=(x, y), textcoords="data",
                arrowprops={"arrowstyle": "-|>", "color": color, "lw": 1.4},
                gid=BOUND_GID)  # fmt: skip


def _draw_cell(ax: plt.Axes, cell: pd.Series, color: Any, marker: str) -> None:
    """One cell: the speed-up with its CI at the baseline's median, or a bound with arrows."""
    censored_base, censored_geo = bool(cell["baseline_censored"]), bool(cell["geomdr_censored"])
    if censored_base and censored_geo:
        return  # no estimate and no bound: left out, said in the summary
    x = cell["baseline_longest"] if censored_base else cell["baseline_median"]
    if censored_base or censored_geo:
        y = cell["speedup_bound"]
        ax.plot([x], [y], marker, color=color, mfc="none", ms=8)
        if censored_base:  # the median and the speed-up lie beyond: right and up
            _arrow(ax, x, y, ARROW_POINTS, 0, color)
            _arrow(ax, x, y, 0, ARROW_POINTS, color)
        else:  # GeomDR's median beyond its runs: the speed-up lies below
            _arrow(ax, x, y, 0, -ARROW_POINTS, color)
    else:
        y, lo, hi = cell["speedup"], cell["speedup_lo"], cell["speedup_hi"]
        yerr = [[y - lo if np.isfinite(lo) else 0.0], [hi - y if np.isfinite(hi) else 0.0]]
        ax.errorbar([x], [y], yerr=yerr, fmt=marker, color=color, ms=7, capsize=3)
        if not np.isfinite(hi):  # resamples with the baseline's median beyond its runs
            _arrow(ax, x, y, 0, ARROW_POINTS, color)
    ax.annotate(f"wd {cell['weight_decay']:g}", (x, y), xytext=(6, -12),
                textcoords="offset points", fontsize="small", color=color)  # fmt: skip


def draw_figure(cells: pd.DataFrame) -> Figure:
    """Each cell's speed-up (baseline / GeomDR KM median, bootstrap 95% CI) against its
    baseline's KM median, log-log, one series per task, the paper's factors marked; a censored
    median is a bound drawn with arrows (`BOUND_GID`)."""
    palette = dict(zip(SERIES, sns.color_palette("colorblind", len(SERIES)), strict=True))
    fig, ax = plt.subplots(figsize=(6.5, 5.0), layout="constrained")
    for task, (marker, style) in SERIES.items():
        color = palette[task]
        for _, cell in cells[cells["task"] == task].iterrows():
            _draw_cell(ax, cell, color, marker)
        ax.plot([], [], marker, color=color, label=task)  # one legend entry per series
        factor = PAPER_FACTOR[task]
        ax.axhline(factor, color=color, ls=style, lw=1.2,
                   label=f"paper: {factor:g}x ({task})")  # fmt: skip
    ax.axhline(1.0, color="0.6", lw=0.8, zorder=0)  # no speed-up
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.margins(0.12)  # room for a bound's arrows, which autoscaling does not see
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.set_xlabel(f"baseline's KM median grok step (test accuracy {THRESHOLD:g})")
    ax.set_ylabel("speed-up: baseline / GeomDR KM median")
    ax.set_title("GeomDR's speed-up against the baseline's delay\n"
                 "(open marker and arrows: a bound, a median beyond the runs)",
                 fontsize="medium")  # fmt: skip
    fig.legend(loc="outside lower center", ncols=2, frameon=False)
    return fig


def write_figure(cells: pd.DataFrame, path: Path) -> Path:
    """`draw_figure` written to `path` (its suffix names the format)."""
    fig = draw_figure(cells)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
    return path


# ---------------------------------------------------------------- the summary


def _num(x: float, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}g}"


def _median_cell(cell: pd.Series, arm: str) -> str:
    if cell[f"{arm}_censored"]:
        return f"> {cell[f'{arm}_longest']:,.0f}"
    return "-" if math.isnan(cell[f"{arm}_median"]) else f"{cell[f'{arm}_median']:,.0f}"


def _speedup_cell(cell: pd.Series) -> str:
    if cell["baseline_censored"] != cell["geomdr_censored"]:
        return f"{'>' if cell['baseline_censored'] else '<'} {cell['speedup_bound']:.2f}x (a bound)"
    if math.isnan(cell["speedup"]):
        return "none (both medians beyond the runs)"
    return f"{cell['speedup']:.2f}x [{cell['speedup_lo']:.2f}, {cell['speedup_hi']:.2f}]"


def cells_markdown(cells: pd.DataFrame) -> list[str]:
    lines = ["| task | weight decay | baseline KM median (grokked/n) | GeomDR KM median "
             "(grokked/n) | speed-up [95% CI] |", "|---|---|---|---|---|"]  # fmt: skip
    for _, c in cells.iterrows():
        lines.append(
            f"| {c['task']} | {c['weight_decay']:g} | {_median_cell(c, 'baseline')} "
            f"({c['grokked_baseline']}/{c['n_baseline']}) | {_median_cell(c, 'geomdr')} "
            f"({c['grokked_geomdr']}/{c['n_geomdr']}) | {_speedup_cell(c)} |"
        )
    return lines


@dataclass(frozen=True)
class Judged:
    """Everything the summary states for the addition cells."""

    fit: AftFit | None
    fit_error: str
    trend: Trend | None
    p_holm: tuple[float, float]
    m: int
    """Tests in the Holm family with claim 3's."""
    trend_verdict: Verdict
    spearman: tuple[float, float, str]
    fixed: FixedTime | None
    fixed_verdict: Verdict


def judge(runs: pd.DataFrame, cells: pd.DataFrame, family: Sequence[float]) -> Judged:
    """Claims 3 and 4 on the addition runs; `family`: the raw p's of the "our controls" rows."""
    add = runs[runs["task"] == ADDITION]
    fit, t, error = None, None, ""
    try:
        fit = fit_trend(add)
        t = trend(fit)
    except ValueError as err:
        error = str(err)
    pair = holm_pair(t, family) if t is not None else (math.nan, math.nan)
    verdict = trend_verdict(fit, t, pair, smallest_arm(add))
    rho = cell_spearman(cells[cells["task"] == ADDITION])
    ft = fixed_time(add)
    return Judged(fit, error, t, pair, len(family) + 1, verdict, rho, ft, fixed_time_verdict(ft))


def _fit_lines(j: Judged) -> list[str]:
    if j.fit is None or j.trend is None:
        return [f"No fit: {j.fit_error}."]
    fit, t = j.fit, j.trend
    lines = ["| coefficient | estimate | SE |", "|---|---|---|"]
    lines += [f"| {n} | {b:.4g} | {se:.3g} |" for n, b, se in zip(fit.names, fit.coef, fit.se,
                                                                     strict=True)]  # fmt: skip
    lines += [
        f"| s (SE of log s) | {fit.scale:.4g} | {fit.log_scale_se:.3g} |", "",
        f"n = {fit.n} runs, {fit.events} grokked, log-likelihood {fit.loglik:.4f}, converged: "
        f"{'yes' if fit.converged else 'no'}.",
        f"c = {t.c:.4g} (SE {t.se:.3g}): one-sided Wald p (c < 0) = {_num(t.p_less, 2)}, "
        f"(c > 0) = {_num(t.p_greater, 2)}; after Holm with the {j.m - 1} tested rows of the "
        f"\"{claims.OUR_CONTROLS}\" family (m = {j.m}): {_num(j.p_holm[0], 2)} and "
        f"{_num(j.p_holm[1], 2)}.",
        f"exp(-c), the speed-up's growth per tenfold lower weight decay (shown, not judged): "
        f"{t.growth:.3g} [{t.growth_lo:.3g}, {t.growth_hi:.3g}].",
    ]
    return lines


def summary_markdown(cells: pd.DataFrame, j: Judged) -> str:
    """dose_response.md: the cells, claim 3 and claim 4 with their verdicts."""
    rho, p, note = j.spearman
    ft = j.fixed
    ratio = ("-" if ft is None else f"{ft.ratio:.3g} [{ft.lo:.3g}, {ft.hi:.3g}] (weight decay "
             f"{ft.slow_wd:g} over {ft.fast_wd:g}; n = {ft.n})")  # fmt: skip
    lines = [
        "# Dose-response: GeomDR's speed-up against the baseline's delay",
        "",
        "Generated by `python -m analysis.dose_response` from "
        + ", ".join(f"`{s.sweep}/runs.csv`" for s in SOURCES)
        + f" (grok at test accuracy {THRESHOLD:g}; the rules are in analysis/REPRODUCTION.md).",
        "",
        *cells_markdown(cells),
        "",
        "## Claim 3: the speed-up grows with the baseline's delay (addition)",
        "",
        "Log-normal AFT, log T = a(cell) + b GeomDR + c GeomDR log10(1 / weight decay) + s e:",
        "",
        *_fit_lines(j),
        "",
        f"Spearman's rho between the baseline's KM median and the speed-up (shown, not judged): "
        f"{_num(rho)}, exact one-sided p = {_num(p, 2)} ({note}).",
        "",
        f"**{j.trend_verdict.verdict}** ({j.trend_verdict.reason})",
        "",
        "## Claim 4: GeomDR's KM median stays within a factor of 2 (addition)",
        "",
        f"Ratio of GeomDR's KM medians [bootstrap 95% CI]: {ratio}.",
        "",
        f"**{j.fixed_verdict.verdict}** ({j.fixed_verdict.reason})",
        "",
        f"Figure: `{OUT_FIGURE}`.",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the command


def write_outputs(runs: pd.DataFrame, family: Sequence[float], out: Path) -> list[Path]:
    """The summary, the cells' CSV and the figure written into `out`."""
    cells = cell_table(runs)
    judged = judge(runs, cells, family)
    out.mkdir(parents=True, exist_ok=True)
    (out / OUT_MD).write_text(summary_markdown(cells, judged))
    cells.to_csv(out / OUT_CSV, index=False)
    return [out / OUT_MD, out / OUT_CSV, write_figure(cells, out / OUT_FIGURE)]


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m analysis.dose_response` (module docstring); exit 2 with one error line when
    a runs.csv cannot be read."""
    ap = argparse.ArgumentParser(prog="python -m analysis.dose_response", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--summaries", type=Path, default=SUMMARIES)
    ap.add_argument("--out", type=Path, default=None,
                    help=f"where to write (default: SUMMARIES/{claims.DOSE})")
    args = ap.parse_args(argv)
    missing = missing_sources(args.summaries)
    if missing:
        print("not run yet, nothing written; missing: " + ", ".join(map(str, missing)))
        return 0
    try:
        runs = load_runs(args.summaries)
        family = control_family_p(args.summaries)
    except (DoseError, claims.ClaimError) as err:
        print(error_line(str(err)), file=sys.stderr)
        return USER_ERROR
    for path in write_outputs(runs, family, args.out or args.summaries / claims.DOSE):
        print(f"wrote: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
