"""The confirm table: each arm of a confirm stage on its fresh seeds, against every reference.

Per arm: n, grokked k/n, the Kaplan-Meier median with a percentile bootstrap CI (runs resampled,
seeded), and for each reference arm the speed-up (reference median / arm median, bootstrap CI)
with the permutation log-rank p (exact where small enough, see `survival.logrank`). Every
arm-vs-reference comparison of the stage is one Holm family (``p_holm``), and only these: the
stage is its own question. The **winner's curse** of a searched arm: its search objective (the
median over the search seeds, the value it was ranked by; a time-capped trial's value is a bound)
next to its confirm-time KM median, and their ratio (confirm / search; above 1: slower on fresh
seeds than the search said).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from sweepgrok.analysis import survival
from sweepgrok.analysis.comparisons import compare
from sweepgrok.analysis.stats import times_and_censoring
from sweepgrok.analysis.survival import km_median, km_median_rows
from sweepgrok.search.confirm import Stage

N_BOOT = 2000
"""Bootstrap resamples of each CI."""


def km_median_ci(
    times: np.ndarray, censored: np.ndarray, *, n_boot: int = N_BOOT, seed: int = 0
) -> tuple[float, float, float]:
    """(KM median, 2.5% and 97.5% bootstrap percentiles); +inf in a CI end where the
    resampled median lies beyond the runs; NaN median when under half grokked."""
    point = km_median(times, censored)
    if times.size < 2:
        return point, math.nan, math.nan
    idx = np.random.default_rng(seed).integers(0, times.size, size=(n_boot, times.size))
    boots = km_median_rows(times[idx], censored[idx])
    lo, hi = np.quantile(boots, [0.025, 0.975], method="inverted_cdf")
    return point, float(lo), float(hi)


def _arm_stats(rows: pd.DataFrame, threshold: float, seed: int) -> dict[str, Any]:
    times, censored = times_and_censoring(rows, threshold)
    median, lo, hi = km_median_ci(times, censored, seed=seed)
    return {
        "n": len(rows), "grokked": int((~censored).sum()), "km_median": median,
        "km_lo": lo, "km_hi": hi, "steps_run_max": float(np.max(times, initial=0.0)),
    }  # fmt: skip


def _curse(search_value: float | None, median: float) -> float:
    if search_value is None or not search_value or math.isnan(median):
        return math.nan
    return median / search_value


def confirm_table(summary: pd.DataFrame, stage: Stage, *, seed: int = 0) -> pd.DataFrame:
    """One row per arm of `stage` (its order), from the run summary of the stage's folder
    (stats.run_summary with the ``arm`` column). Columns: arm, kind (searched / reference),
    trial, search_value, capped, n, grokked, km_median, km_lo, km_hi, curse (confirm KM median
    / search objective), and per reference R: speedup_R, speedup_R_lo, speedup_R_hi, p_R,
    p_holm_R (NaN where the arm is R)."""
    out = []
    for arm in stage.arms:
        rows = summary[summary["arm"] == arm.name]
        row = {"arm": arm.name, "kind": "searched" if arm.searched else "reference",
               "trial": arm.trial, "search_value": arm.search_value, "capped": arm.capped,
               **_arm_stats(rows, stage.threshold, seed)}  # fmt: skip
        row["curse"] = _curse(arm.search_value, row["km_median"])
        out.append(row)
    table = pd.DataFrame(out)
    present = set(summary["arm"].dropna()) if "arm" in summary else set()
    for ref in [r for r in stage.references if r in present]:
        _add_reference(table, summary, ref, stage.threshold, seed)
    _holm(table, stage.references)
    return table


def _add_reference(
    table: pd.DataFrame, summary: pd.DataFrame, ref: str, threshold: float, seed: int
) -> None:
    runs = summary[summary["arm"].notna()]
    cmp = compare(runs, f"arm={ref}", ["arm"], threshold=threshold, seed=seed).set_index("arm")
    pairs = (("", "speedup"), ("_lo", "speedup_lo"), ("_hi", "speedup_hi"),
             ("_bound", "speedup_bound"))  # fmt: skip
    for col, src in pairs:
        table[f"speedup_{ref}{col}"] = table["arm"].map(cmp[src]) if src in cmp else math.nan
    p = cmp["p"] if "p" in cmp else pd.Series(dtype=float)
    table[f"p_{ref}"] = [math.nan if a == ref else float(p.get(a, math.nan)) for a in table["arm"]]


def _holm(table: pd.DataFrame, references: Sequence[str]) -> None:
    """p_holm_<R>: Holm over every comparison in the table at once (the confirm family)."""
    cols = [f"p_{r}" for r in references if f"p_{r}" in table]
    if not cols:
        return
    flat = table[cols].to_numpy(float).ravel()
    tested = ~np.isnan(flat)
    adjusted = np.full(flat.shape, np.nan)
    adjusted[tested] = survival.holm(flat[tested])
    shaped = adjusted.reshape(len(table), len(cols))
    for j, col in enumerate(cols):
        table["p_holm_" + col[2:]] = shaped[:, j]


def family_size(table: pd.DataFrame) -> int:
    """How many comparisons the Holm family holds."""
    cols = [c for c in table.columns if c.startswith("p_") and not c.startswith("p_holm_")]
    return int(table[cols].notna().to_numpy().sum()) if cols else 0


# ---------------------------------------------------------------- cells


def _steps(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return "> runs" if math.isinf(x) else f"{x:,.0f}"


def _median_cell(row: pd.Series) -> str:
    """'2,900 [2,800, 3,200]'; a median beyond the runs: '> <longest run>'."""
    if math.isnan(row["km_median"]):
        return f"> {row['steps_run_max']:,.0f}"
    return f"{_steps(row['km_median'])} [{_steps(row['km_lo'])}, {_steps(row['km_hi'])}]"


def _ratio(x: float) -> str:
    if math.isnan(x):
        return "-"
    return "inf" if math.isinf(x) else f"{x:.2f}"


def _p(p: float) -> str:
    return "-" if math.isnan(p) else f"{p:.2g}"


def speedup_cell(row: pd.Series, ref: str) -> str:
    """'3.05 [1.04, 7.50]'; a bound where one median lies beyond its runs ('> 4.00 (a bound)'
    when the reference's does); 'none' when both do."""
    value = row[f"speedup_{ref}"]
    if pd.isna(value):
        return "none (both medians beyond the runs)"
    if math.isinf(value) or value == 0:
        sign = ">" if math.isinf(value) else "<"
        return f"{sign} {row[f'speedup_{ref}_bound']:.2f} (a bound)"
    return f"{value:.2f} [{_ratio(row[f'speedup_{ref}_lo'])}, {_ratio(row[f'speedup_{ref}_hi'])}]"


def search_cell(row: pd.Series, budget: int) -> str:
    """The search objective: a step, '(capped)' where the time cap stopped the trial, or
    '(censored)' above the budget (a run that never grokked scores past it)."""
    value = row["search_value"]
    if pd.isna(value):
        return "-"
    if value > budget:
        return f"{value:,.0f} (censored)"
    return _steps(value) + (" (capped)" if row["capped"] else "")


def display(
    table: pd.DataFrame, references: Sequence[str], budget: int
) -> tuple[list[str], list[list[str]]]:
    """(headers, rows of cells) of the confirm table, as the terminal and the report show it."""
    refs = [r for r in references if f"speedup_{r}" in table]
    headers = ["arm", "search objective", "n", "grokked", "KM median [95% CI]",
               "confirm / search"]  # fmt: skip
    for r in refs:
        headers += [f"vs {r}: speed-up [CI]", f"p vs {r}", f"p Holm vs {r}"]
    rows = []
    for _, row in table.iterrows():
        cells = [str(row["arm"]), search_cell(row, budget), str(row["n"]),
                 f"{row['grokked']}/{row['n']}",
                 _median_cell(row), _ratio(row["curse"])]  # fmt: skip
        for r in refs:
            if row["arm"] == r:
                cells += ["reference", "-", "-"]
                continue
            cells += [speedup_cell(row, r), _p(row[f"p_{r}"]),
                      _p(row.get(f"p_holm_{r}", math.nan))]  # fmt: skip
        rows.append(cells)
    return headers, rows


def markdown(table: pd.DataFrame, stage: Stage) -> str:
    """The confirm table as a Markdown table."""
    headers, rows = display(table, stage.references, stage.budget)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines) + "\n"


def plain(table: pd.DataFrame, stage: Stage) -> str:
    """The confirm table as aligned plain text (a terminal or a log: never wrapped)."""
    headers, rows = display(table, stage.references, stage.budget)
    widths = [max(len(c) for c in col) for col in zip(headers, *rows, strict=True)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
             for cells in (headers, *rows)]  # fmt: skip
    return "\n".join(lines) + "\n"


def result_line(table: pd.DataFrame, stage: Stage) -> str:
    """One sentence: the best searched arm on fresh seeds against each reference."""
    searched = table[table["kind"] == "searched"]
    if searched.empty:
        return "confirm: no searched arm"
    best = searched.iloc[0]
    parts = [f"{best['arm']} (search objective {search_cell(best, stage.budget)}) on "
             f"{best['n']} fresh seeds: KM median {_median_cell(best)}"]  # fmt: skip
    for r in stage.references:
        if f"speedup_{r}" not in table:
            continue
        ref = table[table["arm"] == r].iloc[0]
        parts.append(
            f"vs {r} (n = {ref['n']}, KM median {_median_cell(ref)}): speed-up "
            f"{speedup_cell(best, r)}, p = {_p(best[f'p_{r}'])}, "
            f"p Holm = {_p(best[f'p_holm_{r}'])} ({family_size(table)} comparisons)"
        )
    return "; ".join(parts)


def as_records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-ready rows (NaN as null, inf as the string 'inf')."""
    def clean(v: Any) -> Any:
        if isinstance(v, float | np.floating):
            return None if math.isnan(v) else ("inf" if math.isinf(v) else float(v))
        if isinstance(v, np.integer | np.bool_):
            return v.item()
        return v

    return [{str(k): clean(v) for k, v in row.items()} for row in table.to_dict("records")]
