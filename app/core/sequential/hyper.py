"""Negative log marginal likelihood of the observed scores and its L-BFGS-B minimisation (App. A.4).

s_C ~ N(H_C mu, alpha * E_beta + D_C), E_beta[j, k] = exp(-beta / K_r * ||phi_{b_j} - phi_{b_k}||^2),
D_C = diag(N_{b_j} sigma^2). Optimised over (log alpha, log beta) with an analytic gradient;
sigma^2 is kept fixed (the paper's rule). Deterministic given the inputs.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, cholesky
from scipy.linalg.lapack import dpotri
from scipy.optimize import minimize

LOG_BOUNDS = ((math.log(1e-5), math.log(1e2)), (math.log(1e-4), math.log(1e4)))


def neg_log_marginal_likelihood(log_params, r, d2_scaled, noise, with_grad=True):
    """NLL(alpha, beta) and its gradient w.r.t. (log alpha, log beta).

    r: residuals s_C - mu_{b_C} (n,); d2_scaled: ||phi_bj - phi_bk||^2 / K_r (n, n); noise: (n,).
    """
    a, b = math.exp(log_params[0]), math.exp(log_params[1])
    n = r.shape[0]
    E = np.exp(-b * d2_scaled)
    G = a * E
    G[np.diag_indices(n)] += noise
    try:
        L = cholesky(G, lower=True, check_finite=False)
    except LinAlgError:
        return (1e300, np.zeros(2)) if with_grad else 1e300
    alpha_v = cho_solve((L, True), r, check_finite=False)
    nll = 0.5 * float(r @ alpha_v) + float(np.log(np.diag(L)).sum()) + 0.5 * n * math.log(2 * math.pi)
    if not with_grad:
        return nll
    Ginv, info = dpotri(L, lower=1)  # inverse from the Cholesky factor (lower triangle filled)
    if info != 0:
        Ginv = cho_solve((L, True), np.eye(n), check_finite=False)
    else:
        Ginv = np.tril(Ginv) + np.tril(Ginv, -1).T
    W = Ginv - np.outer(alpha_v, alpha_v)
    dG_da = E  # d G / d alpha
    dG_db = -a * E * d2_scaled  # d G / d beta
    grad = np.array([0.5 * float(np.sum(W * dG_da)) * a, 0.5 * float(np.sum(W * dG_db)) * b])
    return nll, grad


try:  # small (n x n) LAPACK calls: one BLAS thread is much faster, and robust on a loaded machine
    from threadpoolctl import ThreadpoolController

    _CONTROLLER = ThreadpoolController()
except Exception:  # pragma: no cover - threadpoolctl ships with scikit-learn
    _CONTROLLER = None


def fit_alpha_beta(r, d2_scaled, noise, alpha0=1.0, beta0=1.0, maxiter=100):
    """L-BFGS-B from (alpha0, beta0) in log space; never returns a point worse than the start."""
    if _CONTROLLER is not None:
        with _CONTROLLER.limit(limits=1, user_api="blas"):
            return _fit(r, d2_scaled, noise, alpha0, beta0, maxiter)
    return _fit(r, d2_scaled, noise, alpha0, beta0, maxiter)


def _fit(r, d2_scaled, noise, alpha0, beta0, maxiter):
    x0 = np.array([math.log(alpha0), math.log(beta0)])
    x0 = np.clip(x0, [lo for lo, _ in LOG_BOUNDS], [hi for _, hi in LOG_BOUNDS])
    f0 = neg_log_marginal_likelihood(x0, r, d2_scaled, noise, with_grad=False)
    res = minimize(neg_log_marginal_likelihood, x0, args=(r, d2_scaled, noise), jac=True,
                   method="L-BFGS-B", bounds=LOG_BOUNDS, options={"maxiter": maxiter})
    x = res.x if (np.all(np.isfinite(res.x)) and res.fun <= f0) else x0
    return math.exp(x[0]), math.exp(x[1]), float(min(res.fun, f0))
