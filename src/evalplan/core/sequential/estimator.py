"""Sequential single-target BayesAME estimator (papers/004, §3.1, Algorithm 1, App. A.4 / C.1).

Model: theta ~ N(mu, Sigma) over B buckets, s_i | theta ~ N(theta_{b(i)}, N_b sigma^2).
The B x B prior/posterior covariances are never formed. With C the observed items (in order),
G = K_CC + D_C = L L^T (Cholesky, row-appended), A = L^{-1} K_{C,.} (n x B), y = L^{-1}(s_C - mu_C),
w_b = N_b - n_b, and the maintained B-vectors

    v = Sigma w,  g = A^T A w,  h = A^T y,  diag = alpha - colsum(A^2)

the paper's quantities are (Sigma_|C w = v - g, mu_|C = mu + h, Sigma_bb|C = diag):

    E[R|s_C]   = (sum_C s_i + w.(mu + h)) / N
    Var(R|s_C) = (sigma^2 sum_b w_b N_b + w.(v - g)) / N^2
    alpha_IG(b) = -1/2 log(1 - ((v-g)_b + sigma^2 N_b)^2 / (N^2 Var (diag_b + sigma^2 N_b)))

Appending observation c (bucket b): l = L^{-1} K_{C,b}; m = l^T A = (A^T A)[:, b] (the one O(nB) pass);
a = (K_{.,b} - m) / l_nn; then g <- g - m + a (a.w'), h += a y_new, diag -= a^2, v -= K_{.,b}.
Per observation O(B n + B K_r) time, O(B n) memory.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from evalplan.core.linalg import jittered_cholesky

from .base import ItemEstimator, checked_item, checked_score
from .config import BayesAMEParams, RandomParams, SessionConfig, resolve
from .hyper import fit_alpha_beta
from .prior import BucketPrior

__all__ = ["SequentialEstimator", "Z975", "bayesame_mode", "checked_item", "checked_score",
           "information_gain_scores", "lower_solves", "rs_mean_s2"]

Z975 = 1.959963984540054  # scipy.stats.norm.ppf(0.975)
SIGMA2_UNIQUE = 1e-4  # B >= N - N0 (active selection)
SIGMA2_NONUNIQUE = 1e-1  # otherwise (random selection)


def rs_mean_s2(s: np.ndarray) -> float:
    """Per-item variance used by RS-Mean: max(sample variance, Agresti-Coull-style pseudo-count floor).

    The plain sample variance is 0 after a run of identical scores (e.g. 30 correct answers), which
    gives a zero-width interval and fires the stopping rule on a handful of items. The floor is the
    variance of the sample augmented with z^2/2 pseudo-observations at each end of the score range
    ([0, 1], widened to the observed min/max if scores fall outside it), z = z_0.975:

        p~ = (sum s + z^2/2 * (lo + hi)) / (n + z^2)
        s2_floor = (sum (s - p~)^2 + z^2/2 * ((lo - p~)^2 + (hi - p~)^2)) / (n + z^2 - 1)

    For binary scores this is the Agresti-Coull variance p~(1 - p~) (up to the n+z^2-1 vs n+z^2
    denominator); n = 1 gives ~ the old [0, 1] bound 0.25 (0.26 for s = 0.5). Its influence is
    O(1/n): for large n, non-degenerate samples s2 = sample variance. The estimate stays the sample
    mean; the caller multiplies by (1 - n/N) / n (finite-population correction), so the interval
    still collapses to 0 once every item has been observed.
    """
    n = s.shape[0]
    z2h = 0.5 * Z975 * Z975
    lo, hi = min(0.0, float(s.min())), max(1.0, float(s.max()))
    pt = (float(s.sum()) + z2h * (lo + hi)) / (n + 2.0 * z2h)
    floor = (float(((s - pt) ** 2).sum()) + z2h * ((lo - pt) ** 2 + (hi - pt) ** 2)) / (n + 2.0 * z2h - 1.0)
    s2 = float(s.var(ddof=1)) if n >= 2 else 0.0
    return float(max(s2, floor))




def information_gain_scores(w: np.ndarray, v: np.ndarray, g: np.ndarray, diag: np.ndarray,
                            sigma2: float, Nb: np.ndarray) -> np.ndarray:
    """alpha_IG per bucket (§3.1): ``-0.5 log(1 - Cov(R, s_b | C)^2 / (Var(R | C) Var(s_b | C)))``.

    ``w`` = unobserved items per bucket, ``v - g`` = posterior covariance of every bucket with the
    weighted sum, ``diag`` = posterior variances; buckets with no unobserved item get -inf.
    Shared by the single- and multi-target estimators.
    """
    s2N = sigma2 * Nb
    sw = v - g
    nvar = sigma2 * float(w @ Nb) + float(w @ sw)  # N^2 Var(R | s_C)
    eligible = w > 0
    ig = np.full(w.shape[0], -np.inf)
    if nvar <= 0:
        ig[eligible] = 0.0
        return ig
    num = sw + s2N
    den = np.maximum(diag + s2N, 1e-300)
    ratio = np.clip(num * num / (nvar * den), 0.0, 1.0 - 1e-16)
    ig[eligible] = -0.5 * np.log1p(-ratio[eligible])
    return ig


def lower_solves(L: np.ndarray, K: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(L^-1 K, L^-1 r)`` for the lower Cholesky factor ``L`` of the observed covariance."""
    return (solve_triangular(L, K, lower=True, check_finite=False),
            solve_triangular(L, r, lower=True, check_finite=False))


def bayesame_mode(config: SessionConfig) -> tuple[bool, bool]:
    """``(bayes, information_gain)`` of a session the bucket code runs, from its method and ``method_params``:
    ``bayesame`` (the Bayesian estimate; greedy information gain with ``selection: information_gain``, in the
    unique regime) or ``random`` with ``interval: paper_normal`` (papers/004's RS-Mean: random items, the sample
    mean). The former names ``bayesame_rs`` and ``rs_mean`` resolve to them. ValueError for another method."""
    _, params = resolve(config.method, config.method_params)
    if isinstance(params, BayesAMEParams):
        return True, params.selection == "information_gain"
    if isinstance(params, RandomParams) and params.interval == "paper_normal":
        return False, False
    raise ValueError(f"method: SequentialEstimator runs bayesame (either selection) and random with interval "
                     f"paper_normal (the former bayesame_rs and rs_mean), got {config.method!r}")


class SequentialEstimator(ItemEstimator):
    """BayesAME (``bayesame``; ``selection: random`` the former ``bayesame_rs``) and RS-Mean (``random`` with
    ``interval: paper_normal``, the former ``rs_mean``): :func:`bayesame_mode`; the observation bookkeeping,
    budget and stopping rule are :class:`~evalplan.core.sequential.base.ItemEstimator`'s."""

    _L: np.ndarray  # the growing Cholesky factor, A, y and buckets of the observations (_ensure_capacity)
    _A: np.ndarray
    _y: np.ndarray
    _bC: np.ndarray

    def __init__(self, prior: BucketPrior, config: SessionConfig) -> None:
        super().__init__(prior, config)  # checks prior and config; the empty observation state
        self._bayes, information_gain = bayesame_mode(config)
        N, B = prior.n_items, prior.n_buckets
        self.unique_regime = B >= N - config.n0
        hp = dict(config.hyperparameters or {})
        self._alpha0 = float(hp.get("alpha", 1.0))
        self._beta0 = float(hp.get("beta", 1.0))
        self._sigma2 = float(hp.get("sigma2", SIGMA2_UNIQUE if self.unique_regime else SIGMA2_NONUNIQUE))
        self._alpha, self._beta = self._alpha0, self._beta0
        self.selection = "information_gain" if (information_gain and self.unique_regime) else "random"
        self.effective_window = config.effective_window

        self._Nb = prior.bucket_sizes.astype(np.float64)
        self._mu = prior.bucket_means
        self._w = self._Nb.copy()
        hist = prior.level_hist if self._bayes else None  # computed on first use (BucketPrior.level_hist)
        self._hist_w = hist.copy() if hist is not None else None
        self._cap = 0
        self._rebuild()  # n = 0: prior state
        self._set_estimate()

    # ------------------------------------------------------------------ public state
    @property
    def hyperparameters(self) -> dict[str, Any]:
        return {"alpha": self._alpha, "beta": self._beta, "sigma2": self._sigma2}

    # ------------------------------------------------------------------ kernel pieces
    def _kernel_row(self, b: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Prior covariance row Sigma[b, :] and (grid mode) its integer distance levels."""
        p = self.prior
        if p.grid:
            lev = p.levels_rows(np.array([b]))[0]
            d2 = lev / float(p.grid * p.grid)
        else:
            lev = None
            d2 = p.sqdist_row(b)
        k = self._alpha * np.exp(-(self._beta / p.n_references) * d2)
        return k, lev

    def _prior_v(self) -> np.ndarray:
        p = self.prior
        if self._hist_w is not None:
            lv = np.arange(p.n_levels) / float(p.grid * p.grid * p.n_references)
            return self._alpha * (self._hist_w @ np.exp(-self._beta * lv))
        return p.kernel_matvec(self._w, self._alpha, self._beta)

    def _ensure_capacity(self, need: int) -> None:
        if need <= self._cap:
            return
        cap = max(need, min(self.n_items, max(64, 2 * self._cap)))
        B = self.prior.n_buckets
        L = np.zeros((cap, cap))
        A = np.zeros((cap, B))
        y = np.zeros(cap)
        bC = np.zeros(cap, dtype=np.int64)
        if self._cap:
            n = self._cap
            L[:n, :n] = self._L[:n, :n]
            A[:n] = self._A[:n]
            y[:n] = self._y[:n]
            bC[:n] = self._bC[:n]
        self._L, self._A, self._y, self._bC, self._cap = L, A, y, bC, cap

    # ------------------------------------------------------------------ full (re)build
    def _rebuild(self) -> None:
        """Recompute the factorisation and maintained vectors from the observations (O(B n^2 + B n K_r))."""
        if not self._bayes:
            if self.n_observed == 0:  # rs_mean: the prior values before any observation
                self._alpha, self._beta = self._alpha0, self._beta0
                self._v = self._prior_v()
                self._g = np.zeros_like(self._w)
                self._h = np.zeros_like(self._w)
            return
        p = self.prior
        n = self.n_observed
        self._ensure_capacity(n + self.config.batch_size + 1)
        self._v = self._prior_v()
        if n == 0:
            B = p.n_buckets
            self._g = np.zeros(B)
            self._h = np.zeros(B)
            self._diag = np.full(B, self._alpha)
            return
        bC = np.asarray([p.bucket_of_item[i] for i in self._items], dtype=np.int64)
        K = p.sqdist_rows(bC)
        K *= -(self._beta / p.n_references)
        np.exp(K, out=K)
        K *= self._alpha
        G = K[:, bC].copy()
        G[np.diag_indices(n)] += self._Nb[bC] * self._sigma2
        L = self._chol(G)
        A, y = lower_solves(L, K, np.asarray(self._scores) - self._mu[bC])
        del K
        self._L[:n, :n] = L
        self._A[:n] = A
        self._y[:n] = y
        self._bC[:n] = bC
        self._h = A.T @ y
        self._g = A.T @ (A @ self._w)
        self._diag = self._alpha - np.einsum("ij,ij->j", A, A)

    def _chol(self, G: np.ndarray) -> np.ndarray:
        return jittered_cholesky(G, what="covariance of the observed items")

    # ------------------------------------------------------------------ one appended row
    def _extend(self, b: int, n: int
                ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, float, np.ndarray, np.ndarray]:
        """Write row n of L and A for a new observation in bucket b (rows < n are the conditioning set)."""
        k, lev = self._kernel_row(b)
        noise = self._Nb[b] * self._sigma2
        if n:
            l = solve_triangular(self._L[:n, :n], k[self._bC[:n]], lower=True, check_finite=False)
            m = l @ self._A[:n]
            dd = k[b] + noise - float(l @ l)
        else:
            l = np.zeros(0)
            m = np.zeros_like(k)
            dd = k[b] + noise
        floor = 1e-12 * (self._alpha + noise)
        lnn = math.sqrt(dd if dd > floor else floor)
        a = (k - m) / lnn
        self._L[n, :n] = l
        self._L[n, n] = lnn
        self._A[n] = a
        self._bC[n] = b
        return k, lev, l, lnn, m, a

    # ------------------------------------------------------------------ estimate
    def _set_estimate(self) -> None:
        N = self.n_items
        n = self.n_observed
        if self._bayes or n == 0:
            w = self._w
            est = (self._sum_s + float(w @ (self._mu + self._h))) / N
            var = (self._sigma2 * float(w @ self._Nb) + float(w @ (self._v - self._g))) / (N * N)
        else:  # rs_mean: sample mean, finite-population variance (s2/n)(1 - n/N), s2 floored
            s = np.asarray(self._scores)
            est = float(s.mean())
            var = rs_mean_s2(s) / n * (1.0 - n / N)
        self.estimate = float(est)
        self.variance = float(max(var, 0.0))

    def _ig_scores(self, w: np.ndarray, v: np.ndarray, g: np.ndarray, diag: np.ndarray) -> np.ndarray:
        return information_gain_scores(w, v, g, diag, self._sigma2, self._Nb)

    def information_gain(self) -> np.ndarray:
        """alpha_IG per bucket for the current state (-inf for buckets with no unobserved item)."""
        if not self._bayes:
            raise ValueError("method: information gain needs a BayesAME method")
        return self._ig_scores(self._w, self._v, self._g, self._diag)

    # ------------------------------------------------------------------ select / update
    def _select(self, k: int) -> list[int]:
        """Random (``bayesame_rs``, ``rs_mean``, non-unique regime) or greedy alpha_IG buckets with
        fantasized updates (§3.1, Algorithm 1), one uniformly drawn unobserved item per bucket."""
        rng = np.random.default_rng([self.config.seed, self.n_observed])
        if self.selection == "random":
            unobs = np.flatnonzero(~self._observed)
            return [int(i) for i in rng.choice(unobs, size=k, replace=False)]
        p = self.prior
        w, v, g, diag = self._w, self._v, self._g, self._diag
        n_f = self.n_observed
        picked: list[int] = []
        for j in range(k):
            b = int(np.argmax(self._ig_scores(w, v, g, diag)))
            items = p.items_by_bucket[p.bucket_offsets[b]:p.bucket_offsets[b + 1]]
            cand = items[~self._observed[items]]
            if picked:
                cand = cand[~np.isin(cand, picked)]
            picked.append(int(rng.choice(cand)))
            if j + 1 < k:  # fantasized update: the posterior variance does not depend on the value
                if j == 0:
                    w, v, g, diag = w.copy(), v.copy(), g.copy(), diag.copy()
                kr, _lev, _l, _lnn, m, a = self._extend(b, n_f)
                w[b] -= 1.0
                v -= kr
                g += a * float(a @ w) - m
                diag -= a * a
                n_f += 1
        return picked

    def _update(self, item: int, s: float) -> None:
        b = int(self.prior.bucket_of_item[item])
        n = self.n_observed
        if self._bayes:
            self._ensure_capacity(n + self.config.batch_size + 1)
            k, lev, l, lnn, m, a = self._extend(b, n)
            y_new = (s - self._mu[b] - float(l @ self._y[:n])) / lnn
            self._y[n] = y_new
            self._h += a * y_new
            self._w[b] -= 1.0
            self._v -= k
            self._g += a * float(a @ self._w) - m
            self._diag -= a * a
            if self._hist_w is not None:
                self._hist_w[np.arange(self._hist_w.shape[0]), lev] -= 1.0
        else:
            self._w[b] -= 1.0

    def _after_observe(self) -> None:
        F = self.config.refit_every
        if self._bayes and F > 0 and self.n_observed % F == 0 and self.n_observed < self.n_items:
            self._refit()

    # ------------------------------------------------------------------ refit
    def _refit(self) -> None:
        p = self.prior
        bC = np.asarray([p.bucket_of_item[i] for i in self._items], dtype=np.int64)
        d2 = p.sqdist_rows(bC)[:, bC] / p.n_references
        r = np.asarray(self._scores) - self._mu[bC]
        self._alpha, self._beta, _ = fit_alpha_beta(r, d2, self._Nb[bC] * self._sigma2,
                                                    self._alpha0, self._beta0,
                                                    warm=(self._alpha, self._beta))
        self.n_refits += 1
        self._rebuild()
