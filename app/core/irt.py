"""tinyBenchmarks IRT pipeline (Maia Polo et al. 2024, "tinyBenchmarks: evaluating LLMs with fewer
examples"; the gp-IRT baseline of the coreset paper, §2.4 Eq. 14-15 and appendix H.1).

Three parts:

* :func:`fit_2pl` fits a (multidimensional) two-parameter logistic IRT model
  ``p_ij = sigmoid(a_i . theta_j - b_i)`` to a ``(models x items)`` response matrix by
  L2-regularised joint maximum likelihood (analytic gradients, ``scipy`` L-BFGS-B).
* :class:`IRTSelection` picks a coreset: KMeans (seeded) on the concatenated item parameters
  ``[a_i, b_i]``, and for each cluster the item closest to its centroid ("IRT anchor points").
* :class:`IRTPredictor` estimates a new model's full-benchmark score from its coreset scores:
  ``theta`` by regularised maximum likelihood on the coreset, then p-IRT and gp-IRT.

Estimators (``S`` the coreset, ``n = |S|``, ``N`` the number of items, ``w`` the coreset weights
normalised to sum to one):

* weighted (anchor) estimate: ``Y_w = sum_{i in S} w_i y_i``;
* p-IRT (tinyBenchmarks' definition):
  ``Y_p = (n/N) * mean_{i in S}(y_i) + (1 - n/N) * mean_{i not in S} p_i(theta_hat)``;
* gp-IRT: ``Y_gp = lam * Y_w + (1 - lam) * Y_p`` with the heuristic of tinyBenchmarks / paper
  appendix H.1, ``lam = b_hat^2 / (b_hat^2 + sigma_hat^2 / n)``: ``sigma_hat^2`` is the sample
  variance of all question scores over all reference models (so ``sigma_hat^2 / n`` approximates
  the variance of the coreset mean), and ``b_hat`` approximates the bias of p-IRT: the mean
  absolute difference between the true full scores of a validation half of the reference models
  and their p-IRT estimates from an IRT model fitted on the other half (seeded split). The
  appendix renders the denominator as "sigma^2/4n"; we read it as ``sigma^2/n`` (the variance of a
  mean of ``n`` scores) and expose ``var_scale`` to change it (``var_scale=0.25`` gives the literal
  reading). ``lam`` may also be fixed by the caller.

Identifiability: ``(a, theta)`` are only defined up to sign (and, for ``dim > 1``, rotation); the
L2 penalty fixes the scale. For ``dim == 1`` the sign is fixed so that the mean discrimination is
non-negative (higher theta = more able). For ``dim > 1`` the first dimension is initialised with
the standardised logit of each model's mean score and the others with small seeded noise; the
latent axes are not rotated to any canonical form.

Only numpy / scipy / scikit-learn are used.
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.base import BaseEstimator
from sklearn.cluster import KMeans

from app.core.selection.baselines import nearest_distinct_items

__all__ = [
    "IRTEstimates",
    "IRTPredictor",
    "IRTSelection",
    "estimate_theta",
    "fit_2pl",
    "irt_nll",
    "item_curve",
]


# --------------------------------------------------------------------------------------------
# 2PL model
# --------------------------------------------------------------------------------------------


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


def item_curve(theta: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``P[j, i] = sigmoid(a_i . theta_j - b_i)`` for ``theta (m x d)``, ``a (n x d)``, ``b (n,)``."""
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


def estimate_theta(y: Any, a: np.ndarray, b: np.ndarray, l2: float = 1.0,
                   prior_mean: Any = None) -> np.ndarray:
    """Ability of one model from its scores ``y`` on items with parameters ``a (n x d)``, ``b (n,)``:
    ``argmin_theta sum_i [softplus(z_i) - y_i z_i] + l2/2 ||theta - prior_mean||^2`` (MAP under a
    N(prior_mean, I/l2) prior; finite even when all answers are correct or all wrong). ``y`` may
    hold NaN (ignored). ``prior_mean`` defaults to 0. Returns ``(d,)``."""
    y = np.asarray(y, dtype=np.float64).ravel()
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape[0] != y.shape[0] or b.shape[0] != y.shape[0]:
        raise ValueError("y, a and b must have the same number of items")
    obs = ~np.isnan(y)
    y, a, b = y[obs], a[obs], b[obs]
    d = a.shape[1]
    mu = np.zeros(d) if prior_mean is None else np.asarray(prior_mean, dtype=np.float64).reshape(d)

    def f(t: np.ndarray) -> tuple[float, np.ndarray]:
        z = a @ t - b
        g = expit(z) - y
        r = t - mu
        return (float((_softplus(z) - y * z).sum() + 0.5 * l2 * r @ r), a.T @ g + l2 * r)

    res = minimize(f, mu.copy(), jac=True, method="L-BFGS-B", options={"gtol": 1e-8})
    return np.asarray(res.x)


# --------------------------------------------------------------------------------------------
# Coreset selection
# --------------------------------------------------------------------------------------------


class IRTSelection(BaseEstimator):  # type: ignore[misc]  # scikit-learn ships no type stubs
    """tinyBenchmarks "IRT anchor points": fit a 2PL model on the reference matrix ``Y_ref``
    (models x items), run ``KMeans(k, random_state=seed, n_init="auto")`` on the item parameters
    ``[a_i, b_i]`` and take, per cluster, the item closest to its centroid (clusters visited by
    size desc, ties by index; if that item is already taken, the next closest free one, so the
    ``k`` items are distinct).

    Fitted attributes: ``ranking_`` (k item indices, cluster size desc), ``weights_`` (cluster
    sizes / n, in ranking order, sum 1), ``gains_`` (NaN), ``a_``, ``b_``, ``theta_`` (the 2PL fit),
    ``cluster_centers_``, ``labels_`` (cluster of every item, renumbered in ranking order).
    """

    ranking_: np.ndarray
    weights_: np.ndarray
    a_: np.ndarray
    b_: np.ndarray
    theta_: np.ndarray

    def __init__(self, k: int, seed: int = 0, dim: int = 1, l2: float = 1.0,
                 max_iter: int = 1000) -> None:
        self.k = k
        self.seed = seed
        self.dim = dim
        self.l2 = l2
        self.max_iter = max_iter

    def fit(self, Y_ref: Any, y: Any = None) -> IRTSelection:
        Y = _check_responses(Y_ref)
        n = Y.shape[1]
        if isinstance(self.k, bool) or not isinstance(self.k, numbers.Integral) or not 1 <= self.k <= n:
            raise ValueError(f"k must be an integer in [1, n_items={n}], got {self.k!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        k = int(self.k)
        a, b, theta = fit_2pl(Y, dim=self.dim, l2=self.l2, max_iter=self.max_iter, seed=self.seed)
        X = np.column_stack([a, b])
        km = KMeans(n_clusters=k, random_state=int(self.seed), n_init="auto").fit(X)
        sizes = np.bincount(km.labels_, minlength=k)
        order = np.lexsort((np.arange(k), -sizes))
        centers = km.cluster_centers_[order]
        ranking = nearest_distinct_items(centers, X)
        relabel = np.empty(k, dtype=np.int64)
        relabel[order] = np.arange(k)
        self.ranking_ = ranking
        self.weights_ = sizes[order].astype(np.float64) / n
        self.gains_ = np.full(k, np.nan)
        self.a_, self.b_, self.theta_ = a, b, theta
        self.cluster_centers_ = centers
        self.labels_ = relabel[km.labels_]
        return self


# --------------------------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------------------------


class IRTEstimates(NamedTuple):
    p_irt: np.ndarray
    gp_irt: np.ndarray


def _p_irt(y_S: np.ndarray, P_full: np.ndarray, selected: np.ndarray) -> np.ndarray:
    """p-IRT for targets ``y_S (t x n)`` given IRT curves ``P_full (t x N)``."""
    N = P_full.shape[1]
    n = selected.size
    unseen = np.ones(N, dtype=bool)
    unseen[selected] = False
    obs = np.nanmean(y_S, axis=1)
    if n >= N:
        return np.asarray(obs)
    return np.asarray((n / N) * obs + (1.0 - n / N) * P_full[:, unseen].mean(axis=1))


class IRTPredictor(BaseEstimator):  # type: ignore[misc]  # scikit-learn ships no type stubs
    """p-IRT / gp-IRT estimates of full-benchmark mean scores from coreset scores.

    ``fit(Y_ref, selected, weights=None, item_params=None)``: ``Y_ref`` the reference matrix
    (models x N items), ``selected`` the coreset item indices, ``weights`` the anchor weights
    (default uniform; normalised to sum 1), ``item_params`` an optional ``(a, b)`` or
    ``(a, b, theta_ref)`` already fitted on ``Y_ref`` (e.g. ``(sel.a_, sel.b_, sel.theta_)`` of an
    :class:`IRTSelection`), else a 2PL is fitted.

    A target's theta is the MAP estimate on its coreset scores under a Gaussian prior:
    ``theta_l2="auto"`` (default) is empirical Bayes, prior ``N(mean(theta_ref), var(theta_ref))``
    (isotropic: precision ``1 / mean per-dimension variance``) from the reference abilities; when
    no ``theta_ref`` is known (``item_params=(a, b)``) it falls back to ``N(0, I)``. A number sets
    the prior precision, with prior mean 0.
    ``lam`` (``None`` = heuristic, see the module docstring) is stored as ``lam_``, with
    ``bias_`` (b_hat) and ``sigma2_`` (sigma_hat^2).

    ``predict(y_S)`` with ``y_S`` of shape ``(n,)`` (one target) or ``(t, n)`` (coreset order as
    ``selected``) returns ``IRTEstimates(p_irt, gp_irt)`` (arrays of shape ``(t,)``) and sets
    ``p_irt_``, ``gp_irt_``, ``weighted_`` (the anchor estimate), ``theta_`` (``(t, dim)``) and
    ``item_probabilities_`` (``(t, N)``: the 2PL curves at ``theta_``, for item-level Agreement).
    """

    def __init__(self, dim: int = 1, l2: float = 1.0, theta_l2: float | str = "auto",
                 lam: float | None = None, var_scale: float = 1.0, max_iter: int = 1000,
                 seed: int = 0) -> None:
        self.dim = dim
        self.l2 = l2
        self.theta_l2 = theta_l2
        self.lam = lam
        self.var_scale = var_scale
        self.max_iter = max_iter
        self.seed = seed

    def fit(self, Y_ref: Any, selected: Any, weights: Any = None,
            item_params: tuple[np.ndarray, ...] | None = None) -> IRTPredictor:
        Y = _check_responses(Y_ref)
        m, N = Y.shape
        sel = np.asarray(selected, dtype=np.int64).ravel()
        if sel.size < 1 or sel.min() < 0 or sel.max() >= N or np.unique(sel).size != sel.size:
            raise ValueError("selected must be distinct item indices in [0, n_items)")
        n = sel.size
        if weights is None:
            w = np.full(n, 1.0 / n)
        else:
            w = np.asarray(weights, dtype=np.float64).ravel()
            if w.shape != (n,) or np.any(w < 0) or not np.isfinite(w).all() or w.sum() <= 0:
                raise ValueError("weights must be non-negative, finite, one per selected item")
            w = w / w.sum()
        theta_ref = None
        if item_params is None:
            a, b, theta_ref = fit_2pl(Y, dim=self.dim, l2=self.l2, max_iter=self.max_iter,
                                      seed=self.seed)
        else:
            if len(item_params) not in (2, 3):
                raise ValueError("item_params must be (a, b) or (a, b, theta_ref)")
            a = np.asarray(item_params[0], dtype=np.float64).reshape(N, -1)
            b = np.asarray(item_params[1], dtype=np.float64).ravel()
            if b.shape != (N,):
                raise ValueError("item_params must be (a (N x d), b (N,)) for the N items of Y_ref")
            if len(item_params) == 3:
                theta_ref = np.asarray(item_params[2], dtype=np.float64).reshape(-1, a.shape[1])
        self.a_, self.b_ = a, b
        self.prior_l2_, self.prior_mean_ = self._prior(theta_ref, a.shape[1])
        self.selected_ = sel
        self.weights_ = w
        self.n_items_ = N
        self.sigma2_ = float(np.nanvar(Y))
        if self.lam is not None:
            if not 0.0 <= float(self.lam) <= 1.0:
                raise ValueError(f"lam must be in [0, 1], got {self.lam!r}")
            self.bias_ = float("nan")
            self.lam_ = float(self.lam)
            return self
        self.bias_ = self._validation_bias(Y, sel)
        v = self.var_scale * self.sigma2_ / n
        b2 = self.bias_ ** 2
        self.lam_ = float(b2 / (b2 + v)) if b2 + v > 0 else 1.0
        return self

    def _prior(self, theta_ref: np.ndarray | None, d: int) -> tuple[float, np.ndarray]:
        if isinstance(self.theta_l2, str):
            if self.theta_l2 != "auto":
                raise ValueError(f"theta_l2 must be 'auto' or a positive number, got {self.theta_l2!r}")
            if theta_ref is None or theta_ref.shape[0] < 2:
                return 1.0, np.zeros(d)
            var = float(theta_ref.var(axis=0).mean())
            return 1.0 / max(var, 1e-6), theta_ref.mean(axis=0)
        if not (float(self.theta_l2) > 0 and np.isfinite(float(self.theta_l2))):
            raise ValueError(f"theta_l2 must be 'auto' or a positive number, got {self.theta_l2!r}")
        return float(self.theta_l2), np.zeros(d)

    def _validation_bias(self, Y: np.ndarray, sel: np.ndarray) -> float:
        """b_hat: mean |true full score - p-IRT| on a seeded validation half of the references,
        with the 2PL fitted on the other half. With fewer than 4 references, in-sample."""
        m = Y.shape[0]
        if m < 4:
            a, b, va = self.a_, self.b_, np.arange(m)
            l2, mu = self.prior_l2_, self.prior_mean_
        else:
            perm = np.random.default_rng(self.seed).permutation(m)
            tr, va = perm[: m // 2], perm[m // 2:]
            a, b, th = fit_2pl(Y[tr], dim=self.a_.shape[1], l2=self.l2, max_iter=self.max_iter,
                               seed=self.seed)
            l2, mu = self._prior(th, a.shape[1])
        Yv = Y[va]
        thetas = np.array([estimate_theta(Yv[j, sel], a[sel], b[sel], l2=l2, prior_mean=mu)
                           for j in range(Yv.shape[0])])
        p = _p_irt(Yv[:, sel], item_curve(thetas, a, b), sel)
        return float(np.mean(np.abs(np.nanmean(Yv, axis=1) - p)))

    def predict(self, y_S: Any) -> IRTEstimates:
        if not hasattr(self, "a_"):
            raise RuntimeError("IRTPredictor is not fitted")
        yS = np.asarray(y_S, dtype=np.float64)
        if yS.ndim == 1:
            yS = yS[None, :]
        n = self.selected_.size
        if yS.ndim != 2 or yS.shape[1] != n:
            raise ValueError(f"y_S must have shape (n,) or (t, n) with n={n}, got {np.shape(y_S)}")
        obs = ~np.isnan(yS)
        if np.any((yS[obs] < 0) | (yS[obs] > 1)) or not obs.any(axis=1).all():
            raise ValueError("y_S must hold scores in [0, 1], at least one observed per target")
        sel = self.selected_
        thetas = np.array([estimate_theta(row, self.a_[sel], self.b_[sel], l2=self.prior_l2_,
                                          prior_mean=self.prior_mean_) for row in yS])
        P = item_curve(thetas, self.a_, self.b_)
        p_irt = _p_irt(yS, P, sel)
        wmat = np.where(obs, self.weights_, 0.0)
        weighted = (np.where(obs, yS, 0.0) * wmat).sum(axis=1) / wmat.sum(axis=1).clip(1e-300)
        gp = self.lam_ * weighted + (1.0 - self.lam_) * p_irt
        self.theta_ = thetas
        self.item_probabilities_ = P
        self.weighted_ = weighted
        self.p_irt_ = p_irt
        self.gp_irt_ = gp
        return IRTEstimates(p_irt, gp)
