"""analysis.verdicts: every branch of every kind of the report's verdict rules (version 4), on
hand-built rows, with the boundaries the rules draw (n 8 vs 7, p Holm 0.05, a CI touching 1 or
the margin, a point estimate outside its own CI, the paper's factor on a CI end, a group that
fails where the baseline succeeds), and the p-values of the tests the rules name against
hand-computed values."""

from __future__ import annotations

import math
from dataclasses import replace
from math import comb, inf, nan

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from analysis import verdicts
from analysis.verdicts import (
    CONTRADICTED,
    DIRECTION_ONLY,
    DIRECTION_REPRODUCED,
    NOT_IN_DIRECTION,
    NOT_TESTED,
    REPRODUCED,
    SIZE_NOT,
    Row,
    verdict,
)
from sweepgrok.analysis import comparisons


def row(kind: str = "faster", **kw) -> Row:
    """A row with 8 runs per group and a significant test; `kw` overrides."""
    base = {"n_group": 8, "n_baseline": 8, "p": 0.001, "p_holm": 0.001}
    return Row(kind, **(base | kw))


def test_the_vocabulary_is_the_rules_words() -> None:
    assert verdicts.VERDICTS == (
        "reproduced",
        "direction reproduced",
        "direction reproduced, size not",
        "contradicted",
        "on the paper's side, not shown",
        "not in the paper's direction",
        "not tested",
    )
    assert verdicts.EQUIVALENCE_MARGIN == (0.8, 1.25)


# ---------------------------------------------------------------- directional: faster


def test_faster_reproduced_needs_n_p_and_the_whole_ci_above_one() -> None:
    v = verdict(row(estimate=2.0, lo=1.5, hi=3.0, p_holm=0.01))
    assert v == verdicts.Verdict(DIRECTION_REPRODUCED, "p Holm = 0.01")


def test_faster_with_seven_runs_is_direction_only() -> None:
    assert verdict(row(estimate=2.0, lo=1.5, hi=3.0, n_group=7)) == verdicts.Verdict(
        DIRECTION_ONLY, "n = 7 < 8"
    )
    assert verdict(row(estimate=2.0, lo=1.5, hi=3.0, n_baseline=7)).reason == "n = 7 < 8"


def test_p_holm_of_exactly_005_is_not_below_005() -> None:
    v = verdict(row(estimate=2.0, lo=1.5, hi=3.0, p_holm=0.05))
    assert v == verdicts.Verdict(DIRECTION_ONLY, "p Holm = 0.05")
    assert verdict(row(estimate=2.0, lo=1.5, hi=3.0, p_holm=0.0499)).verdict == (
        DIRECTION_REPRODUCED
    )


def test_a_ci_touching_one_is_not_on_the_papers_side() -> None:
    v = verdict(row(estimate=2.0, lo=1.0, hi=3.0))
    assert v == verdicts.Verdict(DIRECTION_ONLY, "CI [1, 3] not above 1")


def test_an_estimate_off_the_papers_side_is_not_reproduced_whatever_its_ci() -> None:
    """0.95 with a significant CI [1.01, 1.5] (a percentile bootstrap can lie beside its
    estimate): the estimate is below 1, so not in the paper's direction; not contradicted
    either (the CI is above 1)."""
    v = verdict(row(estimate=0.95, lo=1.01, hi=1.5, p_holm=0.001, factor=22))
    assert v == verdicts.Verdict(NOT_IN_DIRECTION, "estimate 0.95, not above 1")
    v = verdict(row("slower", estimate=1.05, lo=0.5, hi=0.99))
    assert v == verdicts.Verdict(NOT_IN_DIRECTION, "estimate 1.05, not below 1")


def test_a_tiny_significant_speedup_is_the_direction_not_the_papers_size() -> None:
    """1.02x [1.001, 1.04], p Holm 0.001, 8 runs each: the direction is reproduced; against
    the paper's 22x the size is not; with no factor in the paper the size is not compared."""
    tiny = {"estimate": 1.02, "lo": 1.001, "hi": 1.04}
    v = verdict(row(factor=22, **tiny))
    assert v == verdicts.Verdict(
        SIZE_NOT, "p Holm = 0.001; the paper's 22x outside CI [1.001, 1.04]"
    )
    assert verdicts.size(row(factor=22, **tiny)) == "no"
    assert verdict(row(**tiny)) == verdicts.Verdict(DIRECTION_REPRODUCED, "p Holm = 0.001")
    assert verdicts.size(row(**tiny)) == "-"


def test_size_reads_the_papers_factor_against_the_closed_ci() -> None:
    """3.57x [2.39, 4.14] against 52x: size not; against 4.14 (the CI's end): reproduced."""
    ours = {"estimate": 3.57, "lo": 2.39, "hi": 4.14}
    assert verdict(row(factor=52, **ours)).verdict == SIZE_NOT
    v = verdict(row(factor=4.14, **ours))
    assert v == verdicts.Verdict(
        REPRODUCED, "p Holm = 0.001; the paper's 4.14x inside CI [2.39, 4.14]"
    )
    assert verdicts.size(row(factor=2.39, **ours)) == "yes"
    assert verdicts.size(row(factor=2.38, **ours)) == "no"
    # Not significant: the size column still reads the CI, the verdict stays below reproduced.
    assert verdicts.size(row(factor=3, p_holm=0.2, **ours)) == "yes"
    assert verdict(row(factor=3, p_holm=0.2, **ours)).verdict == DIRECTION_ONLY


def test_a_bound_never_matches_the_papers_factor() -> None:
    """A censored baseline: '> 5x' cannot place a 22x factor (unknown), '> 30x' is past it."""
    censored = {"estimate": inf, "lo": 3.0, "hi": inf, "baseline_censored": True}
    assert verdicts.size(row(bound=5.0, factor=22, **censored)) == "unknown"
    assert verdict(row(bound=5.0, factor=22, **censored)).verdict == DIRECTION_REPRODUCED
    assert verdicts.size(row(bound=30.0, factor=22, **censored)) == "no"
    assert verdict(row(bound=30.0, factor=22, **censored)).verdict == SIZE_NOT
    group_censored = {"estimate": 0.0, "lo": 0.0, "hi": 0.2, "group_censored": True}
    assert verdicts.size(row("slower", bound=0.1, factor=0.5, **group_censored)) == "no"
    assert verdicts.size(row("slower", bound=0.6, factor=0.5, **group_censored)) == "unknown"


def test_direction_only_lists_every_unmet_condition() -> None:
    v = verdict(row(estimate=2.0, lo=0.5, hi=3.0, n_group=3, p_holm=0.21))
    unmet = "n = 3 < 8; p Holm = 0.21; CI [0.5, 3] not above 1"
    assert v == verdicts.Verdict(DIRECTION_ONLY, unmet)
    assert verdict(row(estimate=2.0, lo=1.5, hi=3.0, p_holm=nan)).reason == "no p"


def test_faster_contradicted_needs_the_whole_ci_below_one_and_p() -> None:
    v = verdict(row(estimate=0.4, lo=0.2, hi=0.6, p_holm=0.01))
    assert v == verdicts.Verdict(CONTRADICTED, "p Holm = 0.01; CI [0.2, 0.6] not above 1")
    assert verdict(row(estimate=0.4, lo=0.2, hi=0.6, p_holm=0.2)).verdict == NOT_IN_DIRECTION
    assert verdict(row(estimate=0.4, lo=0.2, hi=1.0)).verdict == NOT_IN_DIRECTION  # touches 1
    assert verdict(row(estimate=0.4, lo=0.2, hi=0.6, n_group=7)).verdict == NOT_IN_DIRECTION


def test_a_speedup_of_exactly_one_is_not_in_the_papers_direction() -> None:
    v = verdict(row(estimate=1.0, lo=0.8, hi=1.2, p_holm=0.5))
    assert v == verdicts.Verdict(NOT_IN_DIRECTION, "estimate 1, not above 1")


def test_faster_not_tested_with_one_run_or_no_median() -> None:
    assert verdict(row(estimate=2.0, n_group=1)) == verdicts.Verdict(NOT_TESTED, "n = 1 < 2")
    assert verdict(row(estimate=nan)) == verdicts.Verdict(
        NOT_TESTED, "both medians beyond the runs"
    )
    assert verdict(row(estimate=2.0, untestable="no x")) == verdicts.Verdict(NOT_TESTED, "no x")


def test_a_censored_baseline_is_judged_on_the_direction() -> None:
    censored = {"estimate": inf, "bound": 5.0, "baseline_censored": True}
    assert verdict(row(lo=3.0, hi=inf, **censored)).verdict == DIRECTION_REPRODUCED
    assert verdict(row(lo=0.9, hi=inf, **censored)).verdict == DIRECTION_ONLY


# ---------------------------------------------------------------- directional: slower


def test_slower_is_judged_below_one() -> None:
    assert verdict(row("slower", estimate=0.0, lo=0.0, hi=0.0, group_censored=True)) == (
        verdicts.Verdict(DIRECTION_REPRODUCED, "p Holm = 0.001")
    )
    v = verdict(row("slower", estimate=0.5, lo=0.3, hi=1.0))
    assert v == verdicts.Verdict(DIRECTION_ONLY, "CI [0.3, 1] not below 1")
    assert verdict(row("slower", estimate=2.0, lo=1.5, hi=3.0)).verdict == CONTRADICTED
    v = verdict(row("slower", estimate=1.5, lo=0.9, hi=3.0))
    assert v == verdicts.Verdict(NOT_IN_DIRECTION, "estimate 1.5, not below 1")


def test_slower_is_not_tested_when_the_baseline_does_not_grok() -> None:
    v = verdict(row("slower", estimate=inf, lo=inf, hi=inf, baseline_censored=True))
    assert v == verdicts.Verdict(NOT_TESTED, "the baseline does not grok within the budget")


# ---------------------------------------------------------------- equivalence


def test_equal_reproduced_with_the_ci_strictly_inside_the_margin_and_no_p() -> None:
    v = verdict(row("equal", estimate=1.0, lo=0.81, hi=1.24, p_holm=0.9))
    assert v == verdicts.Verdict(REPRODUCED, "CI [0.81, 1.24] inside (0.8, 1.25)")


@pytest.mark.parametrize(("lo", "hi"), [(0.8, 1.1), (0.9, 1.25), (0.8, 1.25)])
def test_a_ci_exactly_on_the_margin_is_not_inside(lo: float, hi: float) -> None:
    """Open margins: an end at 0.8 or 1.25 is not inside, and not beyond it either."""
    v = verdict(row("equal", estimate=1.0, lo=lo, hi=hi, p_holm=0.9))
    expected = f"CI [{lo:.3g}, {hi:.3g}] not inside (0.8, 1.25)"
    assert v == verdicts.Verdict(DIRECTION_ONLY, expected)
    assert verdict(row("equal", estimate=0.8, lo=0.7, hi=0.9)) == verdicts.Verdict(
        NOT_IN_DIRECTION, "estimate 0.8 outside (0.8, 1.25)"
    )


def test_equal_direction_only_below_eight_runs_or_with_a_wide_ci() -> None:
    assert verdict(row("equal", estimate=1.0, lo=0.9, hi=1.1, n_group=7)) == verdicts.Verdict(
        DIRECTION_ONLY, "n = 7 < 8"
    )
    v = verdict(row("equal", estimate=1.0, lo=0.79, hi=1.1))
    assert v == verdicts.Verdict(DIRECTION_ONLY, "CI [0.79, 1.1] not inside (0.8, 1.25)")
    assert verdict(row("equal", estimate=1.24, lo=0.9, hi=1.6)).verdict == DIRECTION_ONLY
    assert verdict(row("equal", estimate=1.25, lo=0.9, hi=1.6)).verdict == NOT_IN_DIRECTION


def test_a_non_significant_difference_is_never_equality() -> None:
    v = verdict(row("equal", estimate=0.77, lo=0.57, hi=1.89, n_group=3, p_holm=1.0))
    assert v == verdicts.Verdict(NOT_IN_DIRECTION, "estimate 0.77 outside (0.8, 1.25)")


def test_equal_contradicted_needs_the_whole_ci_strictly_outside_and_p() -> None:
    assert verdict(row("equal", estimate=1.5, lo=1.3, hi=2.0)).verdict == CONTRADICTED
    assert verdict(row("equal", estimate=0.5, lo=0.3, hi=0.7)).verdict == CONTRADICTED
    assert verdict(row("equal", estimate=1.5, lo=1.25, hi=2.0)).verdict == NOT_IN_DIRECTION
    assert verdict(row("equal", estimate=1.5, lo=1.3, hi=2.0, p_holm=0.05)).verdict == (
        NOT_IN_DIRECTION
    )
    assert verdict(row("equal", estimate=inf, lo=inf, hi=inf, baseline_censored=True)).verdict == (
        CONTRADICTED
    )


def test_an_equivalence_with_its_whole_ci_on_one_side_of_one_says_so() -> None:
    """d* 64 at t_s 2000: CI [0.807, 0.923] inside the margin but below 1, the group slower;
    a CI spanning 1 adds nothing; a measure's ratio names the group's median (v4)."""
    v = verdict(row("equal", estimate=0.87, lo=0.807, hi=0.9231))
    slower = "the whole CI below 1: the group groks slower"
    assert v == verdicts.Verdict(REPRODUCED, f"CI [0.807, 0.9231] inside (0.8, 1.25); {slower}")
    v = verdict(row("equal", estimate=1.1, lo=1.05, hi=1.3))
    faster = "the whole CI above 1: the group groks faster"
    assert v == verdicts.Verdict(DIRECTION_ONLY, f"CI [1.05, 1.3] not inside (0.8, 1.25); {faster}")
    assert verdict(row("equal", estimate=1.0, lo=0.9, hi=1.1)).reason == (
        "CI [0.9, 1.1] inside (0.8, 1.25)"
    )
    v = verdict(row("measure", expect="equal", estimate=0.9, lo=0.85, hi=0.95))
    assert v.reason.endswith("; the whole CI below 1: the group's median larger")


def test_equal_not_tested() -> None:
    assert verdict(row("equal", estimate=nan)).verdict == NOT_TESTED
    assert verdict(row("equal", estimate=1.0, n_baseline=0)).reason == "n = 0 < 2"


# ---------------------------------------------------------------- success rates


def test_fisher_p_against_hand_computed_hypergeometric_tails() -> None:
    """Two-sided: the probabilities of every table at most as probable as the observed one,
    X ~ Hypergeom(16 runs, K successes, 8 drawn into the group)."""
    # 8/8 against 4/8: K = 12, X in 4..8 with weights 495, 3168, 5544, 3168, 495 (of 12,870);
    # X = 8 and X = 4 are the two tables as probable as the observed one.
    assert comb(12, 8) * comb(4, 0) == comb(12, 4) * comb(4, 4) == 495
    assert verdicts.fisher_p(8, 8, 4, 8) == pytest.approx(2 * 495 / comb(16, 8))
    assert verdicts.fisher_p(8, 8, 0, 8) == pytest.approx(2 / comb(16, 8))
    assert verdicts.fisher_p(0, 8, 8, 8) == pytest.approx(2 / comb(16, 8))
    # 7/8 against 8/8: K = 15, P(X = 7) = P(X = 8) = 6,435 / 12,870: p = 1.
    assert verdicts.fisher_p(7, 8, 8, 8) == pytest.approx(1.0)
    # 7/8 against 2/8: K = 9, X in 1..8; tables as improbable as X = 7 (weight 252): X = 7, 8
    # (252, 9) and X = 1, 2 (9, 252).
    assert [comb(9, x) * comb(7, 8 - x) for x in (1, 2, 7, 8)] == [9, 252, 252, 9]
    assert verdicts.fisher_p(7, 8, 2, 8) == pytest.approx(2 * (252 + 9) / comb(16, 8))


def success(k: int, kb: int, n: int = 8, nb: int = 8, **kw) -> Row:
    p = verdicts.fisher_p(k, n, kb, nb)
    return row("success", n_group=n, n_baseline=nb, k_group=k, k_baseline=kb, p=p, **kw)


def test_success_not_tested_only_when_every_run_of_both_groups_succeeds() -> None:
    v = verdict(success(8, 8, p_holm=1.0))
    assert v == verdicts.Verdict(
        NOT_TESTED, "every run of both groups grokked: no failure to remove"
    )
    assert not verdicts.is_tested(success(8, 8))


def test_a_group_failing_where_the_baseline_succeeds_is_reported() -> None:
    """7/8 against 8/8: p = 1 (hand-computed above), so not in the paper's direction, named;
    0/8 against 8/8: p = 2 / 12,870, contradicted."""
    seven = success(7, 8)
    assert seven.p == pytest.approx(1.0) and verdicts.is_tested(seven)
    v = verdict(verdicts.adjust([seven])[0])
    fails = "the group fails where the baseline succeeds"
    assert v == verdicts.Verdict(NOT_IN_DIRECTION, f"{fails}: 7/8 vs 8/8; p Holm = 1")
    none = verdicts.adjust([success(0, 8)])[0]
    assert none.p_holm == pytest.approx(2 / 12870)
    assert verdict(none) == verdicts.Verdict(CONTRADICTED, f"p Holm = 0.00016; {fails}: 0/8 vs 8/8")
    short = verdicts.adjust([success(0, 8, n=7)])[0]  # 7 runs: not enough to contradict
    assert verdict(short).verdict == NOT_IN_DIRECTION


def test_success_reproduced_needs_every_group_run_n_and_p() -> None:
    assert verdict(success(8, 2, p_holm=0.003)).verdict == REPRODUCED
    v = verdict(success(7, 2, p_holm=0.02))
    assert v == verdicts.Verdict(DIRECTION_ONLY, "7/8 grokked")
    v = verdict(success(7, 2, n=7, p_holm=0.02))
    assert v == verdicts.Verdict(DIRECTION_ONLY, "n = 7 < 8")
    assert verdict(success(8, 6, p_holm=0.23)).reason == "p Holm = 0.23"


def test_success_not_in_the_papers_direction() -> None:
    v = verdict(success(4, 5, p_holm=0.9))
    reason = "4/8 vs 5/8: below the baseline's rate; p Holm = 0.9"
    assert v == verdicts.Verdict(NOT_IN_DIRECTION, reason)
    v = verdict(success(5, 5, p_holm=0.9))
    assert v == verdicts.Verdict(NOT_IN_DIRECTION, "5/8 vs 5/8: not above the baseline's rate")


def fails(k: int, kb: int, n: int = 8, nb: int = 8, **kw) -> Row:
    p = verdicts.fisher_p(k, n, kb, nb)
    return row("fails", n_group=n, n_baseline=nb, k_group=k, k_baseline=kb, p=p, **kw)


def test_a_failure_claim_is_against_any_grokking_run_of_the_group() -> None:
    """S5 v3: the sphere grokked 3/8 where LayerNorm grokked 5/8: a lower rate, but a grok
    refutes 'fails' (a run without one is only censored), so not in the paper's direction."""
    v = verdict(fails(3, 5, p_holm=1.0))
    reason = "3/8 grokked where the claim says the group fails (3/8 vs 5/8); p Holm = 1"
    assert v == verdicts.Verdict(NOT_IN_DIRECTION, reason)
    assert verdict(fails(1, 8, p_holm=0.01)).verdict == NOT_IN_DIRECTION


def test_a_failure_claim_reproduced_needs_no_group_grok_n_and_p() -> None:
    """0/8 against 8/8: Fisher p = 2 / 12,870 (hand-computed above)."""
    none = verdicts.adjust([fails(0, 8)])[0]
    assert none.p_holm == pytest.approx(2 / 12870)
    assert verdict(none) == verdicts.Verdict(REPRODUCED, "p Holm = 0.00016; 0/8 vs 8/8")
    assert verdict(fails(0, 8, n=7)) == verdicts.Verdict(DIRECTION_ONLY, "n = 7 < 8")
    assert verdict(fails(0, 2, p_holm=0.47)) == verdicts.Verdict(DIRECTION_ONLY, "p Holm = 0.47")


def test_a_failure_claim_contradicted_and_not_tested() -> None:
    v = verdict(fails(8, 2, p_holm=0.001))
    above = "8/8 vs 2/8: above the baseline's rate"
    assert v == verdicts.Verdict(CONTRADICTED, f"p Holm = 0.001; {above}")
    assert verdict(fails(7, 2, n=7, p_holm=0.001)).verdict == NOT_IN_DIRECTION
    untested = fails(3, 0)
    assert verdict(untested) == verdicts.Verdict(
        NOT_TESTED, "the baseline does not grok within the budget"
    )
    assert not verdicts.is_tested(untested)
    assert verdict(fails(0, 8, n=1)).verdict == NOT_TESTED


# ---------------------------------------------------------------- per-run measures


def test_mann_whitney_p_is_exact_with_and_without_ties() -> None:
    assert verdicts.mann_whitney_p([1, 2, 3], [4, 5, 6]) == pytest.approx(2 / comb(6, 3))
    x, y = [1.0, 5.0, 3.0, 8.0], [4.0, 2.0, 6.0, 7.0, 9.0]
    assert verdicts.mann_whitney_p(x, y) == pytest.approx(
        sps.mannwhitneyu(x, y, method="exact").pvalue
    )
    tied = ([1, 2, 2, 3], [2, 4, 5, 5, 6])
    every_split = sps.PermutationMethod(n_resamples=np.inf)
    assert verdicts.mann_whitney_p(*tied) == pytest.approx(
        sps.mannwhitneyu(*tied, method=every_split).pvalue
    )
    assert math.isnan(verdicts.mann_whitney_p([], [1.0]))


def test_measure_row_is_the_ratio_of_medians_without_missing_runs() -> None:
    r = verdicts.measure_row([400.0] * 8 + [nan], [100.0] * 8)
    assert (r.n_baseline, r.n_group, r.estimate, r.lo, r.hi) == (8, 8, 4.0, 4.0, 4.0)
    assert r.p == pytest.approx(2 / comb(16, 8))


@pytest.mark.parametrize(
    ("expect", "estimate", "lo", "hi", "expected"),
    [
        ("smaller", 2.0, 1.5, 3.0, DIRECTION_REPRODUCED),
        ("smaller", 0.5, 0.3, 0.7, CONTRADICTED),
        ("larger", 0.5, 0.3, 0.7, DIRECTION_REPRODUCED),
        ("larger", 2.0, 0.9, 3.0, NOT_IN_DIRECTION),
        ("equal", 1.0, 0.9, 1.1, REPRODUCED),
        ("equal", 1.0, 0.5, 1.1, DIRECTION_ONLY),
    ],
)
def test_a_measure_takes_the_rule_of_what_it_expects(expect, estimate, lo, hi, expected) -> None:
    r = row("measure", expect=expect, estimate=estimate, lo=lo, hi=hi)
    assert verdict(r).verdict == expected


def test_an_unknown_expectation_or_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="expect"):
        verdict(row("measure", expect="sooner", estimate=2.0, lo=1.5, hi=3.0))
    with pytest.raises(ValueError, match="kind"):
        verdict(row("quicker", estimate=2.0))


# ---------------------------------------------------------------- precedes


def test_sign_test_p_against_hand_computed_binomial_tails() -> None:
    assert verdicts.sign_test_p(8, 8) == 1 / 256
    assert verdicts.sign_test_p(7, 8) == pytest.approx(9 / 256)
    assert verdicts.sign_test_p(10, 10) == pytest.approx(1 / 1024)


def test_a_tie_counts_against_precedes() -> None:
    r = verdicts.precedes_row([300.0] * 7 + [0.0, nan])
    assert (r.n_group, r.k_group, r.estimate) == (8, 7, 300.0)
    assert r.p == pytest.approx(9 / 256)


def test_precedes_branches() -> None:
    eight = verdicts.precedes_row([100.0] * 8)
    assert verdict(Row(**(eight.__dict__ | {"p_holm": eight.p}))).verdict == REPRODUCED
    seven = verdicts.precedes_row([100.0] * 7)
    v = verdict(Row(**(seven.__dict__ | {"p_holm": seven.p})))
    assert v == verdicts.Verdict(DIRECTION_ONLY, "n = 7 < 8")
    half = verdicts.precedes_row([100.0] * 4 + [-100.0] * 4)
    v = verdict(Row(**(half.__dict__ | {"p_holm": half.p})))
    assert v == verdicts.Verdict(NOT_IN_DIRECTION, "4 of 8 runs in order")
    assert verdict(verdicts.precedes_row([100.0])).verdict == NOT_TESTED


# ---------------------------------------------------------------- Fourier features


TESTED = "tested: concentration above chance, not which frequencies"


def test_fourier_needs_every_run_above_the_floor_and_the_equivalence() -> None:
    """Every Fourier verdict says it tested concentration, not the same frequencies (v4)."""
    ok = {"estimate": 1.0, "lo": 0.9, "hi": 1.1}
    v = verdict(row("fourier", lowest=0.5, **ok))
    assert v == verdicts.Verdict(REPRODUCED, f"{TESTED}; CI [0.9, 1.1] inside (0.8, 1.25)")
    v = verdict(row("fourier", lowest=0.4, **ok))
    assert v == verdicts.Verdict(DIRECTION_ONLY, f"{TESTED}; lowest concentration 0.40 < 0.5")
    v = verdict(row("fourier", lowest=0.4, n_group=7, **ok))
    assert v == verdicts.Verdict(
        DIRECTION_ONLY, f"{TESTED}; n = 7 < 8; lowest concentration 0.40 < 0.5"
    )
    v = verdict(row("fourier", lowest=0.9, estimate=2.0, lo=1.5, hi=3.0))
    assert v.verdict == CONTRADICTED and v.reason.startswith(f"{TESTED}; p Holm = ")
    v = verdict(row("fourier", lowest=nan, **ok))
    assert v == verdicts.Verdict(NOT_TESTED, "no concentration recorded")


# ---------------------------------------------------------------- a sweepgrok table row


def summary(groups: dict[str, list[float]], budget: int = 5000) -> pd.DataFrame:
    """A run summary: one run per grok step (NaN: censored at the budget)."""
    rows = [
        {
            "run_id": f"{norm}-{i}",
            "status": "completed" if math.isnan(t) else "grokked",
            "steps_run": budget if math.isnan(t) else int(t),
            "grok_step_95": t,
            "delay_95": t,
            "collapse_step": nan,
            "collapse_to_grok_95": nan,
            "model.norm": norm,
            "train.seed": i,
            "train.max_steps": budget,
        }
        for norm, times in groups.items()
        for i, t in enumerate(times)
    ]
    return pd.DataFrame(rows)


def lines(runs: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(the group's line, the baseline's line) of sweepgrok's table, LayerNorm the baseline."""
    table = comparisons.analysis_table(runs, ["model.norm"], "model.norm=layernorm", threshold=0.95)
    return table[~table["is_baseline"]].iloc[0], table[table["is_baseline"]].iloc[0]


def table_rows(runs: pd.DataFrame, kind: str) -> Row:
    group, base = lines(runs)
    return verdicts.from_table(group.to_dict(), base.to_dict(), kind)


def test_from_table_maps_a_comparison_row() -> None:
    runs = summary({"layernorm": [1000.0] * 8, "sphere": [200.0] * 6 + [nan] * 2})
    group, _base = lines(runs)
    r = table_rows(runs, "faster")
    assert (r.n_group, r.n_baseline, r.k_group, r.k_baseline) == (8, 8, 6, 8)
    # Resamples with 4 or more of the 2 censored sphere runs have no median: ratio 0.
    assert (r.estimate, r.lo, r.hi, r.bound) == (5.0, 0.0, 5.0, 5.0)
    assert r.p == group["p"] and 0 < r.p < 1 and math.isnan(r.p_holm)  # its own Holm: none
    assert not r.baseline_censored and not r.group_censored
    success_row = table_rows(runs, "success")
    assert success_row.p == pytest.approx(verdicts.fisher_p(6, 8, 8, 8))
    assert table_rows(runs, "fails").p == pytest.approx(verdicts.fisher_p(6, 8, 8, 8))


def test_from_table_flags_a_censored_baseline_and_its_bound() -> None:
    runs = summary({"layernorm": [nan] * 8, "sphere": [250.0] * 8})
    r = table_rows(runs, "faster")
    assert r.baseline_censored and not r.group_censored
    assert r.estimate == inf and r.bound == 5000 / 250
    assert verdict(verdicts.adjust([r])[0]).verdict == DIRECTION_REPRODUCED
    assert verdict(table_rows(runs, "slower")).verdict == NOT_TESTED


# ---------------------------------------------------------------- one Holm family


def test_holm_runs_over_the_tested_rows_at_once() -> None:
    rows = [
        row(estimate=2.0, lo=1.5, hi=3.0, p=0.01, p_holm=nan),
        row(estimate=2.0, lo=1.5, hi=3.0, p=0.02, p_holm=nan),
        row(estimate=2.0, lo=1.5, hi=3.0, p=0.03, p_holm=nan),
        row(estimate=2.0, n_group=1, p=0.0001, p_holm=nan),  # not tested: not in the family
        success(8, 8),  # not tested either
    ]
    adjusted = verdicts.adjust(rows)
    assert [r.p_holm for r in adjusted[:3]] == pytest.approx([0.03, 0.04, 0.04])
    assert all(math.isnan(r.p_holm) for r in adjusted[3:])
    assert [verdict(r).verdict for r in adjusted[:3]] == [DIRECTION_REPRODUCED] * 3
    # A fourth tested row makes the family larger: 0.02 and 0.03 no longer pass after Holm.
    more = verdicts.adjust([*rows[:3], row(estimate=2.0, lo=1.5, hi=3.0, p=0.5)])
    assert [verdict(r).verdict for r in more] == [DIRECTION_REPRODUCED] + [DIRECTION_ONLY] * 3
    assert [r.p_holm for r in more] == pytest.approx([0.04, 0.06, 0.06, 0.5])


def test_holm_runs_within_each_family_apart() -> None:
    """Two families, hand-computed: paper p = (0.01, 0.04) -> Holm (2 x 0.01, max(0.02,
    1 x 0.04)) = (0.02, 0.04); controls p = (0.001, 0.03, 0.2) -> (3 x 0.001, 2 x 0.03, 1 x
    0.2) = (0.003, 0.06, 0.2). Adjusted as one family of 5 (sorted 0.001, 0.01, 0.03, 0.04,
    0.2) the paper's 0.04 would be max(5 x 0.001, 4 x 0.01, 3 x 0.03, 2 x 0.04) = 0.09 and its
    verdict would not pass."""
    fast = {"estimate": 2.0, "lo": 1.5, "hi": 3.0, "p_holm": nan}
    rows = [
        row(p=0.01, family="paper", **fast),
        row(p=0.001, family="controls", **fast),
        row(p=0.04, family="paper", **fast),
        row(p=0.03, family="controls", **fast),
        row(p=0.2, family="controls", **fast),
        row(n_group=1, p=0.0001, family="paper", **fast),  # not tested: in no adjustment
    ]
    adjusted = verdicts.adjust(rows)
    assert [r.p_holm for r in adjusted[:5]] == pytest.approx([0.02, 0.003, 0.04, 0.06, 0.2])
    assert math.isnan(adjusted[5].p_holm)
    assert verdict(adjusted[2]).verdict == DIRECTION_REPRODUCED
    one = verdicts.adjust([replace(r, family="") for r in rows])
    assert one[2].p_holm == pytest.approx(0.09) and verdict(one[2]).verdict == DIRECTION_ONLY
    assert verdicts.family_sizes(adjusted) == {"paper": 2, "controls": 3}
