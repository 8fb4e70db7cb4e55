"""Time-to-grok estimators for right-censored runs: Kaplan-Meier medians, log-rank tests.

Pure numpy / scipy, vectorised over resamples and relabellings (the bootstrap needs thousands of
Kaplan-Meier medians, the permutation test thousands of log-rank statistics; scipy's ``ecdf`` and
``logrank`` take one sample per call).

Conventions (docs/statistics.md states them for users):

- A time is a grok step (an event) or the step at which a run was censored. A censoring time may
  be +inf (a run that can never grok stays at risk for ever).
- Kaplan-Meier median: the convention of R's ``survival::survfit`` (``quantile.survfit``): the
  smallest t with S(t) <= 0.5, except that where S(t) = 0.5 exactly on an interval the median is
  the midpoint of that interval (from this event time to the next one, or to the last observed
  time when the curve stays at 0.5). Without censoring it equals the ordinary sample median.
- Log-rank: the two-sample (or stratified) log-rank statistic U^2 / V, equal to R's
  ``survdiff``. Its p-value is reported two ways: asymptotic (chi-square, 1 df), and by
  permutation of the group labels (within strata), which is exact for small groups: all
  relabellings when there are at most ``MAX_EXACT``, else a seeded Monte Carlo.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

KM_EPS = 1e-9
"""S(t) is a product of fractions: 12 of 24 grokked gives 0.5000000000000001, still 0.5."""
MAX_EXACT = 20_000
"""Enumerate every relabelling up to this many; above, a Monte Carlo of ``N_PERMUTATIONS``."""
N_PERMUTATIONS = 10_000
"""Relabellings drawn by the Monte Carlo permutation test."""


def _as_rows(times: np.ndarray, censored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = np.atleast_2d(np.asarray(times, float))
    c = np.atleast_2d(np.asarray(censored, bool))
    return t, c


def _next_event_time(t: np.ndarray, event: np.ndarray) -> np.ndarray:
    """For each position of sorted rows, the first event time strictly after its time."""
    ev = np.where(event, t, np.inf)
    # Smallest event time at or after each position, then shifted past the current time's ties.
    after = np.minimum.accumulate(ev[:, ::-1], axis=1)[:, ::-1]
    nxt = np.concatenate([after[:, 1:], np.full((t.shape[0], 1), np.inf)], axis=1)
    last_of_time = _last_index_of_time(t)
    return np.take_along_axis(nxt, last_of_time, axis=1)


def _last_index_of_time(t: np.ndarray) -> np.ndarray:
    """For each position of sorted rows, the index of the last position with the same time."""
    n = t.shape[1]
    is_last = np.concatenate([t[:, 1:] != t[:, :-1], np.ones((t.shape[0], 1), bool)], axis=1)
    idx = np.where(is_last, np.arange(n), n)
    return np.minimum.accumulate(idx[:, ::-1], axis=1)[:, ::-1]


def km_median_rows(times: np.ndarray, censored: np.ndarray) -> np.ndarray:
    """Kaplan-Meier median of each row of (B, n) samples; +inf where S stays above 0.5.

    Each observation, in time order with events before censorings at equal times, multiplies S
    by 1 - 1/at_risk if it is an event: over tied events that product is the usual (r - d) / r.
    S is read at the last observation of each time, so ties never show an intermediate value.
    """
    times, censored = _as_rows(times, censored)
    order = np.lexsort((censored, times), axis=1)
    t = np.take_along_axis(times, order, axis=1)
    event = ~np.take_along_axis(censored, order, axis=1)
    at_risk = np.arange(t.shape[1], 0, -1, dtype=float)
    surv = np.cumprod(np.where(event, 1.0 - 1.0 / at_risk, 1.0), axis=1)
    surv = np.take_along_axis(surv, _last_index_of_time(t), axis=1)
    hit = surv <= 0.5 + KM_EPS
    found = hit.any(axis=1)
    first = np.argmax(hit, axis=1)
    rows = np.arange(t.shape[0])
    t_first = t[rows, first]
    # A flat at exactly 0.5: the midpoint to the next event, or to the last time observed.
    flat = np.abs(surv[rows, first] - 0.5) <= KM_EPS
    nxt = _next_event_time(t, event)[rows, first]
    nxt = np.where(np.isinf(nxt), t[:, -1], nxt)
    with np.errstate(invalid="ignore"):
        median = np.where(flat, (t_first + nxt) / 2.0, t_first)
    return np.where(found, median, np.inf)


def km_median(times: np.ndarray, censored: np.ndarray) -> float:
    """Kaplan-Meier median of one sample (R survfit's convention); NaN if S stays above 0.5."""
    if np.asarray(times).size == 0:
        return float("nan")
    median = float(km_median_rows(times, censored)[0])
    return float("nan") if math.isinf(median) else median


# ---------------------------------------------------------------- log-rank


def _logrank_terms(
    times: np.ndarray, censored: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(U, V) of the log-rank test for each row of `labels` (B, n) (True = the second group).

    U = sum over event times of (d1 - d * r1 / r), V = sum of d (r1/r)(1 - r1/r)(r - d)/(r - 1),
    with r, d the runs at risk and the events at each distinct event time (pooled), r1, d1 those
    of the second group.
    """
    event = ~censored
    tj = np.unique(times[event])
    if tj.size == 0:
        zero = np.zeros(labels.shape[0])
        return zero, zero
    at_event = (times[:, None] == tj[None, :]) & event[:, None]  # (n, J)
    at_risk = times[:, None] >= tj[None, :]
    d, r = at_event.sum(0).astype(float), at_risk.sum(0).astype(float)
    g = labels.astype(float)
    d1, r1 = g @ at_event, g @ at_risk
    share = r1 / r
    u = (d1 - d * share).sum(axis=1)
    ties = np.where(r > 1, (r - d) / np.maximum(r - 1, 1), 0.0)
    v = (d * share * (1 - share) * ties).sum(axis=1)
    return u, v


def _chi2(
    times: np.ndarray, censored: np.ndarray, labels: np.ndarray, strata: np.ndarray
) -> np.ndarray:
    """Stratified log-rank chi-square (U summed over strata)^2 / (V summed) per labels row."""
    u = np.zeros(labels.shape[0])
    v = np.zeros(labels.shape[0])
    for s in np.unique(strata):
        rows = strata == s
        du, dv = _logrank_terms(times[rows], censored[rows], labels[:, rows])
        u, v = u + du, v + dv
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(v > 0, u * u / np.where(v > 0, v, 1.0), 0.0)


@dataclass(frozen=True)
class LogRank:
    """A log-rank comparison of two groups."""

    chi2: float
    """The observed statistic U^2 / V (0 when there is no information, e.g. no event)."""
    p_asymptotic: float
    """chi-square (1 df) p-value: what R's survdiff and scipy.stats.logrank report."""
    p: float
    """Permutation p-value: share of relabellings at least as extreme as the observed one."""
    p_se: float
    """Monte Carlo standard error of `p` (0 when every relabelling was enumerated)."""
    exact: bool
    """True when every relabelling was enumerated."""
    n_relabellings: int
    """Relabellings enumerated or drawn."""


def _stratum_members(strata: np.ndarray, labels: np.ndarray) -> list[tuple[np.ndarray, int]]:
    """(positions, runs of the second group) per stratum."""
    return [
        (np.flatnonzero(strata == s), int(labels[strata == s].sum())) for s in np.unique(strata)
    ]


def _count_relabellings(members: Sequence[tuple[np.ndarray, int]]) -> int:
    return math.prod(math.comb(len(pos), k) for pos, k in members)


def _all_relabellings(members: Sequence[tuple[np.ndarray, int]], n: int) -> np.ndarray:
    """Every relabelling that keeps each stratum's group sizes, as a (B, n) bool matrix."""
    per_stratum = [list(itertools.combinations(pos, k)) for pos, k in members]
    out = []
    for choice in itertools.product(*per_stratum):
        row = np.zeros(n, bool)
        for picked in choice:
            row[list(picked)] = True
        out.append(row)
    return np.array(out, dtype=bool).reshape(-1, n)


def _random_relabellings(
    members: Sequence[tuple[np.ndarray, int]], n: int, n_draws: int, seed: int
) -> np.ndarray:
    """`n_draws` uniform relabellings within strata (seeded)."""
    rng = np.random.default_rng(seed)
    out = np.zeros((n_draws, n), bool)
    for pos, k in members:
        ranks = rng.random((n_draws, len(pos))).argsort(axis=1).argsort(axis=1)
        out[:, pos] = ranks < k
    return out


def logrank(
    base_times: np.ndarray,
    base_censored: np.ndarray,
    times: np.ndarray,
    censored: np.ndarray,
    *,
    base_strata: np.ndarray | None = None,
    strata: np.ndarray | None = None,
    seed: int = 0,
    max_exact: int = MAX_EXACT,
    n_permutations: int = N_PERMUTATIONS,
) -> LogRank:
    """Two-sided log-rank test of a group against its baseline, asymptotic and by permutation.

    With strata (e.g. the seed of paired runs) the statistic is the stratified log-rank and the
    labels are permuted within strata only. The permutation p counts relabellings whose
    statistic is >= the observed one (the observed labelling included): exact when there are at
    most `max_exact` relabellings, else (1 + hits) / (1 + draws) over `n_permutations` seeded
    draws, with its standard error sqrt(p (1 - p) / draws).
    """
    t = np.r_[np.asarray(base_times, float), np.asarray(times, float)]
    c = np.r_[np.asarray(base_censored, bool), np.asarray(censored, bool)]
    n_base = len(base_times)
    if n_base == 0 or len(times) == 0:
        nan = float("nan")
        return LogRank(nan, nan, nan, nan, False, 0)
    labels = np.arange(t.size) >= n_base
    if strata is None or base_strata is None:
        st = np.zeros(t.size, int)
    else:
        st = np.unique(np.r_[np.asarray(base_strata), np.asarray(strata)], return_inverse=True)[1]
    observed = float(_chi2(t, c, labels[None, :], st)[0])
    p_asym = float(sps.chi2.sf(observed, 1))
    members = _stratum_members(st, labels)
    total = _count_relabellings(members)
    exact = total <= max_exact
    relabel = (
        _all_relabellings(members, t.size)
        if exact
        else _random_relabellings(members, t.size, n_permutations, seed)
    )
    stats_ = _chi2(t, c, relabel, st)
    hits = int((stats_ >= observed * (1 - 1e-9) - 1e-12).sum())
    if exact:
        return LogRank(observed, p_asym, hits / len(relabel), 0.0, True, len(relabel))
    p = (1 + hits) / (1 + n_permutations)
    se = math.sqrt(p * (1 - p) / n_permutations)
    return LogRank(observed, p_asym, p, se, False, n_permutations)


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN entries stay NaN and do not count)."""
    p = np.asarray(p_values, float)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    m = idx.size
    if m == 0:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(adjusted, 1.0)
    return out
