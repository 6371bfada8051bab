"""L2-regularised joint maximum likelihood for a (multidimensional) 2PL IRT model,
``p_ij = sigmoid(a_i . theta_j - b_i)`` (analytic gradients, scipy L-BFGS-B).

The service's first IRT fit, kept for the sequential ``fluid_irt`` method
(``evalplan.core.sequential.fluid_irt``), which maps it to Fluid Benchmarking's parameterisation. The
coreset method ``irt`` and the gp-IRT / p-IRT predictors use tinyBenchmarks' own pipeline
(``evalplan.core.irt.irt``). Missing responses (NaN) are ignored; scores in [0, 1] (soft labels allowed).
Identifiability: for ``dim == 1`` the sign is fixed so that the mean discrimination is
non-negative; the L2 penalty fixes the scale.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

__all__ = ["fit_2pl", "irt_nll", "twopl_item_curve"]


def _check_responses(Y: Any) -> np.ndarray:
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[0] < 1 or Y.shape[1] < 1:
        raise ValueError(f"Y must be a non-empty 2-D (models x items) array, got shape {Y.shape}")
    obs = ~np.isnan(Y)
    if np.any((Y[obs] < 0) | (Y[obs] > 1)):
        raise ValueError("Y must hold scores in [0, 1] (NaN = missing)")
    if np.isinf(Y).any():
        raise ValueError("Y must be finite (NaN = missing)")
    return np.asarray(Y)


def _check_dim(dim: Any) -> int:
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    return int(dim)


def twopl_item_curve(theta: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The (compensatory) 2PL, one unclipped logit: ``P[j, i] = sigmoid(a_i . theta_j - b_i)`` for
    ``theta (m x d)``, ``a (n x d)``, ``b (n,)`` (not :func:`evalplan.core.irt.irt.mirt_item_curve`)."""
    theta = np.atleast_2d(np.asarray(theta, dtype=np.float64))
    return np.asarray(expit(theta @ np.asarray(a, dtype=np.float64).T - np.asarray(b, dtype=np.float64)))


def _softplus(z: np.ndarray) -> np.ndarray:
    return np.asarray(np.logaddexp(0.0, z))


def irt_nll(params: np.ndarray, Y: np.ndarray, dim: int, l2: float,
            mask: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """Penalised negative log-likelihood of the 2PL model and its gradient.

    ``params`` packs ``[a.ravel() (n*d), b (n), theta.ravel() (m*d)]``. The loss is
    ``sum_{observed} [softplus(z) - y z] + l2/2 (||a||^2 + ||b||^2 + ||theta||^2)``
    with ``z = theta a^T - b`` (the Bernoulli / soft-label cross-entropy). Missing entries
    (``mask == False``) are ignored.
    """
    m, n = Y.shape
    a = params[: n * dim].reshape(n, dim)
    b = params[n * dim: n * dim + n]
    theta = params[n * dim + n:].reshape(m, dim)
    Z = theta @ a.T - b
    Yf = Y if mask is None else np.where(mask, Y, 0.0)
    L = _softplus(Z) - Yf * Z
    G = expit(Z) - Yf
    if mask is not None:
        L = L * mask
        G = G * mask
    f = float(L.sum()) + 0.5 * l2 * float(params @ params)
    ga = G.T @ theta + l2 * a
    gb = -G.sum(axis=0) + l2 * b
    gt = G @ a + l2 * theta
    return f, np.concatenate([ga.ravel(), gb, gt.ravel()])


def fit_2pl(Y: Any, dim: int = 1, l2: float = 1.0, max_iter: int = 1000, tol: float = 1e-6,
            seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit a 2PL IRT model by L2-regularised joint maximum likelihood.

    ``Y``: ``(models x items)`` scores in ``[0, 1]`` (binary or soft labels; NaN = missing).
    ``dim``: latent dimension (1, or small, e.g. 2-5). ``l2``: ridge penalty on all parameters
    (equivalently a N(0, 1/l2) prior; it also pins the scale of ``a`` vs ``theta`` and keeps the
    parameters of all-correct / all-wrong items and models finite). ``max_iter``/``tol``: L-BFGS-B.

    Returns ``(a (items x dim), b (items,), theta (models x dim))`` with
    ``p_ij = sigmoid(a_i . theta_j - b_i)``.
    """
    Y = _check_responses(Y)
    dim = _check_dim(dim)
    if not (l2 > 0 and np.isfinite(l2)):
        raise ValueError(f"l2 must be a positive finite number, got {l2!r}")
    m, n = Y.shape
    mask = ~np.isnan(Y)
    full = bool(mask.all())
    Yz = np.where(mask, Y, 0.0)
    cnt_m = np.maximum(mask.sum(axis=1), 1)
    cnt_i = np.maximum(mask.sum(axis=0), 1)
    eps = 0.5
    # Initialisation: theta ~ standardised logit of the model means, b ~ -logit(item means), a = 1.
    pm = (Yz.sum(axis=1) + eps) / (cnt_m + 2 * eps)
    t0 = np.log(pm / (1 - pm))
    t0 = (t0 - t0.mean()) / (t0.std() + 1e-12) if m > 1 else t0 * 0.0
    pi = (Yz.sum(axis=0) + eps) / (cnt_i + 2 * eps)
    b0 = -np.log(pi / (1 - pi))
    rng = np.random.default_rng(seed)
    theta0 = np.zeros((m, dim))
    theta0[:, 0] = t0
    a0 = np.zeros((n, dim))
    a0[:, 0] = 1.0
    if dim > 1:
        theta0[:, 1:] = 0.1 * rng.standard_normal((m, dim - 1))
        a0[:, 1:] = 0.1 * rng.standard_normal((n, dim - 1))
    x0 = np.concatenate([a0.ravel(), b0, theta0.ravel()])
    res = minimize(irt_nll, x0, args=(Y if full else Yz, dim, float(l2), None if full else mask),
                   jac=True, method="L-BFGS-B",
                   options={"maxiter": int(max_iter), "gtol": tol, "ftol": 1e-12})
    x = res.x
    a = x[: n * dim].reshape(n, dim).copy()
    b = x[n * dim: n * dim + n].copy()
    theta = x[n * dim + n:].reshape(m, dim).copy()
    if dim == 1 and a.mean() < 0:
        a, theta = -a, -theta
    return a, b, theta
