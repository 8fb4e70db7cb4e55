"""Small estimators of the group statistics: the Wilson interval, the standard error, the
seeded percentile bootstrap and the speed-up of Kaplan-Meier medians (sweepgrok.analysis.stats
re-exports them)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats as sps

from sweepgrok.analysis.survival import km_median_rows


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a success rate k / n (scipy's binomtest)."""
    if n == 0:
        return float("nan"), float("nan")
    ci = sps.binomtest(int(k), int(n)).proportion_ci(confidence, method="wilson")
    return float(ci.low), float(ci.high)


def sem(x: np.ndarray) -> float:
    """Standard error of the mean: sample std / sqrt(n) (not / n, a trap in public code)."""
    x = np.asarray(x, dtype=float)
    if x.size < 2:
        return float("nan")
    return float(np.std(x, ddof=1) / np.sqrt(x.size))


Statistic = Callable[..., np.ndarray]


def bootstrap_ci(
    x: np.ndarray,
    statistic: Statistic = np.median,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """(estimate, low, high): seeded percentile bootstrap of `statistic` (takes ``axis=``).

    Written here rather than with scipy.stats.bootstrap: grok steps lie on the evaluation grid,
    so ties are the rule and BCa degenerates to NaN, and one resample matrix per group is a few
    lines. Fewer than two values give the estimate with a NaN interval.
    """
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    point = float(statistic(x, axis=0))
    if x.size < 2:
        return point, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    boots = statistic(x[rng.integers(0, x.size, size=(n_boot, x.size))], axis=1)
    lo, hi = _percentiles(boots, confidence)
    return point, lo, hi


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    # inverted_cdf picks order statistics: no interpolation between +inf and a finite value.
    alpha = (1.0 - confidence) / 2.0
    finite = values[~np.isnan(values)]
    if finite.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(finite, [alpha, 1.0 - alpha], method="inverted_cdf")
    return float(lo), float(hi)


def _ratio(base: np.ndarray | float, group: np.ndarray | float) -> np.ndarray:
    # inf / finite = inf (baseline median beyond its runs), finite / inf = 0, inf / inf = NaN.
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(base, float) / np.asarray(group, float)


def speedup(
    base_times: np.ndarray,
    base_censored: np.ndarray,
    times: np.ndarray,
    censored: np.ndarray,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """(ratio, low, high): baseline KM median / group KM median, with a seeded bootstrap CI.

    Kaplan-Meier medians count censored runs. A group that groks in under half of its runs
    has no median (+inf): the ratio is then inf (baseline) or 0 (group), and NaN with a NaN
    interval when both are. Runs are resampled independently within each group; resamples
    where both medians are infinite have no ratio and are left out of the interval.
    """
    bt, bc = np.asarray(base_times, float), np.asarray(base_censored, bool)
    gt, gc = np.asarray(times, float), np.asarray(censored, bool)
    if bt.size == 0 or gt.size == 0:
        return float("nan"), float("nan"), float("nan")
    point = float(_ratio(km_median_rows(bt, bc)[0], km_median_rows(gt, gc)[0]))
    if np.isnan(point):
        return point, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    ib = rng.integers(0, bt.size, size=(n_boot, bt.size))
    ig = rng.integers(0, gt.size, size=(n_boot, gt.size))
    boots = _ratio(km_median_rows(bt[ib], bc[ib]), km_median_rows(gt[ig], gc[ig]))
    lo, hi = _percentiles(boots, confidence)
    return point, lo, hi


def speedup_bound(
    base_times: np.ndarray, base_censored: np.ndarray, times: np.ndarray, censored: np.ndarray
) -> float:
    """The ratio with a missing KM median replaced by that group's longest run.

    A median that KM never reaches lies beyond the group's last observed step, so where
    ``speedup`` is inf this is a lower bound on it, and where it is 0 an upper bound.
    """
    if len(base_times) == 0 or len(times) == 0:
        return float("nan")
    b = float(km_median_rows(base_times, base_censored)[0])
    g = float(km_median_rows(times, censored)[0])
    b = longest_finite(base_times) if np.isinf(b) else b
    g = longest_finite(times) if np.isinf(g) else g
    return float(_ratio(b, g))



def longest_finite(times: np.ndarray) -> float:
    """The longest finite time (a group's longest run), +inf when none is finite."""
    finite = np.asarray(times, float)[np.isfinite(times)]
    return float(finite.max()) if finite.size else float("inf")
