"""``refgp_ivr``: the service's default sequential estimator (docs/SEQUENTIAL.md).

A Bayesian linear model (a Gaussian process with a low-rank linear kernel) over the target's item
scores, whose item features are the reference models' scores on the item:

    f_i = phi_i^T beta + e_i,   phi_i = [1, u_i - u_bar, z_i],   e_i ~ N(0, nu_i),  nu_i = r2 w_i + rho2,
    beta ~ N(m0, diag(tau0, tau1, s2 I_K)),  m0 = [u_bar, 1, 0, ..., 0],

with ``u_i`` the reference mean of item i and ``z_i`` its centred reference scores
(``(x_i - u_i) / sqrt(M - 1)``, ProEval's linear-kernel features) projected on the top ``K`` principal
directions over items (the structure shared by models); ``w_i`` is what the references' variance on
the item leaves unexplained by those K directions, so the residual is heteroscedastic (an item every
reference solves has little residual), ``rho2`` a floor. The constant lets the target sit above or
below every reference (extrapolation), the item-mean slope lets it spread difficulty more or less.
Observed scores are exact (continuous scores are used as such); the benchmark mean is

    R = (sum_{observed} y_i + sum_{unobserved} f_i) / N,
    E[R] = (sum y + S^T m) / N,  Var[R] = (S^T Sigma S + sum_{unobserved} nu_i) / N^2,  S = sum_U phi_i,

so the variance goes to 0 as the benchmark is exhausted (finite population). ``(m, Sigma)`` is the
posterior of ``beta`` (D = K + 2 dimensions; Woodbury in feature space). Each observation is a rank-one
update, O(B D) with B distinct reference-score vectors (buckets). The next item maximizes the
reduction of Var[R] (integral variance reduction): observing j removes

    Delta_j = (phi_j^T Sigma S + nu_j)^2 / (phi_j^T Sigma phi_j + nu_j)

(greedy with fantasized updates for batches). Hyperparameters ``(tau0, tau1, s2, r2, rho2)`` are the
MAP of the marginal likelihood under weak log-normal priors centred on values read off the
references; they are refit on a geometric schedule (n grows by 25%, at most ``refit_every`` apart)
from warm starts with a bounded number of L-BFGS steps, each evaluation O(n_b D^2 + D^3) over the
n_b observed buckets, then one O(B D^2) refresh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, solve_triangular
from scipy.optimize import minimize

from evalplan.core.linalg import jittered_cholesky

from .base import ItemEstimator, derived, one_blas_thread, store_derived
from .config import SessionConfig
from .prior import BucketPrior

K_MAX = 16  # principal directions of the reference scores kept as features (the shared structure)
PRIOR_SD = 2.0  # sd of the log-normal hyperpriors of tau0, tau1, s2, r2
RHO_SD = 0.5  # rho2's is tighter: the items selection favours say little about the floor
PRIOR_SDS = np.array([PRIOR_SD] * 4 + [RHO_SD])
RHO_FACTOR = 0.1  # rho2's centre, x the mean item variance over references
REFIT_GROWTH = 0.25
REFIT_MAXITER = 30
LOG_2PI = math.log(2.0 * math.pi)


@dataclass(frozen=True)
class RefFeatures:
    """Item features of a reference set, by bucket (shared by all sessions of a prior)."""

    phi: np.ndarray  # (B, D) = [1, u - u_bar, z @ U_K]
    omega: np.ndarray  # (B,) reference variance left unexplained by the K directions
    m0: np.ndarray  # (D,) prior mean of beta
    centers: np.ndarray  # (5,) log hyperprior centres: tau0, tau1, s2, r2, rho2
    u_bar: float

    @property
    def dim(self) -> int:
        return int(self.phi.shape[1])


def ref_features(prior: BucketPrior, k_max: int = K_MAX, rho_factor: float = RHO_FACTOR) -> RefFeatures:
    """The features of ``prior`` with at most ``k_max`` reference directions (computed once per prior,
    settings and process: O(B M^2 + M^3))."""
    key = "refgp_features" if (k_max, rho_factor) == (K_MAX, RHO_FACTOR) else f"refgp_features:{k_max}:{rho_factor}"
    cached = derived(prior, key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    V = prior.bucket_vectors
    Nb = prior.bucket_sizes.astype(np.float64)
    N = float(Nb.sum())
    M = V.shape[1]
    u = V.mean(axis=1)
    u_bar = float(Nb @ u / N)
    Z = (V - u[:, None]) / math.sqrt(max(M - 1, 1))
    gram = Z.T @ (Z * Nb[:, None])  # item-weighted (M, M)
    lam, U = np.linalg.eigh(gram)
    order = np.argsort(lam)[::-1]
    lam, U = lam[order], U[:, order]
    keep = int(np.sum(lam > max(float(lam[0]), 1e-300) * 1e-9)) if lam.size and lam[0] > 0 else 0
    keep = min(keep, k_max)
    F = Z @ U[:, :keep]
    phi = np.column_stack([np.ones_like(u), u - u_bar, F])
    item_var = np.einsum("ij,ij->i", Z, Z)
    omega = np.maximum(item_var - np.einsum("ij,ij->i", F, F), 0.0)
    mean_item_var = max(float(Nb @ item_var / N), 1e-8)
    model_means = Nb @ V / N
    var_models = float(np.var(model_means, ddof=1)) if M > 1 else 0.0
    centers = np.log([max(4.0 * var_models, 1e-4), 0.25, 1.0, 1.0, rho_factor * mean_item_var])
    m0 = np.zeros(phi.shape[1])
    m0[0], m0[1] = u_bar, 1.0
    return store_derived(prior, key,  # type: ignore[no-any-return]
                         RefFeatures(np.ascontiguousarray(phi), omega, m0, centers, u_bar))


def _chol(A: np.ndarray) -> np.ndarray:
    return jittered_cholesky(A, what="posterior precision")


def prior_precision(theta: np.ndarray, n_feat: int) -> np.ndarray:
    t0, t1, s2 = np.exp(theta[:3])
    return np.concatenate([[1.0 / t0, 1.0 / t1], np.full(n_feat, 1.0 / s2)])


def residual_variance(theta: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """``nu = r2 omega + rho2`` per bucket."""
    return np.asarray(math.exp(theta[3]) * omega + math.exp(theta[4]))


def neg_log_evidence(theta: np.ndarray, phi: np.ndarray, omega: np.ndarray, cnt: np.ndarray, ysum: np.ndarray,
                     yysum: np.ndarray, m0: np.ndarray, centers: np.ndarray, sds: np.ndarray = PRIOR_SDS) -> float:
    """-log p(y_C | theta) - log p(theta) over the observed buckets (``phi``, ``omega`` their rows;
    ``cnt``, ``ysum``, ``yysum`` the count, sum and sum of squares of their scores): matrix
    determinant lemma and Woodbury in feature space, O(n_b D^2 + D^3)."""
    p0 = prior_precision(theta, phi.shape[1] - 2)
    nu = residual_variance(theta, omega)
    wt = cnt / nu
    pm = phi @ m0
    r = ysum - cnt * pm  # per-bucket sum of (y - phi m0)
    rr = yysum - 2.0 * ysum * pm + cnt * pm ** 2  # per-bucket sum of (y - phi m0)^2
    c = phi.T @ (r / nu)
    Lam = (phi * wt[:, None]).T @ phi
    Lam.flat[::Lam.shape[0] + 1] += p0
    try:
        L = _chol(Lam)
    except LinAlgError:
        return 1e30
    a = solve_triangular(L, c, lower=True, check_finite=False)
    quad = float((rr / nu).sum()) - float(a @ a)
    logdet = 2.0 * float(np.log(np.diag(L)).sum()) - float(np.log(p0).sum()) + float((cnt * np.log(nu)).sum())
    penalty = 0.5 * float((((theta - centers) / sds) ** 2).sum())
    return float(0.5 * (quad + logdet + float(cnt.sum()) * LOG_2PI) + penalty)


class RefGPEstimator(ItemEstimator):
    """Reference-score GP with integral-variance-reduction selection (the module docstring)."""

    method = "refgp_ivr"
    k_max = K_MAX  # reference directions kept as features
    rho_factor = RHO_FACTOR  # centre of rho2's hyperprior, x the mean item variance over references
    prior_sds = PRIOR_SDS  # sds of the log-normal hyperpriors (tau0, tau1, s2, r2, rho2)
    max_fit_buckets: int | None = None  # refits on at most this many observed buckets (None: all)

    def __init__(self, prior: BucketPrior, config: SessionConfig) -> None:
        super().__init__(prior, config)
        self.features = feats = ref_features(prior, self.k_max, self.rho_factor)
        self._phi = feats.phi
        self._n_feat = feats.dim - 2
        B = prior.n_buckets
        self._w = prior.bucket_sizes.astype(np.float64)  # unobserved items per bucket
        self._S = self._phi.T @ self._w
        self._cnt = np.zeros(B)  # observed: count, sum and sum of squares of the scores per bucket
        self._ysum = np.zeros(B)
        self._yysum = np.zeros(B)
        self._off = np.zeros(B)  # a fixed offset of the prior mean per bucket (refgp_ivr: none)
        self._off_U = 0.0  # sum of the offsets over the unobserved items
        self._theta = feats.centers.copy()
        self._next_refit = 3
        self._install()
        self._set_estimate()

    # ------------------------------------------------------------------ posterior
    @property
    def hyperparameters(self) -> dict[str, Any]:
        t0, t1, s2, r2, rho2 = (float(v) for v in np.exp(self._theta))
        return {"tau0": t0, "tau1": t1, "s2": s2, "r2": r2, "rho2": rho2, "n_features": int(self._n_feat)}

    def _install(self) -> None:
        """Posterior (m, Sigma), residuals nu and per-bucket variances d from the per-bucket
        statistics: O(n_b D^2 + D^3 + B D^2)."""
        p0 = prior_precision(self._theta, self._n_feat)
        self._nu = residual_variance(self._theta, self.features.omega)
        obs = np.flatnonzero(self._cnt)
        phi_o = self._phi[obs]
        Lam = (phi_o * (self._cnt[obs] / self._nu[obs])[:, None]).T @ phi_o
        Lam[np.diag_indices_from(Lam)] += p0
        L = _chol(Lam)
        Sigma = cho_solve((L, True), np.eye(Lam.shape[0]), check_finite=False)
        self._Sigma = 0.5 * (Sigma + Sigma.T)
        ysum, _ = self._ystats(obs)
        self._m = self._Sigma @ (p0 * self.features.m0 + phi_o.T @ (ysum / self._nu[obs]))
        self._d = np.einsum("ij,ij->i", self._phi @ self._Sigma, self._phi)
        self._nu_U = float(self._w @ self._nu)

    def _update(self, item: int, score: float) -> None:
        b = int(self.prior.bucket_of_item[item])
        phi = self._phi[b]
        nu = float(self._nu[b])
        g = self._Sigma @ phi
        den = nu + float(phi @ g)
        self._m = self._m + g * ((score - float(self._off[b]) - float(phi @ self._m)) / den)
        self._Sigma -= np.outer(g, g) / den
        self._d -= (self._phi @ g) ** 2 / den
        np.maximum(self._d, 0.0, out=self._d)
        self._w[b] -= 1.0
        self._S = self._S - phi
        self._nu_U -= nu
        self._off_U -= float(self._off[b])
        self._cnt[b] += 1.0
        self._ysum[b] += score
        self._yysum[b] += score * score

    def _after_observe(self) -> None:
        n = self.n_observed
        if self.config.refit_every == 0 or n < self._next_refit or n >= self.n_items:
            return
        self.refit()
        gap = max(1, math.ceil(REFIT_GROWTH * n))
        if self.config.refit_every > 0:
            gap = min(gap, self.config.refit_every)
        self._next_refit = n + gap

    def refit(self) -> None:
        """MAP hyperparameters from the current observations (warm start, bounded L-BFGS)."""
        with one_blas_thread():
            self._refit_offset()
            self._theta = self._map_theta(self._fit_buckets())
            self.n_refits += 1
            self._install()

    def _map_theta(self, obs: np.ndarray) -> np.ndarray:
        """MAP hyperparameters on the buckets ``obs`` with the current prior-mean offsets, warm-started at
        the current ones (bounded L-BFGS); the current ones if the fit is not finite."""
        c = self.features.centers
        ysum, yysum = self._ystats(obs)
        args = (self._phi[obs], self.features.omega[obs], self._cnt[obs], ysum, yysum, self.features.m0, c,
                self.prior_sds)
        res = minimize(neg_log_evidence, self._theta, args=args, method="L-BFGS-B",
                       bounds=[(ci - 4 * sd, ci + 4 * sd) for ci, sd in zip(c, self.prior_sds)],
                       options={"maxiter": REFIT_MAXITER})
        if np.all(np.isfinite(res.x)):
            return np.asarray(res.x, dtype=np.float64)
        return self._theta

    def _ystats(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-bucket sum and sum of squares of the observed scores minus the offset, on ``obs``."""
        o, c, ys = self._off[obs], self._cnt[obs], self._ysum[obs]
        return ys - c * o, self._yysum[obs] - 2.0 * o * ys + c * o * o

    def _refit_offset(self) -> None:
        """Hook: refit the prior-mean offset before the hyperparameters (``refgp_ivr``: none)."""
        return None

    def _fit_buckets(self) -> np.ndarray:
        """The observed buckets a refit uses: all, or a seeded uniform subset of ``max_fit_buckets``
        of them (bounds a refit's cost at O(max_fit_buckets D^2) per evaluation)."""
        obs = np.flatnonzero(self._cnt)
        cap = self.max_fit_buckets
        if cap is None or obs.size <= cap:
            return obs
        rng = np.random.default_rng([self.config.seed, self.n_observed, 7])
        return np.sort(rng.choice(obs, size=cap, replace=False))

    def _set_estimate(self) -> None:
        N = float(self.n_items)
        S = self._S
        self.estimate = float((self._sum_s + self._off_U + float(S @ self._m)) / N)
        var = (float(S @ self._Sigma @ S) + max(self._nu_U, 0.0)) / (N * N)
        self.variance = float(max(var, 0.0))

    def variance_reduction(self) -> np.ndarray:
        """Delta per bucket (N^2 units; -inf for buckets with no unobserved item)."""
        return self._scores_of(self._Sigma, self._S, self._d, self._w)

    def _scores_of(self, Sigma: np.ndarray, S: np.ndarray, d: np.ndarray, w: np.ndarray) -> np.ndarray:
        t = self._phi @ (Sigma @ S)
        score = (t + self._nu) ** 2 / (d + self._nu)
        score[w <= 0] = -np.inf
        return np.asarray(score)

    def _select(self, k: int) -> list[int]:
        p = self.prior
        rng = np.random.default_rng([self.config.seed, self.n_observed])
        Sigma, S, d, w = self._Sigma, self._S, self._d, self._w
        picked: list[int] = []
        for j in range(k):
            b = int(np.argmax(self._scores_of(Sigma, S, d, w)))
            items = p.items_by_bucket[p.bucket_offsets[b]:p.bucket_offsets[b + 1]]
            cand = items[~self._observed[items]]
            if picked:
                cand = cand[~np.isin(cand, picked)]
            picked.append(int(rng.choice(cand)))
            if j + 1 < k:  # fantasized: the posterior covariance does not depend on the score
                if j == 0:
                    Sigma, S, d, w = Sigma.copy(), S.copy(), d.copy(), w.copy()
                phi = self._phi[b]
                g = Sigma @ phi
                den = float(self._nu[b]) + float(phi @ g)
                Sigma -= np.outer(g, g) / den
                d = np.maximum(d - (self._phi @ g) ** 2 / den, 0.0)
                w[b] -= 1.0
                S = S - phi
        return picked
