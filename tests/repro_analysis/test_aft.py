"""analysis.aft: the censored log-normal AFT model against least squares, R's survreg and data
simulated with known coefficients."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from analysis import aft

# A small fixed data set: three weight-decay cells (1, 0.1, 0.03), no GeomDR / GeomDR, four runs
# each; 0 in EVENT: censored at T (4 runs).
WD = np.repeat([1.0, 0.1, 0.03], 8)
GEOMDR = np.tile(np.repeat([0.0, 1.0], 4), 3)
T = np.array([1200, 1500, 1100, 1800, 900, 1000, 1300, 800,
              9000, 12000, 15000, 11000, 2500, 2100, 3000, 2600,
              30000, 40000, 40000, 25000, 2800, 3500, 40000, 3100], float)  # fmt: skip
EVENT = np.ones(24, bool)
EVENT[[10, 17, 18, 22]] = False
NAMES = ("a(wd=1)", "a(wd=0.1)", "a(wd=0.03)", "b", "c")

# R 4.2.2, survival 3.5.3 (Debian bookworm's r-base-core, r-cran-survival), on the data above
# with d$x <- log10(1 / d$wd) and d$cell <- factor(d$wd, levels = c(1, 0.1, 0.03)):
#   survreg(Surv(t, event) ~ 0 + cell + geomdr + geomdr:x, data = d, dist = "lognormal",
#           control = survreg.control(rel.tolerance = 1e-12, iter.max = 100))
#   coef(fit); sqrt(diag(vcov(fit))); fit$scale; fit$loglik[2]
# (with an intercept, ~ factor(cell) + geomdr + geomdr:x, b and c, their SEs, the scale and the
# log-likelihood are the same: -0.384928612304972, -1.077767922787484, ...).
R_COEF = [7.250812548522625, 9.372331737384167, 10.696355898848457, -0.384928612304972,
          -1.077767922787484]  # fmt: skip
R_SE = [0.272664637818632, 0.237076680439092, 0.287623198251324, 0.378370123614548,
        0.368632419187443]  # fmt: skip
R_LOG_SCALE_SE = 0.163589725041542
R_SCALE = 0.555373871230857
R_LOGLIK = -180.706611183737


def design(wd: np.ndarray, geomdr: np.ndarray) -> np.ndarray:
    cells = sorted(set(wd.tolist()), reverse=True)
    x = np.log10(1.0 / wd)
    return np.column_stack([(wd == w).astype(float) for w in cells] + [geomdr, geomdr * x])


def test_without_censoring_the_mle_is_least_squares_on_log_t() -> None:
    x = design(WD, GEOMDR)
    fit = aft.fit_lognormal_aft(x, T, np.zeros(T.size, bool), NAMES)
    beta, *_ = np.linalg.lstsq(x, np.log(T), rcond=None)
    rss = float(((np.log(T) - x @ beta) ** 2).sum())
    assert fit.converged and fit.events == fit.n == 24
    np.testing.assert_allclose(fit.coef, beta, rtol=0, atol=1e-6)
    assert fit.scale == pytest.approx(math.sqrt(rss / T.size), abs=1e-6)


def test_with_censoring_it_matches_r_survreg() -> None:
    fit = aft.fit_lognormal_aft(design(WD, GEOMDR), T, ~EVENT, NAMES)
    assert fit.converged and (fit.n, fit.events) == (24, 20)
    np.testing.assert_allclose(fit.coef, R_COEF, rtol=1e-7)
    np.testing.assert_allclose(fit.se, R_SE, rtol=1e-6)
    assert fit.scale == pytest.approx(R_SCALE, rel=1e-7)
    assert fit.log_scale_se == pytest.approx(R_LOG_SCALE_SE, rel=1e-6)
    assert fit.loglik == pytest.approx(R_LOGLIK, rel=1e-9)


def test_the_analytic_gradient_and_hessian_match_finite_differences() -> None:
    x, log_t = design(WD, GEOMDR), np.log(T)
    params = np.array([7.0, 9.0, 10.0, -0.2, -0.8, math.log(0.7)])
    args = (x, log_t, EVENT)
    numeric = approx_fprime(params, lambda p: aft.loglik(p, *args), 1e-7)
    np.testing.assert_allclose(aft.gradient(params, *args), numeric, rtol=1e-5, atol=1e-4)
    rows = [approx_fprime(params, lambda p, i=i: aft.gradient(p, *args)[i], 1e-7)
            for i in range(params.size)]  # fmt: skip
    np.testing.assert_allclose(aft.hessian(params, *args), rows, rtol=1e-5, atol=1e-3)


def test_a_run_censored_far_in_the_upper_tail_keeps_a_finite_likelihood() -> None:
    # z = 60: Phi(-z) underflows to 0 in a plain log(1 - Phi), log_ndtr keeps it (-1804.6...).
    params = np.array([0.0, math.log(1.0)])
    x, log_t = np.ones((1, 1)), np.array([60.0])
    value = aft.loglik(params, x, log_t, np.array([False]))
    assert math.isfinite(value) and value < -1800
    assert np.isfinite(aft.gradient(params, x, log_t, np.array([False]))).all()


@pytest.mark.parametrize("true_c", [-0.8, 0.0, 0.5])
def test_on_simulated_data_the_estimate_lands_near_the_true_c(true_c: float) -> None:
    rng = np.random.default_rng(7)
    wd = np.repeat([1.0, 0.3, 0.1, 0.03], 100)
    geomdr = np.tile(np.repeat([0.0, 1.0], 50), 4)
    x = np.log10(1.0 / wd)
    a = math.log(1000.0) + math.log(10.0) * x  # the baseline delay grows as 1 / weight decay
    log_t = a + math.log(0.5) * geomdr + true_c * geomdr * x + 0.3 * rng.standard_normal(wd.size)
    budget = 40_000.0  # censors the slowest baselines' upper tail
    censored = np.exp(log_t) > budget
    times = np.where(censored, budget, np.exp(log_t))
    assert censored.any()
    fit = aft.fit_lognormal_aft(design(wd, geomdr), times, censored,
                                ("a1", "a2", "a3", "a4", "b", "c"))  # fmt: skip
    c, se = fit.coef[fit.index("c")], fit.se[fit.index("c")]
    assert fit.converged and abs(c - true_c) < 3 * se and se < 0.05
    assert fit.scale == pytest.approx(0.3, abs=0.03)


def test_inputs_the_model_cannot_fit_are_refused() -> None:
    x = design(WD, GEOMDR)
    with pytest.raises(ValueError, match="rank-deficient"):
        aft.fit_lognormal_aft(np.c_[x, x[:, :1]], T, ~EVENT, (*NAMES, "again"))
    with pytest.raises(ValueError, match="finite and positive"):
        aft.fit_lognormal_aft(x, np.r_[T[:-1], math.inf], ~EVENT, NAMES)
    with pytest.raises(ValueError, match="no run grokked"):
        aft.fit_lognormal_aft(x, T, np.ones(T.size, bool), NAMES)
