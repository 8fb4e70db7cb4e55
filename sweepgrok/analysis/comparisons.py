"""Groups of runs against a baseline: speed-ups, log-rank tests, Holm, paired seeds.

Conventions (docs/statistics.md states them for users):

- The baseline is given as key=value pairs over grouping keys. A comparison is made within a
  stratum: the other grouping keys hold the same values in the group and its baseline
  (``--by task.name,geomdr.enabled --baseline geomdr.enabled=false`` compares division with
  GeomDR against division without it). A stratum without a baseline group gets no comparison;
  a baseline is never borrowed from another stratum. When the pairs fix every grouping key,
  there is one stratum and every group is compared with that one baseline. A grouping key that
  changes with the baseline's keys (one value for each of their combinations across the runs,
  as weight decay in a zip of norm and weight decay) is a setting of the arms, not a stratum:
  as one it would leave every arm but the baseline's alone (stratum_keys).
- Speed-up = baseline Kaplan-Meier median / group Kaplan-Meier median (censored runs count),
  with a seeded percentile-bootstrap CI (runs resampled within each group).
- ``p`` is the exact permutation log-rank p-value (a seeded Monte Carlo above
  ``survival.MAX_EXACT`` relabellings, with its standard error ``p_se``); ``p_asymptotic`` is
  the chi-square one that R's survdiff reports, which is too small for small groups (3 vs 3
  completely separated: 0.025 asymptotic, 2/20 = 0.10 exact). ``p_holm`` adjusts ``p`` over
  the table's comparisons (Holm).
- Paired (``paired=True``): runs are matched across a group and its baseline by their seed keys
  (seed s of every variant draws the same split); the test is the log-rank stratified by seed
  (labels permuted within each pair), and the paired speed-up is the median over seeds of
  baseline time / group time with a bootstrap CI over seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from sweepgrok.analysis import survival
from sweepgrok.analysis.stats import (
    PAIR_KEYS,
    AnalysisError,
    bootstrap_ci,
    format_value,
    group_label,
    group_summary,
    iter_groups,
    resolve_by,
    resolve_key,
    speedup,
    speedup_bound,
    times_and_censoring,
)
from sweepgrok.config.suggest import did_you_mean
from sweepgrok.config.thresholds import DEFAULT_GROK_THRESHOLD, GROK_THRESHOLDS, tag

# ---------------------------------------------------------------- the baseline


def parse_baseline(text: str) -> dict[str, str]:
    """'model.norm=none,optim.weight_decay=1' -> {'model.norm': 'none', ...}."""
    spec: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise AnalysisError(f"expected key=value[,key=value...] (got {text!r})", "baseline")
        if key in spec:
            raise AnalysisError(f"{key} is given twice (got {text!r}): give it once", "baseline")
        spec[key] = value.strip()
    return spec


def _matches(column: pd.Series, raw: str) -> pd.Series:
    # Compare in the column's own type: '1' matches 1.0 in a float column, 'none' a string.
    if pd.api.types.is_bool_dtype(column):
        word = raw.lower()
        if word not in ("true", "false", "1", "0"):
            return pd.Series(False, index=column.index)
        return column == (word in ("true", "1"))
    if pd.api.types.is_numeric_dtype(column):
        try:
            value = float(raw)
        except ValueError:
            return pd.Series(False, index=column.index)
        as_float = column.to_numpy(dtype=float, na_value=np.nan)
        return pd.Series(np.isclose(as_float, value, rtol=1e-9, atol=0.0), index=column.index)
    return column.map(format_value) == raw


def baseline_mask(summary: pd.DataFrame, spec: Mapping[str, str]) -> pd.Series:
    """Runs whose config matches every key=value of `spec` (AnalysisError if none does)."""
    spec = resolve_spec(summary, spec)
    mask = pd.Series(True, index=summary.index)
    for key, raw in spec.items():
        mask &= _matches(summary[key], raw)
    if not mask.any():
        present = "; ".join(_values_present(summary, key, raw) for key, raw in spec.items())
        msg = f"no run matches {spec_text(spec)}; values present: {present}"
        raise AnalysisError(msg, "baseline")
    return mask


def resolve_spec(summary: pd.DataFrame, spec: Mapping[str, str]) -> dict[str, str]:
    """`spec` with each key as its column (a table label such as ``norm`` -> ``model.norm``)."""
    out: dict[str, str] = {}
    for word, raw in spec.items():
        key = resolve_key(summary, word, "baseline")
        if key in out:
            raise AnalysisError(f"{key} is given twice ({word}={raw}): give it once", "baseline")
        out[key] = raw
    return out


def _values_present(summary: pd.DataFrame, key: str, raw: str) -> str:
    """'model.norm: none, sphere', and the closest value when no run has `raw`."""
    values = sorted(summary[key].map(format_value).unique())
    hint = "" if _matches(summary[key], raw).any() else did_you_mean(raw, values)
    return f"{key}: {', '.join(values)}{hint}"


def spec_text(spec: Mapping[str, str]) -> str:
    """The baseline as the user writes it: 'k1=v1,k2=v2'."""
    return ",".join(f"{k}={v}" for k, v in spec.items())


def baselines_by_stratum(
    summary: pd.DataFrame, spec: Mapping[str, str], by: Sequence[str]
) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """{stratum: values of `by` of its baseline group}; a stratum = values of the other keys.

    Every key of `spec` must be a grouping key: a baseline must be a whole group.
    """
    mask = baseline_mask(summary, spec)
    outside = [k for k in spec if k not in by]
    if outside:
        msg = (
            f"baseline key(s) {', '.join(outside)} are not grouping keys "
            f"({', '.join(by) or 'none'}): add them to --by"
        )
        raise AnalysisError(msg, "baseline")
    strata = stratum_keys(summary, spec, by)
    found: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for values, _rows in iter_groups(summary[mask], by):
        found[_stratum(values, by, strata)] = values
    return found


def stratum_keys(summary: pd.DataFrame, spec: Mapping[str, str], by: Sequence[str]) -> list[str]:
    """The grouping keys a comparison holds fixed: those the baseline does not name, less those
    that follow the baseline's keys (arm_keys)."""
    follow = arm_keys(summary, spec, by)
    return [k for k in by if k not in spec and k not in follow]


def arm_keys(summary: pd.DataFrame, spec: Mapping[str, str], by: Sequence[str]) -> list[str]:
    """The grouping keys, not named by the baseline, that take one value for each combination
    of the baseline's keys across the runs: settings of the arms (weight decay zipped with the
    norm), not strata. Every baseline run holds the same value of such a key, so as a stratum it
    would leave every arm whose value differs without a baseline."""
    named = [k for k in spec if k in by]
    if not named:
        return []
    arms = [summary[k].map(format_value) for k in named]
    return [
        k for k in by
        if k not in spec and summary[k].map(format_value).groupby(arms).nunique().max() <= 1
    ]


def _stratum(values: tuple[Any, ...], by: Sequence[str], strata: Sequence[str]) -> tuple:
    return tuple(v for k, v in zip(by, values, strict=True) if k in strata)


# ---------------------------------------------------------------- one comparison


def _speedups(
    base: pd.DataFrame, group: pd.DataFrame, threshold: float, boot: Mapping[str, Any]
) -> dict[str, Any]:
    bt, bc = times_and_censoring(base, threshold)
    t, c = times_and_censoring(group, threshold)
    ratio, lo, hi = speedup(bt, bc, t, c, **boot)
    bound = speedup_bound(bt, bc, t, c)
    return {"speedup": ratio, "speedup_lo": lo, "speedup_hi": hi, "speedup_bound": bound}


def _unpaired(
    base: pd.DataFrame, group: pd.DataFrame, threshold: float, boot: Mapping[str, Any]
) -> dict[str, Any]:
    test = survival.logrank(
        *times_and_censoring(base, threshold), *times_and_censoring(group, threshold),
        seed=boot["seed"],
    )  # fmt: skip
    return {"test": "log-rank", **_test_columns(test)}


def _test_columns(test: survival.LogRank) -> dict[str, Any]:
    return {
        "p": test.p,
        "p_se": test.p_se,
        "p_exact": test.exact,
        "p_asymptotic": test.p_asymptotic,
    }


def pair_keys(summary: pd.DataFrame) -> list[str]:
    """The seed keys present in a run summary (what ``--paired`` matches runs by)."""
    return [k for k in PAIR_KEYS if k in summary and summary[k].notna().any()]


def _pair_ids(rows: pd.DataFrame, keys: Sequence[str], label: str) -> pd.Series:
    ids = rows[list(keys)].astype(str).agg("/".join, axis=1)
    dup = ids[ids.duplicated()]
    if len(dup):
        msg = f"--paired: {label} has several runs with seed {dup.iloc[0]} ({', '.join(keys)})"
        raise AnalysisError(msg, "paired")
    return ids


def _paired(
    base: pd.DataFrame,
    group: pd.DataFrame,
    labels: tuple[str, str],
    threshold: float,
    boot: Mapping[str, Any],
) -> dict[str, Any]:
    keys = pair_keys(pd.concat([base, group]))
    if not keys:
        raise AnalysisError("--paired needs seed columns (train.seed, task.data_seed)", "paired")
    bi, gi = _pair_ids(base, keys, labels[0]), _pair_ids(group, keys, labels[1])
    if set(bi) != set(gi):
        only = sorted(set(bi) ^ set(gi))
        msg = (
            f"--paired: the seeds of {labels[1]} and of its baseline {labels[0]} differ "
            f"({', '.join(keys)}: {', '.join(only[:5])} in one group only)"
        )
        raise AnalysisError(msg, "paired")
    base = base.assign(_pair=bi.to_numpy()).sort_values("_pair")
    group = group.assign(_pair=gi.to_numpy()).sort_values("_pair")
    bt, bc = times_and_censoring(base, threshold)
    t, c = times_and_censoring(group, threshold)
    strata = base["_pair"].to_numpy()
    test = survival.logrank(bt, bc, t, c, base_strata=strata, strata=strata, seed=boot["seed"])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = bt / t
    ratio, lo, hi = bootstrap_ci(ratios, np.median, **boot)
    return {
        "test": "log-rank stratified by seed",
        **_test_columns(test),
        "n_pairs": len(ratios),
        "n_pairs_censored": int((bc | c).sum()),
        "paired_speedup": ratio,
        "paired_speedup_lo": lo,
        "paired_speedup_hi": hi,
    }


# ---------------------------------------------------------------- the table


def compare(
    summary: pd.DataFrame,
    baseline: str | Mapping[str, str],
    by: Sequence[str] | None = None,
    *,
    threshold: float = DEFAULT_GROK_THRESHOLD,
    paired: bool = False,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Each group against the baseline of its stratum (see the module docstring).

    Columns: the keys, label, baseline (the pairs), baseline_group (the label of the group
    compared with, None without one), is_baseline, speedup (+ _lo/_hi bootstrap CI),
    speedup_bound (a bound where the speed-up is inf or 0), test, p (permutation), p_se,
    p_exact, p_asymptotic, p_holm; with `paired` also n_pairs, n_pairs_censored and
    paired_speedup (+ _lo/_hi). Rows come in the order of group_summary.
    """
    spec = parse_baseline(baseline) if isinstance(baseline, str) else dict(baseline)
    spec = resolve_spec(summary, spec)  # `norm=none` as `model.norm=none`
    keys = resolve_by(summary, by)
    bases = baselines_by_stratum(summary, spec, keys)
    strata = stratum_keys(summary, spec, keys)
    groups = dict(iter_groups(summary, keys))
    boot = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
    out = []
    for values, part in groups.items():
        row: dict[str, Any] = dict(zip(keys, values, strict=True))
        row |= {"label": group_label(keys, values), "baseline": spec_text(spec)}
        base_values = bases.get(_stratum(values, keys, strata))
        row["baseline_group"] = None if base_values is None else group_label(keys, base_values)
        row["is_baseline"] = row["baseline_group"] == row["label"]
        if base_values is not None and not row["is_baseline"]:
            base = groups[base_values]
            row |= _speedups(base, part, threshold, boot)
            labels = (row["baseline_group"], row["label"])
            # One test per comparison: the permutation test is the costly part.
            row |= (
                _paired(base, part, labels, threshold, boot)
                if paired
                else _unpaired(base, part, threshold, boot)
            )
        elif row["is_baseline"]:
            row |= {"speedup": 1.0, "speedup_bound": 1.0}
        out.append(row)
    table = pd.DataFrame(out)
    if "p" not in table:
        table["p"] = np.nan
    table["p_holm"] = survival.holm(table["p"].to_numpy(float))
    return table


def n_comparisons(table: pd.DataFrame) -> int:
    """How many rows of a compare() table hold a test."""
    return int(table["p"].notna().sum()) if "p" in table else 0


# ---------------------------------------------------------------- thresholds runs could see


def unseen_threshold_runs(summary: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Runs that stopped after grokking at a lower ``train.grok_threshold`` (status grokked,
    ``train.stop_after_grok``) before test accuracy reached `threshold`: at `threshold` they
    would be false censored failures."""
    column = f"grok_step_{tag(threshold)}"
    if "status" not in summary or column not in summary:
        return summary.iloc[:0]
    return summary[(summary["status"] == "grokked") & summary[column].isna()]


def supported_thresholds(summary: pd.DataFrame) -> list[float]:
    """The thresholds of GROK_THRESHOLDS that no run stopped short of."""
    return [t for t in GROK_THRESHOLDS if unseen_threshold_runs(summary, t).empty]


def check_threshold(summary: pd.DataFrame, threshold: float) -> None:
    """AnalysisError (param ``threshold``) when some runs could not see `threshold`."""
    unseen = unseen_threshold_runs(summary, threshold)
    if unseen.empty:
        return
    stopped_at = ""
    if "train.grok_threshold" in unseen:
        values = sorted({format_value(v) for v in unseen["train.grok_threshold"].dropna()})
        stopped_at = f" (train.grok_threshold {', '.join(values)})"
    supported = ", ".join(f"{t:g}" for t in supported_thresholds(summary)) or "none"
    msg = (
        f"{len(unseen)} run(s) stopped when they grokked at a lower threshold{stopped_at} "
        f"(train.stop_after_grok) and never saw {threshold:g}: they would count as censored "
        f"failures. Thresholds these runs support: {supported}"
    )
    raise AnalysisError(msg, "threshold")


def analysis_table(
    summary: pd.DataFrame,
    by: Sequence[str] | None = None,
    baseline: str | Mapping[str, str] | None = None,
    *,
    paired: bool = False,
    **kwargs: Any,
) -> pd.DataFrame:
    """group_summary, plus compare's columns when a baseline is given (kwargs go to both)."""
    check_threshold(summary, kwargs.get("threshold", DEFAULT_GROK_THRESHOLD))
    keys = resolve_by(summary, by)
    table = group_summary(summary, keys, **kwargs)
    if baseline is None:
        if paired:
            raise AnalysisError("--paired compares groups: give a --baseline too", "paired")
        return table
    cmp = compare(summary, baseline, keys, paired=paired, **kwargs)
    extra = [c for c in cmp.columns if c not in table.columns]
    return pd.concat([table, cmp[extra]], axis=1)
