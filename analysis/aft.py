"""A log-normal accelerated-failure-time (AFT) model with right censoring, by maximum likelihood.

    log T = X beta + s * e,    e ~ N(0, 1)

An event contributes the log density of T (the log-normal's, so log-likelihoods compare with
R's ``survreg(..., dist = "lognormal")``, which adds the same Jacobian -log t); a run censored at
t contributes log P(T > t) = log Phi(-z), computed with ``scipy.special.log_ndtr`` so that a run
censored far in the upper tail keeps a finite log-likelihood and gradient. The fit is Newton's
method in a trust region (``scipy.optimize.minimize``, ``trust-exact``) on (beta, log s) with the
analytic gradient and Hessian; the standard errors are those of the observed information (the
inverse of the Hessian of -log L at the optimum), as survreg reports them. Without censoring
the MLE is ordinary least squares on log T with s = sqrt(RSS / n).

`fit_lognormal_aft` takes a design matrix; `analysis.dose_response` builds the dose-response
design (cell intercepts, GeomDR, GeomDR x log10(1 / weight decay)) from runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy.special import log_ndtr

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
GTOL = 1e-9
"""Gradient norm at which the trust-region Newton iterations stop (a few steps past OLS)."""
CONVERGED_GRAD = 1e-6
"""The largest |d log L| accepted as an optimum (after `_polish`). The optimizer's own flag is
not read: near the optimum, trust-exact stops with "a bad approximation caused failure to
predict improvement" once log L changes at rounding level."""


@dataclass(frozen=True)
class AftFit:
    """The maximum-likelihood fit of a log-normal AFT model."""

    names: tuple[str, ...]
    """One name per column of the design matrix."""
    coef: np.ndarray
    """beta, in the order of `names`."""
    se: np.ndarray
    """Standard errors of beta from the observed information (NaN when it is singular)."""
    scale: float
    """s, the standard deviation of log T around X beta."""
    log_scale_se: float
    """Standard error of log s (survreg's ``Log(scale)``)."""
    loglik: float
    """log L at the optimum, with the Jacobian -log t of each event (survreg's convention)."""
    n: int
    """Runs in the fit."""
    events: int
    """Runs that grokked (not censored)."""
    converged: bool
    """The optimizer stopped where the gradient is zero (`CONVERGED_GRAD`) and the information
    positive definite; otherwise the estimates are not an MLE (e.g. it lies at infinity)."""

    def index(self, name: str) -> int:
        return self.names.index(name)


def _parts(params: np.ndarray, x: np.ndarray, log_t: np.ndarray, event: np.ndarray
           ) -> tuple[np.ndarray, float, np.ndarray]:
    """(z, s, inverse Mills ratio h(z) = phi(z) / Phi(-z) of the censored runs)."""
    s = math.exp(params[-1])
    z = (log_t - x @ params[:-1]) / s
    zc = z[~event]
    h = np.exp(-0.5 * zc * zc - LOG_SQRT_2PI - log_ndtr(-zc))
    return z, s, h


def loglik(params: np.ndarray, x: np.ndarray, log_t: np.ndarray, event: np.ndarray) -> float:
    """log L at (beta, log s)."""
    z, _s, _h = _parts(params, x, log_t, event)
    ze = z[event]
    dens = -0.5 * ze * ze - LOG_SQRT_2PI - params[-1] - log_t[event]
    return float(dens.sum() + log_ndtr(-z[~event]).sum())


def gradient(params: np.ndarray, x: np.ndarray, log_t: np.ndarray, event: np.ndarray
             ) -> np.ndarray:
    """d log L / d(beta, log s)."""
    z, s, h = _parts(params, x, log_t, event)
    ze, zc = z[event], z[~event]
    d_beta = x[event].T @ ze / s + x[~event].T @ h / s
    d_log_s = float((ze * ze - 1.0).sum() + (h * zc).sum())
    return np.append(d_beta, d_log_s)


def hessian(params: np.ndarray, x: np.ndarray, log_t: np.ndarray, event: np.ndarray
            ) -> np.ndarray:
    """d^2 log L / d(beta, log s)^2 (h' = h (h - z) for a censored run)."""
    z, s, h = _parts(params, x, log_t, event)
    xe, xc, ze, zc = x[event], x[~event], z[event], z[~event]
    dh = h * (h - zc)
    k = x.shape[1]
    out = np.empty((k + 1, k + 1))
    out[:k, :k] = -(xe.T @ xe + xc.T @ (xc * dh[:, None])) / (s * s)
    cross = -(2.0 * xe.T @ ze + xc.T @ (dh * zc + h)) / s
    out[:k, k] = out[k, :k] = cross
    out[k, k] = -2.0 * float((ze * ze).sum()) - float((zc * (dh * zc + h)).sum())
    return out


def ols(x: np.ndarray, log_t: np.ndarray) -> tuple[np.ndarray, float]:
    """(beta, sqrt(RSS / n)): least squares on log T (the MLE without censoring)."""
    beta, *_ = np.linalg.lstsq(x, log_t, rcond=None)
    resid = log_t - x @ beta
    return beta, math.sqrt(float(resid @ resid) / log_t.size)


def _check(x: np.ndarray, times: np.ndarray, event: np.ndarray) -> None:
    if x.ndim != 2 or x.shape[0] != times.size or event.size != times.size:
        raise ValueError("the design matrix, the times and the events must have one row per run")
    if np.linalg.matrix_rank(x) < x.shape[1]:
        raise ValueError("the design matrix is rank-deficient: its coefficients are not "
                         "identified by these runs")  # fmt: skip
    if not np.isfinite(times).all() or (times <= 0).any():
        raise ValueError("every time must be finite and positive (a censoring time of +inf, a "
                         "run that can never grok, has no log-normal likelihood)")  # fmt: skip
    if not event.any():
        raise ValueError("no run grokked: the model has no MLE")


def fit_lognormal_aft(x: np.ndarray, times: np.ndarray, censored: np.ndarray,
                      names: tuple[str, ...]) -> AftFit:
    """The MLE of log T = X beta + s e (e standard normal), T right-censored where `censored`.

    `x` is (n, k) with full column rank; `times` are grok steps or censoring steps, all > 0 and
    finite. Starts from least squares on log T (censored times taken as events).
    """
    x = np.asarray(x, float)
    times = np.asarray(times, float)
    event = ~np.asarray(censored, bool)
    _check(x, times, event)
    if len(names) != x.shape[1]:
        raise ValueError(f"{len(names)} names for {x.shape[1]} columns")
    log_t = np.log(times)
    beta0, s0 = ols(x, log_t)
    start = np.append(beta0, math.log(max(s0, 1e-3)))
    args = (x, log_t, event)
    res = optimize.minimize(
        lambda p: -loglik(p, *args), start, method="trust-exact",
        jac=lambda p: -gradient(p, *args), hess=lambda p: -hessian(p, *args),
        options={"gtol": GTOL, "maxiter": 500},
    )  # fmt: skip
    params = _polish(res.x, args)
    cov, definite = _inverse(-hessian(params, *args))
    k = x.shape[1]
    grad_ok = float(np.abs(gradient(params, *args)).max()) < CONVERGED_GRAD
    return AftFit(
        names=tuple(names),
        coef=params[:k].copy(),
        se=np.sqrt(np.diag(cov)[:k]),
        scale=math.exp(float(params[k])),
        log_scale_se=math.sqrt(float(cov[k, k])),
        loglik=loglik(params, *args),
        n=int(times.size),
        events=int(event.sum()),
        converged=bool(grad_ok and definite),
    )


def _polish(params: np.ndarray, args: tuple[np.ndarray, np.ndarray, np.ndarray],
            steps: int = 5) -> np.ndarray:
    """Plain Newton steps from the optimizer's point while they shrink the gradient: near the
    optimum log L changes below its rounding, so the trust region can no longer tell a step
    helps (it stops with the gradient at ~1e-6 on a few hundred runs); the gradient can."""
    grad = gradient(params, *args)
    for _ in range(steps):
        try:
            step = np.linalg.solve(hessian(params, *args), grad)
        except np.linalg.LinAlgError:
            break
        candidate = params - step
        new = gradient(candidate, *args)
        if not np.abs(new).max() < np.abs(grad).max():
            break
        params, grad = candidate, new
    return params


def _inverse(info: np.ndarray) -> tuple[np.ndarray, bool]:
    """(inverse of the observed information, whether it is positive definite); NaN when not."""
    try:
        np.linalg.cholesky(info)
    except np.linalg.LinAlgError:
        return np.full(info.shape, np.nan), False
    return np.linalg.inv(info), True
