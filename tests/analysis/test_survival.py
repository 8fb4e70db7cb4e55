"""sweepgrok.analysis.survival against hand computations and against R's survival package.

tests/data/survival_reference_R.csv was made once with R 4.2 / survival 3.5 on the cases in
tests/data/survival_cases.csv (`quantile(survfit(...), 0.5)` per group, `survdiff(...)$chisq`);
the tests read the stored values and do not need R.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweepgrok.analysis import survival

DATA = Path(__file__).parents[1] / "data"
NONE = np.zeros(0, bool)


def km(times: list[float], censored: list[bool] | None = None) -> float:
    c = np.zeros(len(times), bool) if censored is None else np.array(censored)
    return survival.km_median(np.array(times, float), c)


def test_km_median_without_censoring_is_the_sample_median() -> None:
    assert km([500, 800]) == 650  # S = 0.5 on [500, 800): the midpoint
    assert km([100, 200, 300, 400]) == 250
    assert km([100, 200, 300]) == 200
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = rng.integers(1, 20, size=rng.integers(1, 12)) * 50.0  # ties, as on a grid
        assert km(list(x)) == np.median(x)


def test_km_median_with_ties_and_censoring_by_hand() -> None:
    # S(100) = 0.5 (two of four at 100), flat until the next event at 300: median 200.
    assert km([100, 100, 300, 300]) == 200
    # Ties never show an intermediate S: 1,2,2,3 gives S 0.75, 0.25 (not 0.5 after one 2).
    assert km([1, 2, 2, 3]) == 2
    # 500 grokked, 900 censored: S = 0.5 from 500 to the end of follow-up, median (500+900)/2.
    assert km([500, 900], [False, True]) == 700
    # 200e 400e 500c 600e 800c: S 0.8, 0.6, (500 leaves), 0.3 at 600.
    assert km([200, 400, 500, 600, 800], [False, False, True, False, True]) == 600
    # A run that can never grok stays at risk (censored at +inf): 1000..4000 and one such run.
    times = [1000, 2000, 3000, 4000, np.inf]
    assert km(times, [False] * 4 + [True]) == 3000
    assert np.isnan(km([100, 1000, 1000], [False, True, True]))


def test_vectorised_km_median_rows_match_one_at_a_time() -> None:
    rng = np.random.default_rng(7)
    times = rng.integers(1, 30, size=(300, 8)).astype(float) * 50
    censored = rng.random((300, 8)) < 0.4
    fast = survival.km_median_rows(times, censored)
    plain = [survival.km_median(t, c) for t, c in zip(times, censored, strict=True)]
    np.testing.assert_array_equal(fast, np.nan_to_num(plain, nan=np.inf))
    # Exactly half of 24 grokked: S = 0.5000000000000001 in floating point, still a flat.
    t24, c24 = np.arange(1.0, 25.0), np.arange(24) >= 12
    assert survival.km_median(t24, c24) == (12 + 24) / 2


def test_km_median_and_logrank_equal_r_survival() -> None:
    cases = pd.read_csv(DATA / "survival_cases.csv")
    ref = pd.read_csv(DATA / "survival_reference_R.csv").set_index("case")
    assert len(ref) == 80
    for case, rows in cases.groupby("case"):
        groups = [rows[rows["group"] == g] for g in (0, 1)]
        tc = [(g["time"].to_numpy(float), g["status"].to_numpy() == 0) for g in groups]
        for g, (t, c) in enumerate(tc):
            want = ref.loc[case, f"median_{g}"]
            got = survival.km_median(t, c)
            assert (np.isnan(got) and np.isnan(want)) or got == pytest.approx(want), case
        chisq = ref.loc[case, "survdiff_chisq"]
        if not np.isnan(chisq):
            test = survival.logrank(*tc[0], *tc[1], max_exact=0, n_permutations=10)
            assert test.chi2 == pytest.approx(chisq, rel=1e-9, abs=1e-12), case


def test_logrank_asymptotic_equals_scipy() -> None:
    from scipy import stats as sps

    rng = np.random.default_rng(3)
    for _ in range(30):
        a, b = rng.integers(1, 15, 6) * 100.0, rng.integers(1, 15, 5) * 100.0
        ca, cb = rng.random(6) < 0.3, rng.random(5) < 0.3
        if ca.all() and cb.all():
            continue
        ref = sps.logrank(
            sps.CensoredData(uncensored=a[~ca], right=a[ca]),
            sps.CensoredData(uncensored=b[~cb], right=b[cb]),
        )
        ours = survival.logrank(a, ca, b, cb, max_exact=0, n_permutations=10)
        assert ours.p_asymptotic == pytest.approx(ref.pvalue, rel=1e-9)


def test_exact_permutation_p_of_a_complete_separation() -> None:
    fast, slow = np.array([100.0, 200.0, 300.0]), np.array([400.0, 500.0, 600.0])
    test = survival.logrank(slow, np.zeros(3, bool), fast, np.zeros(3, bool))
    # C(6, 3) = 20 relabellings; only the observed one and its mirror are as extreme.
    assert test.exact and test.n_relabellings == 20
    assert test.p == pytest.approx(2 / 20)
    assert test.p_se == 0.0
    assert test.chi2 == pytest.approx(5.051661, rel=1e-6)  # R survdiff
    assert test.p_asymptotic == pytest.approx(0.02460235, rel=1e-6)


def test_monte_carlo_permutation_p_is_seeded_and_close_to_exact() -> None:
    fast, slow = np.array([100.0, 200.0, 300.0]), np.array([400.0, 500.0, 600.0])
    zeros = np.zeros(3, bool)
    mc = survival.logrank(slow, zeros, fast, zeros, max_exact=10, seed=5)
    assert not mc.exact and mc.n_relabellings == survival.N_PERMUTATIONS
    assert abs(mc.p - 0.1) < 4 * mc.p_se and mc.p_se == pytest.approx(0.003, abs=5e-4)
    assert mc == survival.logrank(slow, zeros, fast, zeros, max_exact=10, seed=5)


def test_stratified_logrank_equals_r_and_permutes_within_pairs() -> None:
    base = np.array([1000.0, 1200.0, 900.0, 2000.0, 1500.0])
    group = np.array([400.0, 600.0, 300.0, 2000.0, 500.0])
    cens = np.array([False, False, False, True, False])
    seeds = np.arange(1, 6)
    test = survival.logrank(base, cens, group, cens, base_strata=seeds, strata=seeds)
    assert test.chi2 == pytest.approx(4.0)  # R: survdiff(... ~ group + strata(seed))
    # 2^5 = 32 sign flips; the pair with both censored carries no information, so 2 of the
    # 16 informative patterns (all four one way, or all the other) are as extreme: p = 4/32.
    assert test.exact and test.n_relabellings == 32 and test.p == pytest.approx(4 / 32)


def test_holm_by_hand() -> None:
    np.testing.assert_allclose(survival.holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    out = survival.holm([0.2, np.nan, 0.5])
    assert np.isnan(out[1]) and out[0] == pytest.approx(0.4) and out[2] == pytest.approx(0.5)
    assert survival.holm([0.6, 0.7]).tolist() == [1.0, 1.0]  # 2 * 0.6 capped at 1, monotone
