"""The verdict of one claim of the reproduction report, by the rules fixed at the top of
analysis/REPRODUCTION.md ("Verdict rules, version 4"); this module applies them and nothing
else.

A claim's comparison is one `Row`: n per group, the point estimate (baseline / group: a speed-up
for the grok step, a ratio of medians for another per-run measure), its 95% CI, the raw p of
the row's test, p Holm (adjusted over the tested rows of the row's Holm family, `Row.family`:
the caller adjusts, see `adjust` and `is_tested`) and the paper's factor where it gives one.
`verdict` turns it into one of `VERDICTS` with a short reason; `size` compares the paper's
factor with the CI.

Kinds (`KINDS`) and the rule each applies:

- ``faster``: directional, the paper's side is a speed-up > 1.
- ``slower``: a negative control, the paper's side is < 1; not tested when the baseline does
  not grok within the budget (its Kaplan-Meier median is beyond its runs).
- ``equal``: equivalence, the ratio strictly inside `EQUIVALENCE_MARGIN`.
- ``success``: a success rate, two-sided Fisher exact test (`fisher_p`), the direction read
  from the two rates; not tested only when every run of both groups succeeds.
- ``fails``: a negative success-rate claim ("the sphere fails on S5"): the group fails where
  the baseline groks; the same Fisher test. The paper's side is a group in which no run groks:
  a grok is an observed event that refutes "fails", where a run without one is only censored
  (it might grok later), so one grokking run is against the claim, whatever the two rates.
  Not tested when the baseline does not grok within the budget.
- ``measure``: a per-run measure other than the grok step (`measure_row`): ratio of medians and
  the exact two-sided Mann-Whitney p (`mann_whitney_p`), judged by the directional rule
  (`Row.expect` "smaller" or "larger": the group's measure against the baseline's) or the
  equivalence rule ("equal").
- ``precedes``: one event before another in every run (`precedes_row`): a one-sided sign test.
- ``fourier``: every run's concentration above chance at least `FOURIER_MIN`, then the
  equivalence rule on that measure.

A directional rule met gives "reproduced" only when the paper's factor lies inside the CI;
"direction reproduced, size not" when it lies outside; "direction reproduced" when the paper
gives no factor or the CI cannot place it (a censored median's bound below the factor).

Readings where the rule text leaves room (the stricter one is taken each time):

- "On the paper's side of 1" is strict: a CI touching 1 is not on either side, and a point
  estimate of exactly 1 is "not in the paper's direction". A significant CI on the paper's
  side with the point estimate on the other (a percentile bootstrap can do that) is not in
  the paper's direction.
- The margin (0.8, 1.25) is open: a CI touching 0.8 or 1.25 is not inside it, and "outside
  the margin" (contradicted) needs the whole CI strictly beyond one end: a CI end on the
  margin is neither.
- The paper's factor is inside the CI when lo <= factor <= hi (the CI is closed); a bound
  ("> x", a censored baseline) never matches a factor.
- A censored baseline (its median beyond its runs): the estimate is +inf and the table shows
  the bound "> x"; the directional rules apply to the direction with the bootstrap CI as
  computed (its infinite resamples included). A censored group (estimate 0) shows "< x".
- Sign test: runs whose two events fall on the same step count against the claim (a collapse
  at the grok step does not precede it); the test is on k runs with a positive gap out of all
  n runs that have both events, and the point estimate is "more than half positive".
- Fourier: "reproduced" needs both the equivalence and every run at `FOURIER_MIN` or more; a
  row that meets the equivalence but not the floor is "on the paper's side, not shown".
- An equivalence met (or on the paper's side) with the whole CI on one side of 1 says so in
  its reason ("the whole CI below 1: the group groks slower"): inside the margin is not the
  same speed, and the reason says what the data do.
- A ``fourier`` verdict's reason starts with what it tested (`FOURIER_TESTED`).
- Every kind is "not tested" with fewer than `N_TESTABLE` runs in a group (the rule's "as
  above" for the kinds whose rule does not repeat it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import stats as sps

from sweepgrok.analysis.stats import speedup
from sweepgrok.analysis.survival import holm

REPRODUCED = "reproduced"
DIRECTION_REPRODUCED = "direction reproduced"
SIZE_NOT = "direction reproduced, size not"
CONTRADICTED = "contradicted"
DIRECTION_ONLY = "on the paper's side, not shown"
NOT_IN_DIRECTION = "not in the paper's direction"
NOT_TESTED = "not tested"
VERDICTS = (
    REPRODUCED,
    DIRECTION_REPRODUCED,
    SIZE_NOT,
    CONTRADICTED,
    DIRECTION_ONLY,
    NOT_IN_DIRECTION,
    NOT_TESTED,
)
"""Every verdict the report may print (no other word is a verdict)."""

SIZE_YES = "yes"
SIZE_NO = "no"
SIZE_UNKNOWN = "unknown"
SIZE_NONE = "-"
SIZES = (SIZE_YES, SIZE_NO, SIZE_UNKNOWN, SIZE_NONE)
"""'Paper's factor inside our CI': yes, no, unknown (a bound below the factor), - (no factor)."""

Values = Sequence[float] | np.ndarray
"""Per-run values (NaN: the value does not exist in that run)."""

KINDS = ("faster", "slower", "equal", "success", "fails", "measure", "precedes", "fourier")
"""The kinds of claim (module docstring)."""
EXPECTS = ("smaller", "larger", "equal")
"""What a ``measure`` claim says of the group's measure against the baseline's."""

N_MIN = 8
"""'n >= 8 means at least 8 runs in each of the two groups' (needed for reproduced/contradicted)."""
N_TESTABLE = 2
"""'not tested: fewer than 2 runs in a group'."""
ALPHA = 0.05
"""'p Holm < 0.05' (0.05 itself is not below it)."""
EQUIVALENCE_MARGIN = (0.8, 1.25)
"""'Margin fixed in advance: a ratio of medians strictly between 0.8 and 1.25' (open)."""
FOURIER_MIN = 0.5
"""'every run's concentration above chance ... is at least 0.5 (half way from chance to pure
fourier_top frequencies)'."""


@dataclass(frozen=True)
class Row:
    """One claim's comparison, all the rules read (see `from_table` for a sweepgrok table row)."""

    kind: str
    """One of KINDS."""
    n_group: int
    """Runs in the group (``precedes``: runs with both events; ``measure``/``fourier``: runs
    where the measure exists)."""
    n_baseline: int = 0
    """Runs in the baseline (unused by ``precedes``)."""
    estimate: float = math.nan
    """Baseline / group: the speed-up or the ratio of medians (+inf: baseline median beyond its
    runs, 0: the group's, NaN: both); ``precedes``: the median gap; ``success``: unused."""
    lo: float = math.nan
    """Lower end of the estimate's 95% CI."""
    hi: float = math.nan
    """Upper end of the estimate's 95% CI."""
    p: float = math.nan
    """The raw p of the row's test (log-rank, Fisher, Mann-Whitney or sign test)."""
    p_holm: float = math.nan
    """p adjusted by Holm over the tested rows of the row's family (set by `adjust`)."""
    baseline_censored: bool = False
    """The baseline's median is beyond its runs: the estimate is a lower bound (`bound`)."""
    group_censored: bool = False
    """The group's median is beyond its runs: the estimate is an upper bound (`bound`)."""
    bound: float = math.nan
    """The estimate with a missing median replaced by that group's longest run (budget)."""
    k_group: int = 0
    """``success``: the group's runs that grokked; ``precedes``: runs with a positive gap."""
    k_baseline: int = 0
    """``success``: the baseline's runs that grokked."""
    lowest: float = math.nan
    """``fourier``: the lowest concentration above chance over the runs of both groups."""
    expect: str = "smaller"
    """``measure``: one of EXPECTS (the group's measure against the baseline's)."""
    untestable: str = ""
    """Why the runs cannot provide the row (e.g. a measure runs.csv lacks): not tested."""
    factor: float = math.nan
    """The paper's factor on the estimate's scale (NaN: the paper gives none); see `size`."""
    family: str = ""
    """The Holm family the row is adjusted in (`adjust`): rows of one family share one Holm
    adjustment, and a row never shares it with another family's rows."""

    @property
    def n(self) -> int:
        """The smaller group's n (the one the n rules bind)."""
        return self.n_group if self.kind == "precedes" else min(self.n_group, self.n_baseline)


@dataclass(frozen=True)
class Verdict:
    """A verdict (one of VERDICTS) and its reason for the table's notes."""

    verdict: str
    reason: str


# ---------------------------------------------------------------- tests the rules name


def fisher_p(k_group: int, n_group: int, k_baseline: int, n_baseline: int) -> float:
    """Two-sided Fisher exact p that the two success rates differ (every table at most as
    probable as the observed one; the direction is read from the rates, as the directional
    rule reads it from the point estimate)."""
    table = [[k_group, n_group - k_group], [k_baseline, n_baseline - k_baseline]]
    return float(sps.fisher_exact(table, alternative="two-sided").pvalue)


def sign_test_p(k_positive: int, n: int) -> float:
    """One-sided sign test p: k of n per-run gaps positive, under P(positive) = 1/2."""
    if n == 0:
        return math.nan
    return float(sps.binomtest(k_positive, n, 0.5, alternative="greater").pvalue)


def mann_whitney_p(x: Values, y: Values) -> float:
    """Exact two-sided Mann-Whitney p, ties included: the permutation distribution of the
    rank sum of `x` (midranks) counted over every split of the pooled runs, then twice the
    smaller tail (scipy's convention). Written here because scipy's 'exact' method ignores
    ties (grok-grid measures tie) and its permutation method takes seconds for 10 vs 10."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size == 0 or y.size == 0:
        return math.nan
    ranks = sps.rankdata(np.r_[x, y])
    scores = np.rint(2 * ranks).astype(int)  # midranks are halves: integers when doubled
    observed = int(scores[: x.size].sum())
    counts = _subset_sum_counts(scores, x.size)
    total = sum(counts.values())
    low = sum(c for s, c in counts.items() if s <= observed)
    high = sum(c for s, c in counts.items() if s >= observed)
    return min(1.0, 2 * min(low, high) / total)


def _subset_sum_counts(scores: np.ndarray, size: int) -> dict[int, int]:
    """{sum: how many subsets of `size` scores have it} (exact integers, dynamic programming)."""
    ways: list[dict[int, int]] = [{0: 1}] + [{} for _ in range(size)]
    for score in scores.tolist():
        for k in range(size, 0, -1):
            for s, c in ways[k - 1].items():
                ways[k][s + score] = ways[k].get(s + score, 0) + c
    return ways[size]


# ---------------------------------------------------------------- rows


RATE_KINDS = ("success", "fails")
"""Kinds judged on the two success rates (Fisher's test), not on the grok step."""


def from_table(group: Mapping[Any, Any], baseline: Mapping[Any, Any], kind: str) -> Row:
    """The Row of a group's line of sweepgrok's comparison table (`comparisons.analysis_table`:
    n, n_grokked, km_median, speedup, speedup_lo/_hi, speedup_bound, p, p_holm) and its
    baseline's line. For ``success`` and ``fails`` the p is the Fisher p of the two success
    counts; the table's p_holm (over its own table only) is not carried: the report adjusts
    over itself."""
    n, nb = int(group["n"]), int(baseline["n"])
    k, kb = int(group["n_grokked"]), int(baseline["n_grokked"])
    p = fisher_p(k, n, kb, nb) if kind in RATE_KINDS else float(group.get("p", math.nan))
    return Row(
        kind=kind,
        n_group=n,
        n_baseline=nb,
        estimate=float(group["speedup"]),
        lo=float(group.get("speedup_lo", math.nan)),
        hi=float(group.get("speedup_hi", math.nan)),
        p=p,
        baseline_censored=bool(np.isnan(float(baseline["km_median"]))),
        group_censored=bool(np.isnan(float(group["km_median"]))),
        bound=float(group.get("speedup_bound", math.nan)),
        k_group=k,
        k_baseline=kb,
    )


def measure_row(
    baseline: Values,
    group: Values,
    kind: str = "measure",
    *,
    expect: str = "smaller",
    lowest: float = math.nan,
    seed: int = 0,
) -> Row:
    """A ``measure`` or ``fourier`` Row from per-run values (NaN: the measure does not exist in
    that run, left out): baseline median / group median with the seeded bootstrap CI of
    sweepgrok's speed-up (no run censored), and `mann_whitney_p`."""
    b, g = _present(baseline), _present(group)
    ratio, lo, hi = speedup(b, np.zeros(b.size, bool), g, np.zeros(g.size, bool), seed=seed)
    return Row(
        kind=kind,
        n_group=g.size,
        n_baseline=b.size,
        estimate=ratio,
        lo=lo,
        hi=hi,
        p=mann_whitney_p(g, b),
        lowest=lowest,
        expect=expect,
    )


def precedes_row(gaps: Values) -> Row:
    """A ``precedes`` Row from per-run gaps (later event - earlier event; NaN: a run without
    both events, left out): k positive of n, the median gap, the sign test p."""
    d = _present(gaps)
    k = int((d > 0).sum())
    median = float(np.median(d)) if d.size else math.nan
    p = sign_test_p(k, d.size)
    return Row(kind="precedes", n_group=d.size, estimate=median, p=p, k_group=k)


def _present(values: Values) -> np.ndarray:
    v = np.asarray(values, float)
    return v[~np.isnan(v)]


# ---------------------------------------------------------------- verdicts


def untested_reason(row: Row) -> str | None:
    """Why the runs cannot test the row's claim, or None when they can."""
    if row.untestable:
        return row.untestable
    if row.n < N_TESTABLE:
        return f"n = {row.n} < {N_TESTABLE}"
    if row.kind == "success":
        if row.k_baseline == row.n_baseline and row.k_group == row.n_group:
            return "every run of both groups grokked: no failure to remove"
        return None
    if row.kind == "fails":
        return "the baseline does not grok within the budget" if row.k_baseline == 0 else None
    if row.kind == "precedes":
        return None
    if row.kind == "slower" and row.baseline_censored:
        return "the baseline does not grok within the budget"
    if math.isnan(row.estimate):
        return "both medians beyond the runs"
    if row.kind == "fourier" and math.isnan(row.lowest):
        return "no concentration recorded"
    return None


def is_tested(row: Row) -> bool:
    """Whether the row joins its Holm family (testable, with a p)."""
    return untested_reason(row) is None and not math.isnan(row.p)


def adjust(rows: Sequence[Row]) -> list[Row]:
    """The rows with p_holm set: Holm over the tested rows (`is_tested`) of each family
    (`Row.family`) separately; the other rows get p_holm NaN."""
    out = [replace(r, p_holm=math.nan) for r in rows]
    for family in dict.fromkeys(r.family for r in rows):
        tested = [i for i, r in enumerate(rows) if r.family == family and is_tested(r)]
        for i, p in zip(tested, holm([rows[i].p for i in tested]), strict=True):
            out[i] = replace(rows[i], p_holm=float(p))
    return out


def family_sizes(rows: Sequence[Row]) -> dict[str, int]:
    """{family: how many of its rows are tested}: the m of each family's Holm adjustment."""
    sizes = {r.family: 0 for r in rows}
    for r in rows:
        sizes[r.family] += is_tested(r)
    return sizes


def verdict(row: Row) -> Verdict:
    """The row's verdict by the rules (module docstring); row.p_holm must be set."""
    if row.kind not in KINDS:
        raise ValueError(f"unknown kind {row.kind!r}; allowed: {', '.join(KINDS)}")
    why = untested_reason(row)
    if why is not None:
        return Verdict(NOT_TESTED, why)
    if row.kind == "faster":
        return _directional(row, above=True)
    if row.kind == "slower":
        return _directional(row, above=False)
    if row.kind == "equal":
        return _equivalence(row)
    if row.kind == "success":
        return _success(row)
    if row.kind == "fails":
        return _fails(row)
    if row.kind == "precedes":
        return _precedes(row)
    if row.kind == "fourier":
        return _fourier(row)
    return _measure(row)


def _num(x: float) -> str:
    return f"{x:.3g}"


def _p_text(row: Row) -> str:
    return f"p Holm = {row.p_holm:.2g}" if not math.isnan(row.p_holm) else "no p"


def _significant(row: Row) -> bool:
    return row.p_holm < ALPHA  # NaN compares False


def _n_short(row: Row) -> str | None:
    return None if row.n >= N_MIN else f"n = {row.n} < {N_MIN}"


def _ci(row: Row) -> str:
    # Four digits: a CI end of 1.001 must not print as 1 beside "not above 1".
    return f"CI [{row.lo:.4g}, {row.hi:.4g}]"


def size(row: Row) -> str:
    """One of SIZES: whether the paper's factor lies inside the row's CI (closed). A bound
    (one median censored) never matches: 'no' when the bound already passes the factor,
    'unknown' when it does not reach it."""
    if math.isnan(row.factor):
        return SIZE_NONE
    if row.baseline_censored != row.group_censored:
        past = row.bound > row.factor if row.baseline_censored else row.bound < row.factor
        return SIZE_NO if past else SIZE_UNKNOWN
    if math.isnan(row.lo) or math.isnan(row.hi):
        return SIZE_UNKNOWN
    return SIZE_YES if row.lo <= row.factor <= row.hi else SIZE_NO


def _with_size(row: Row, reason: str) -> Verdict:
    """A met directional rule's verdict: the paper's size decides between the three words."""
    fits = size(row)
    if fits == SIZE_YES:
        return Verdict(REPRODUCED, f"{reason}; the paper's {_num(row.factor)}x inside {_ci(row)}")
    if fits == SIZE_NO:
        return Verdict(SIZE_NOT, f"{reason}; the paper's {_num(row.factor)}x outside {_ci(row)}")
    return Verdict(DIRECTION_REPRODUCED, reason)


def _directional(row: Row, *, above: bool) -> Verdict:
    def paper_side(x: float) -> bool:
        return x > 1 if above else x < 1

    def other_side(x: float) -> bool:
        return x < 1 if above else x > 1

    side = "above 1" if above else "below 1"
    enough = row.n >= N_MIN and _significant(row)
    ci_paper = paper_side(row.lo) and paper_side(row.hi)
    ci_other = other_side(row.lo) and other_side(row.hi)
    if enough and paper_side(row.estimate) and ci_paper:
        return _with_size(row, _p_text(row))
    if enough and other_side(row.estimate) and ci_other:
        return Verdict(CONTRADICTED, f"{_p_text(row)}; {_ci(row)} not {side}")
    if paper_side(row.estimate):
        unmet = [_n_short(row), None if _significant(row) else _p_text(row)]
        if not ci_paper:
            unmet.append(f"{_ci(row)} not {side}")
        return Verdict(DIRECTION_ONLY, "; ".join(u for u in unmet if u))
    return Verdict(NOT_IN_DIRECTION, f"estimate {_num(row.estimate)}, not {side}")


def _inside(x: float) -> bool:
    lo, hi = EQUIVALENCE_MARGIN
    return lo < x < hi


def _side_of_one(row: Row) -> str:
    """'' or, when the whole CI lies on one side of 1, what the data say beside the margin
    (an equivalence met with every resample slower is still a slower group, said so)."""
    if not (row.hi < 1 or row.lo > 1):
        return ""
    below = row.hi < 1  # baseline / group < 1: the group's median is the larger
    if row.kind == "equal":
        what = "the group groks slower" if below else "the group groks faster"
    else:
        what = "the group's median larger" if below else "the group's median smaller"
    return f"; the whole CI {'below' if below else 'above'} 1: {what}"


def _equivalence(row: Row) -> Verdict:
    lo, hi = EQUIVALENCE_MARGIN
    margin = f"({lo}, {hi})"
    if row.n >= N_MIN and _inside(row.lo) and _inside(row.hi):
        return Verdict(REPRODUCED, f"{_ci(row)} inside {margin}{_side_of_one(row)}")
    beyond = row.lo > hi or row.hi < lo
    if row.n >= N_MIN and _significant(row) and beyond:
        return Verdict(CONTRADICTED, f"{_p_text(row)}; {_ci(row)} outside {margin}")
    if _inside(row.estimate):
        unmet = [_n_short(row)]
        if not (_inside(row.lo) and _inside(row.hi)):
            unmet.append(f"{_ci(row)} not inside {margin}")
        return Verdict(DIRECTION_ONLY, "; ".join(u for u in unmet if u) + _side_of_one(row))
    return Verdict(NOT_IN_DIRECTION, f"estimate {_num(row.estimate)} outside {margin}")


def _success(row: Row) -> Verdict:
    rate, base_rate = row.k_group / row.n_group, row.k_baseline / row.n_baseline
    every = row.k_group == row.n_group
    rates = f"{row.k_group}/{row.n_group} vs {row.k_baseline}/{row.n_baseline}"
    enough = row.n >= N_MIN and _significant(row)
    if enough and every and rate > base_rate:
        return Verdict(REPRODUCED, _p_text(row))
    below = (
        f"the group fails where the baseline succeeds: {rates}"
        if row.k_baseline == row.n_baseline
        else f"{rates}: below the baseline's rate"
    )
    if enough and rate < base_rate:
        return Verdict(CONTRADICTED, f"{_p_text(row)}; {below}")
    if rate > base_rate:
        unmet = [_n_short(row), None if _significant(row) else _p_text(row)]
        if not every:
            unmet.append(f"{row.k_group}/{row.n_group} grokked")
        return Verdict(DIRECTION_ONLY, "; ".join(u for u in unmet if u))
    if rate < base_rate:
        return Verdict(NOT_IN_DIRECTION, f"{below}; {_p_text(row)}")
    return Verdict(NOT_IN_DIRECTION, f"{rates}: not above the baseline's rate")


def _fails(row: Row) -> Verdict:
    """A negative success-rate claim (module docstring): one grokking run of the group is
    against it; the baseline groks (else not tested), so a group without one is below it."""
    rates = f"{row.k_group}/{row.n_group} vs {row.k_baseline}/{row.n_baseline}"
    enough = row.n >= N_MIN and _significant(row)
    if row.k_group == 0:
        if enough:
            return Verdict(REPRODUCED, f"{_p_text(row)}; {rates}")
        unmet = [_n_short(row), None if _significant(row) else _p_text(row)]
        return Verdict(DIRECTION_ONLY, "; ".join(u for u in unmet if u))
    if enough and row.k_group / row.n_group > row.k_baseline / row.n_baseline:
        return Verdict(CONTRADICTED, f"{_p_text(row)}; {rates}: above the baseline's rate")
    grokked = f"{row.k_group}/{row.n_group} grokked where the claim says the group fails"
    return Verdict(NOT_IN_DIRECTION, f"{grokked} ({rates}); {_p_text(row)}")


def _precedes(row: Row) -> Verdict:
    in_order = 2 * row.k_group > row.n_group
    if row.n >= N_MIN and _significant(row) and in_order:
        return Verdict(REPRODUCED, _p_text(row))
    if in_order:
        unmet = [_n_short(row), None if _significant(row) else _p_text(row)]
        return Verdict(DIRECTION_ONLY, "; ".join(u for u in unmet if u))
    return Verdict(NOT_IN_DIRECTION, f"{row.k_group} of {row.n_group} runs in order")


def _measure(row: Row) -> Verdict:
    if row.expect == "equal":
        return _equivalence(row)
    if row.expect not in EXPECTS:
        raise ValueError(f"unknown expect {row.expect!r}; allowed: {', '.join(EXPECTS)}")
    # The estimate is baseline / group: a smaller group measure is a ratio above 1.
    return _directional(row, above=row.expect == "smaller")


FOURIER_TESTED = "tested: concentration above chance, not which frequencies"
"""What a ``fourier`` verdict says it tested: the measure is how concentrated each run's
unembedding is on its top frequencies, not whether two groups use the same ones."""


def _fourier(row: Row) -> Verdict:
    eq = _equivalence(row)
    if row.lowest >= FOURIER_MIN or eq.verdict not in (REPRODUCED, DIRECTION_ONLY):
        return Verdict(eq.verdict, f"{FOURIER_TESTED}; {eq.reason}")
    floor = f"lowest concentration {row.lowest:.2f} < {FOURIER_MIN}"
    reason = floor if eq.verdict == REPRODUCED or not eq.reason else f"{eq.reason}; {floor}"
    return Verdict(DIRECTION_ONLY, f"{FOURIER_TESTED}; {reason}")
