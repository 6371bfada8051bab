"""Multi-target BayesAME (papers/004, §3.2; defaults from App. C.1).

Model (linear model of coregionalization over the shared buckets):

    theta^t = mu + sum_l w_l^t u_l,   u_l ~ GP(0, k_l) over buckets,
    Cov(theta_{t,b}, theta_{t',b'}) = sum_l w_l^t w_l^t' k_l(b, b'),
    s_i^t | theta ~ N(theta_{t,b(i)}, N_b sigma^2),

with x = beta_l / K_r * ||phi_b - phi_b'||^2 and, of the L kernels, the first ceil(L/2) squared
exponential ``alpha_l exp(-x)`` and the rest Matern-3/2 ``alpha_l (1 + sqrt(3x)) exp(-sqrt(3x))``.
The prior mean is the single-target one, mu_b = phi_b^T 1 / K_r, for every target.

The T*B x T*B prior/posterior covariances are never formed. With the observed (target, item) pairs
C (in order), G = K_CC + D_C = L L^T, A = L^{-1} K_{C,(.,.)} (n x T x B), y = L^{-1}(s_C - mu_C),
w^t_b = N_b - n^t_b and the maintained (T, B) arrays

    v_t = Sigma_tt w^t,  g_t = A_t^T A_t w^t,  h_t = A_t^T y,  diag_t = Sigma_tt,bb - colsum(A_t^2)

each target's quantities are exactly the single-target formulas on the joint posterior:

    E[R_t|s_C]   = (sum_{C_t} s + w^t.(mu + h_t)) / N
    Var(R_t|s_C) = (sigma^2 w^t.N_b + w^t.(v_t - g_t)) / N^2
    alpha_IG^t(b) = -1/2 log(1 - ((v_t-g_t)_b + sigma^2 N_b)^2 / (N^2 Var_t (diag_t,b + sigma^2 N_b)))

Appending an observation of (t, b) costs O(T B n) (one pass over A); a refit rebuilds everything.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, cholesky, solve_triangular

from evalplan.core.linalg import jittered_cholesky

from .base import paper_converged
from .config import SessionConfig
from .estimator import Z975, bayesame_mode, checked_score, information_gain_scores, lower_solves
from .numeric import AdamW, torch_randn
from .prior import BucketPrior
from .stopping import clip_interval, normal_interval

SIGMA2_BINARY = 0.1  # App. C.1 (multi-target): sigma^2 init for binary scores
SIGMA2_CONTINUOUS = 0.01  # ... and for continuous scores
LR_BINARY = 0.01  # AdamW learning rate, binary scores
LR_CONTINUOUS = 0.001  # ... continuous scores
W_INIT_STD = 0.1  # w_l^t ~ N(0, 0.01): variance 0.01
INIT_FRACTION = 0.1  # 10% of the items evaluated by every target first (§3.2)
_SQRT3 = math.sqrt(3.0)
_CHUNK_ELEMS = 2_000_000


def kernel_kinds(n_latent: int) -> list[str]:
    """First ceil(L/2) kernels squared exponential, the rest Matern-3/2 (App. C.1: "half ... the rest")."""
    n_se = (n_latent + 1) // 2
    return ["se"] * n_se + ["matern32"] * (n_latent - n_se)


def kernel_values(kind: str, alpha: float, beta: float, d2_scaled: np.ndarray) -> np.ndarray:
    """k_l on x = beta * d2_scaled where d2_scaled = ||phi_b - phi_b'||^2 / K_r."""
    x = beta * np.maximum(d2_scaled, 0.0)
    if kind == "se":
        return np.asarray(alpha * np.exp(-x))
    r = _SQRT3 * np.sqrt(x)
    return np.asarray(alpha * (1.0 + r) * np.exp(-r))


def _chol(G: np.ndarray) -> np.ndarray:
    return jittered_cholesky(G, what="covariance of the observed (target, item) pairs")


def multi_target_gram(kinds: list[str], alpha: np.ndarray, beta: np.ndarray, weights: np.ndarray, sigma2: float,
                      d2_scaled: np.ndarray, targets: np.ndarray, noise_sizes: np.ndarray) -> np.ndarray:
    """G = K_CC + D_C for observations with bucket distances d2_scaled (n, n), targets (n,), N_b (n,)."""
    n = targets.shape[0]
    G = np.zeros((n, n))
    for l, kind in enumerate(kinds):
        wl = weights[l, targets]
        G += np.outer(wl, wl) * kernel_values(kind, alpha[l], beta[l], d2_scaled)
    G[np.diag_indices(n)] += sigma2 * noise_sizes
    return G


def multi_target_nll(kinds: list[str], alpha: np.ndarray, beta: np.ndarray, weights: np.ndarray, sigma2: float,
                     d2_scaled: np.ndarray, targets: np.ndarray, noise_sizes: np.ndarray, residuals: np.ndarray
                     ) -> float:
    """Negative log marginal likelihood of residuals s_C - mu_C (numpy, float64)."""
    G = multi_target_gram(kinds, alpha, beta, weights, sigma2, d2_scaled, targets, noise_sizes)
    L = _chol(G)
    z = solve_triangular(L, residuals, lower=True, check_finite=False)
    n = residuals.shape[0]
    return float(0.5 * float(z @ z) + float(np.log(np.diag(L)).sum()) + 0.5 * n * math.log(2.0 * math.pi))


def multi_target_nll_and_grad(kinds: list[str], log_alpha: np.ndarray, log_beta: np.ndarray, weights: np.ndarray,
                              log_sigma2: np.ndarray, d2_scaled: np.ndarray, targets: np.ndarray,
                              noise_sizes: np.ndarray, residuals: np.ndarray
                              ) -> tuple[float, list[np.ndarray]] | None:
    """The NLL of :func:`multi_target_nll` in the refit's parameters (log alpha, log beta, w, log sigma^2)
    and its gradient, ``dNLL/dG = (G^-1 - a a^T) / 2`` with ``a = G^-1 r``; None when G is not
    positive definite. Matern-3/2 at distance 0 is the constant alpha (no beta gradient)."""
    alpha, beta, sigma2 = np.exp(log_alpha), np.exp(log_beta), math.exp(float(log_sigma2))
    n = residuals.shape[0]
    positive = d2_scaled > 0
    G = np.diag(sigma2 * noise_sizes)
    parts = []
    for l, kind in enumerate(kinds):
        x = beta[l] * d2_scaled
        if kind == "se":
            k = np.exp(-x)
            dk = -x * k  # dk / d log beta
        else:
            rr = _SQRT3 * np.sqrt(np.where(positive, x, 1.0))
            e = np.exp(-rr)
            k = np.where(positive, (1.0 + rr) * e, 1.0)
            dk = np.where(positive, -1.5 * x * e, 0.0)
        wl = weights[l, targets]
        ww = np.outer(wl, wl)
        G = G + alpha[l] * ww * k
        parts.append((k, dk, wl, ww))
    try:
        L = cholesky(G, lower=True, check_finite=False)
    except LinAlgError:
        return None
    z = solve_triangular(L, residuals, lower=True, check_finite=False)
    nll = 0.5 * float(z @ z) + float(np.log(np.diag(L)).sum()) + 0.5 * n * math.log(2.0 * math.pi)
    a = cho_solve((L, True), residuals, check_finite=False)
    M = 0.5 * (cho_solve((L, True), np.eye(n), check_finite=False) - np.outer(a, a))
    g_alpha, g_beta, g_weights = np.zeros_like(log_alpha), np.zeros_like(log_beta), np.zeros_like(weights)
    for l, (k, dk, wl, ww) in enumerate(parts):
        Mk = M * k
        g_alpha[l] = alpha[l] * float(np.sum(Mk * ww))
        g_beta[l] = alpha[l] * float(np.sum(M * ww * dk))
        g_weights[l] = np.bincount(targets, weights=2.0 * alpha[l] * (Mk @ wl), minlength=weights.shape[1])
    g_sigma2 = np.array(sigma2 * float(np.diag(M) @ noise_sizes))
    return nll, [g_alpha, g_beta, g_weights, g_sigma2]


class MultiTargetEstimator:
    """Joint BayesAME over ``n_targets`` target models sharing one BucketPrior.

    Phases: every target is first evaluated on the same ceil(10% N) random items (drawn once with
    ``default_rng([seed, 0])``), then targets are visited round-robin, each proposing its own
    max-information-gain item (per-target IG on R_t under the joint posterior). Each target has its
    own estimate / variance / CI / stopping rule; the session stops when all targets have stopped.
    Estimates of stopped targets keep following the joint posterior as other targets are observed.
    """

    _L: np.ndarray  # the growing Cholesky factor, A and y of the observed (target, item) pairs
    _A: np.ndarray
    _y: np.ndarray

    def __init__(self, prior: BucketPrior, config: SessionConfig, n_targets: int, n_latent: int = 2,
                 continuous: bool = False, *, adam_steps: int = 100) -> None:
        if not isinstance(prior, BucketPrior):
            raise ValueError("prior: must be a BucketPrior")
        if not isinstance(config, SessionConfig):
            raise ValueError("config: must be a SessionConfig")
        config.validate()
        try:
            bayes, information_gain = bayesame_mode(config)
        except ValueError:
            bayes = information_gain = False
        if not bayes:
            raise ValueError(f"method: multi-target supports 'bayesame' (either selection; the former "
                             f"'bayesame_rs'), got {config.method!r}")
        for name, val in (("n_targets", n_targets), ("n_latent", n_latent), ("adam_steps", adam_steps)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
                raise ValueError(f"{name}: must be an integer >= 1, got {val!r}")
        self.prior = prior
        self.config = config
        self.n_targets = T = int(n_targets)
        self.n_latent = Lat = int(n_latent)
        self.continuous = bool(continuous)
        self.adam_steps = int(adam_steps)
        self.kinds = kernel_kinds(Lat)
        N, B = prior.n_items, prior.n_buckets
        self.n_items = N
        self.score_range: tuple[float, float] = (-math.inf, math.inf)  # the ci is clipped to it
        self.unique_regime = B >= N - config.n0
        self.selection = "information_gain" if (information_gain and self.unique_regime) else "random"
        self.learning_rate = LR_CONTINUOUS if self.continuous else LR_BINARY

        hp = dict(config.hyperparameters or {})
        self._alpha = np.full(Lat, float(hp.get("alpha", 1.0)))
        self._beta = np.full(Lat, float(hp.get("beta", 1.0)))
        self._sigma2 = float(hp.get("sigma2", SIGMA2_CONTINUOUS if self.continuous else SIGMA2_BINARY))
        # w ~ N(0, 0.01) from torch's seeded CPU generator, reproduced without torch (numeric.torch_randn)
        self._W = W_INIT_STD * torch_randn((Lat, T), int(config.seed))

        rng0 = np.random.default_rng([config.seed, 0])
        n_init = min(N, int(math.ceil(INIT_FRACTION * N)))
        self.init_items = [int(i) for i in rng0.choice(N, size=n_init, replace=False)]
        cap = config.max_items if config.max_items is not None else N
        self._init_for_target = self.init_items[:cap]

        self._obs = np.zeros((T, N), dtype=bool)
        self._tC: list[int] = []
        self._iC: list[int] = []
        self._sC: list[float] = []
        self._sum_s = np.zeros(T)
        self.n_observed = np.zeros(T, dtype=np.int64)
        self.stopped = np.zeros(T, dtype=bool)
        self.stop_reasons: list[str | None] = [None] * T
        self.trajectory: list[dict[str, Any]] = []
        self._iter_estimates: list[list[float]] = [[] for _ in range(T)]
        self._rr = 0  # round-robin pointer (next target to serve)
        self.n_refits = 0
        self.refit_history: list[dict[str, Any]] = []

        self._Nb = prior.bucket_sizes.astype(np.float64)
        self._mu = prior.bucket_means
        self._w = np.tile(self._Nb, (T, 1))  # (T, B): N_b - n^t_b
        self._cap = 0
        self._rebuild()
        self._set_estimates()

    # ------------------------------------------------------------------ public state
    @property
    def n_total_observed(self) -> int:
        return len(self._tC)

    @property
    def all_stopped(self) -> bool:
        return bool(self.stopped.all())

    @property
    def cis(self) -> list[tuple[float, float]]:
        """Per target: the ``config.level`` interval, inside ``score_range`` (set by the caller)."""
        level = float(self.config.level)
        return [clip_interval(*normal_interval(float(e), float(v), level), self.score_range)
                for e, v in zip(self.estimates, self.variances)]

    def reported_estimate(self, t: int) -> float:
        """Target ``t``'s estimate projected onto ``score_range`` (never further from the truth)."""
        a, b = self.score_range
        return float(min(max(float(self.estimates[t]), a), b))

    @property
    def hyperparameters(self) -> dict[str, Any]:
        return {"kinds": list(self.kinds), "alpha": self._alpha.copy(), "beta": self._beta.copy(),
                "weights": self._W.copy(), "sigma2": self._sigma2}

    @property
    def observations(self) -> list[tuple[int, int, float]]:
        return list(zip(self._tC, self._iC, self._sC))

    def in_init_phase(self, target: int | None = None) -> bool:
        """True while the target (default: any non-stopped target) has unobserved initial items."""
        targets = range(self.n_targets) if target is None else [int(target)]
        return any(not self.stopped[t] and not self._obs[t, self._init_for_target].all() for t in targets)

    def set_hyperparameters(self, alpha: Any = None, beta: Any = None, weights: Any = None,
                            sigma2: float | None = None) -> None:
        """Fix hyperparameters (arrays of shape (L,), (L,), (L, T); sigma2 > 0) and recompute the posterior."""
        Lat, T = self.n_latent, self.n_targets
        if alpha is not None:
            a = np.asarray(alpha, dtype=np.float64).reshape(-1)
            if a.shape != (Lat,) or not np.all(np.isfinite(a)) or np.any(a <= 0):
                raise ValueError(f"alpha: must be {Lat} finite values > 0")
            self._alpha = a.copy()
        if beta is not None:
            b = np.asarray(beta, dtype=np.float64).reshape(-1)
            if b.shape != (Lat,) or not np.all(np.isfinite(b)) or np.any(b <= 0):
                raise ValueError(f"beta: must be {Lat} finite values > 0")
            self._beta = b.copy()
        if weights is not None:
            w = np.asarray(weights, dtype=np.float64)
            if w.shape != (Lat, T) or not np.all(np.isfinite(w)):
                raise ValueError(f"weights: must be a finite array of shape ({Lat}, {T})")
            self._W = w.copy()
        if sigma2 is not None:
            if not math.isfinite(float(sigma2)) or float(sigma2) <= 0:
                raise ValueError("sigma2: must be a finite number > 0")
            self._sigma2 = float(sigma2)
        self._rebuild()
        self._set_estimates()

    # ------------------------------------------------------------------ kernel pieces
    def _d2_rows(self, buckets: np.ndarray) -> np.ndarray:
        return self.prior.sqdist_rows(buckets) / self.prior.n_references

    def _latent_rows(self, d2s: np.ndarray) -> np.ndarray:
        """(L, rows, B) latent kernels k_l on scaled squared distances."""
        return np.stack([kernel_values(k, self._alpha[l], self._beta[l], d2s) for l, k in enumerate(self.kinds)])

    def _kernel_column(self, t: int, b: int) -> np.ndarray:
        """Cov(theta_{t',b'}, theta_{t,b}) for all (t', b'): (T, B)."""
        kl = self._latent_rows(self._d2_rows(np.array([b])))[:, 0, :]  # (L, B)
        coef = (self._W * self._W[:, t][:, None]).T  # (T, L): w_l^t' w_l^t
        return np.asarray(coef @ kl)

    def _prior_diag(self) -> np.ndarray:
        return np.asarray((self._W ** 2).T @ self._alpha)  # (T,) Sigma_tt,bb (k_l(b,b) = alpha_l)

    def _prior_v(self) -> np.ndarray:
        """v_t = Sigma_tt w^t for all t, chunked O(B^2 (K_r + L T))."""
        B = self.prior.n_buckets
        out = np.zeros((self.n_targets, B))
        chunk = max(1, _CHUNK_ELEMS // max(B, 1))
        W2 = self._W ** 2  # (L, T)
        for s in range(0, B, chunk):
            e = min(B, s + chunk)
            kl = self._latent_rows(self._d2_rows(np.arange(s, e)))  # (L, c, B)
            for l in range(self.n_latent):
                out[:, s:e] += W2[l][:, None] * (kl[l] @ self._w.T).T
        return out

    def _ensure_capacity(self, need: int) -> None:
        if need <= self._cap:
            return
        cap = max(need, min(self.n_items * self.n_targets, max(64, 2 * self._cap)))
        T, B = self.n_targets, self.prior.n_buckets
        L = np.zeros((cap, cap))
        A = np.zeros((cap, T, B))
        y = np.zeros(cap)
        if self._cap:
            n = self._cap
            L[:n, :n] = self._L[:n, :n]
            A[:n] = self._A[:n]
            y[:n] = self._y[:n]
        self._L, self._A, self._y, self._cap = L, A, y, cap

    def _buckets_C(self) -> np.ndarray:
        return self.prior.bucket_of_item[np.asarray(self._iC, dtype=np.int64)]

    # ------------------------------------------------------------------ full (re)build
    def _rebuild(self) -> None:
        T, B = self.n_targets, self.prior.n_buckets
        n = self.n_total_observed
        self._ensure_capacity(n + 1)
        self._v = self._prior_v()
        if n == 0:
            self._g = np.zeros((T, B))
            self._h = np.zeros((T, B))
            self._diag = np.tile(self._prior_diag()[:, None], (1, B))
            return
        tC = np.asarray(self._tC, dtype=np.int64)
        bC = self._buckets_C()
        kl = self._latent_rows(self._d2_rows(bC))  # (L, n, B)
        # K[i, t, b] = sum_l w_l^{t_i} w_l^t k_l(b_i, b)
        K = np.einsum("ln,lt,lnb->ntb", self._W[:, tC], self._W, kl, optimize=True)
        G = K[:, tC, bC].copy()
        G[np.diag_indices(n)] += self._sigma2 * self._Nb[bC]
        L = _chol(G)
        A_flat, y = lower_solves(L, K.reshape(n, T * B), np.asarray(self._sC) - self._mu[bC])
        A = A_flat.reshape(n, T, B)
        del K, A_flat
        self._L[:n, :n] = L
        self._A[:n] = A
        self._y[:n] = y
        self._h = np.einsum("n,ntb->tb", y, A)
        Aw = np.einsum("ntb,tb->nt", A, self._w)
        self._g = np.einsum("ntb,nt->tb", A, Aw)
        self._diag = self._prior_diag()[:, None] - np.einsum("ntb,ntb->tb", A, A)

    # ------------------------------------------------------------------ one appended row
    def _extend(self, t: int, b: int, n: int) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray]:
        kcol = self._kernel_column(t, b)  # (T, B)
        noise = self._Nb[b] * self._sigma2
        if n:
            tC = np.asarray(self._tC, dtype=np.int64)
            bC = self._buckets_C()
            l = solve_triangular(self._L[:n, :n], kcol[tC, bC], lower=True, check_finite=False)
            m = np.tensordot(l, self._A[:n], axes=1)  # (T, B) = l^T A
            dd = kcol[t, b] + noise - float(l @ l)
        else:
            l = np.zeros(0)
            m = np.zeros_like(kcol)
            dd = kcol[t, b] + noise
        floor = 1e-12 * (kcol[t, b] + noise)
        lnn = math.sqrt(dd if dd > floor else floor)
        a = (kcol - m) / lnn
        self._L[n, :n] = l
        self._L[n, n] = lnn
        self._A[n] = a
        return kcol, l, lnn, m, a

    # ------------------------------------------------------------------ estimates / IG
    def _set_estimates(self) -> None:
        N = self.n_items
        w = self._w
        est = (self._sum_s + np.einsum("tb,tb->t", w, self._mu[None, :] + self._h)) / N
        var = (self._sigma2 * (w @ self._Nb) + np.einsum("tb,tb->t", w, self._v - self._g)) / (N * N)
        self.estimates = est.astype(np.float64)
        self.variances = np.maximum(var, 0.0)

    def information_gain(self, target: int) -> np.ndarray:
        """alpha_IG^t per bucket (IG on R_t of observing target t there); -inf where t has no unobserved item."""
        t = int(target)
        return information_gain_scores(self._w[t], self._v[t], self._g[t], self._diag[t], self._sigma2, self._Nb)

    # ------------------------------------------------------------------ propose / observe
    def _budget_left(self, t: int) -> int:
        left = self.n_items - int(self.n_observed[t])
        if self.config.max_items is not None:
            left = min(left, self.config.max_items - int(self.n_observed[t]))
        return max(left, 0)

    def propose(self) -> list[tuple[int, int]]:
        """Next (target, item) pairs: all pending initial pairs (item-major), then round-robin.

        After the initial phase: the next ``batch_size`` active targets in round-robin order (starting at
        the pointer, which moves past each observed target), one item each.
        """
        if self.all_stopped:
            return []
        T = self.n_targets
        if self.in_init_phase():
            pairs = []
            for i in self._init_for_target:
                for t in range(T):
                    if not self.stopped[t] and not self._obs[t, i]:
                        pairs.append((t, int(i)))
            return pairs
        rng = np.random.default_rng([self.config.seed, self.n_total_observed])
        p = self.prior
        out: list[tuple[int, int]] = []
        for j in range(T):
            if len(out) >= self.config.batch_size:
                break
            t = (self._rr + j) % T
            if self.stopped[t] or self._budget_left(t) <= 0:
                continue
            if self.selection == "random":
                unobs = np.flatnonzero(~self._obs[t])
                out.append((t, int(rng.choice(unobs))))
                continue
            b = int(np.argmax(self.information_gain(t)))
            items = p.items_by_bucket[p.bucket_offsets[b]:p.bucket_offsets[b + 1]]
            cand = items[~self._obs[t, items]]
            out.append((t, int(rng.choice(cand))))
        return out

    def observe(self, target: int, item: int, score: float) -> None:
        for name, val in (("target", target), ("item", item)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)):
                raise ValueError(f"{name}: must be an integer index, got {val!r}")
        t, item = int(target), int(item)
        if not 0 <= t < self.n_targets:
            raise ValueError(f"target: {t} out of range [0, {self.n_targets})")
        if not 0 <= item < self.n_items:
            raise ValueError(f"item: {item} out of range [0, {self.n_items})")
        if self.stopped[t]:
            raise ValueError(f"target: {t} stopped ({self.stop_reasons[t]}); no more observations")
        if self._obs[t, item]:
            raise ValueError(f"item: {item} already observed for target {t}")
        s = checked_score(score)
        move_pointer = not self.in_init_phase()
        b = int(self.prior.bucket_of_item[item])
        n = self.n_total_observed
        self._ensure_capacity(n + 2)
        kcol, l, lnn, m, a = self._extend(t, b, n)
        y_new = (s - self._mu[b] - float(l @ self._y[:n])) / lnn
        self._y[n] = y_new
        self._h += a * y_new
        self._w[t, b] -= 1.0
        self._v[t] -= kcol[t]
        self._g[t] -= m[t]
        self._g += a * np.einsum("tb,tb->t", a, self._w)[:, None]
        self._diag -= a * a
        self._obs[t, item] = True
        self._tC.append(t)
        self._iC.append(item)
        self._sC.append(s)
        self._sum_s[t] += s
        self.n_observed[t] += 1
        if move_pointer:
            self._rr = (t + 1) % self.n_targets
        F = self.config.refit_every
        if F > 0 and self.n_total_observed % F == 0 and not self._obs.all():
            self._refit()
        self._set_estimates()
        lo, hi = self.cis[t]
        self.trajectory.append({"target": t, "n": int(self.n_observed[t]), "estimate": self.reported_estimate(t),
                                "variance": float(self.variances[t]), "ci": [lo, hi]})
        self._check_stop(t)

    # ------------------------------------------------------------------ refit / stop
    def _nll_data(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        tC = np.asarray(self._tC, dtype=np.int64)
        bC = self._buckets_C()
        d2s = self._d2_rows(bC)[:, bC]
        r = np.asarray(self._sC) - self._mu[bC]
        return tC, bC, d2s, r

    def neg_log_marginal_likelihood(self) -> float:
        """NLL of all observed (target, item, score) under the current hyperparameters."""
        tC, bC, d2s, r = self._nll_data()
        return multi_target_nll(self.kinds, self._alpha, self._beta, self._W, self._sigma2, d2s, tC,
                                self._Nb[bC], r)

    def _refit(self) -> None:
        """AdamW on (log alpha, log beta, w, log sigma^2), float64, fixed steps; keeps the best iterate.

        The gradient is analytic (:func:`multi_target_nll_and_grad`) and the optimizer is torch's AdamW
        step for step (:class:`~evalplan.core.sequential.numeric.AdamW`): no torch in the process."""
        tC, bC, d2s, r = self._nll_data()
        n = r.shape[0]
        noise = self._Nb[bC]
        log_a, log_b, Wp = np.log(self._alpha), np.log(self._beta), self._W.copy()
        log_s2 = np.array(math.log(self._sigma2))

        def snapshot() -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
            return np.exp(log_a), np.exp(log_b), Wp.copy(), float(math.exp(float(log_s2)))

        before = dict(alpha=self._alpha.copy(), beta=self._beta.copy(), weights=self._W.copy(),
                      sigma2=self._sigma2)
        opt = AdamW([log_a, log_b, Wp, log_s2], lr=self.learning_rate)
        best_val, best = math.inf, snapshot()
        nll_start = None
        for step in range(self.adam_steps + 1):
            out = multi_target_nll_and_grad(self.kinds, log_a, log_b, Wp, log_s2, d2s, tC, noise, r)
            if out is None or not math.isfinite(out[0]):
                break
            val, grads = out
            if nll_start is None:
                nll_start = val
            if val < best_val:
                best_val, best = val, snapshot()
            if step == self.adam_steps or not all(np.isfinite(g).all() for g in grads):
                break
            opt.step(grads)
        self._alpha, self._beta, self._W, self._sigma2 = best
        self.n_refits += 1
        self.refit_history.append({"n_total": n, "before": before,
                                   "after": dict(alpha=self._alpha.copy(), beta=self._beta.copy(),
                                                 weights=self._W.copy(), sigma2=self._sigma2),
                                   "nll_before": nll_start, "nll_after": best_val})
        self._rebuild()

    def _check_stop(self, t: int) -> None:
        cfg = self.config
        n = int(self.n_observed[t])
        self._iter_estimates[t].append(float(self.estimates[t]))
        rule = cfg.stop_rule
        if rule is not None:  # precision stopping (API.md) replaces the paper's rule
            lo, hi = self.cis[t]
            if rule.half_width > 0 and n >= rule.min_items and (hi - lo) / 2.0 <= rule.half_width:
                self.stopped[t], self.stop_reasons[t] = True, "precision"
                return
        elif not self.in_init_phase(t):  # the initial 10% is always evaluated
            if paper_converged(self._iter_estimates[t], cfg.window, 2.0 * Z975 * math.sqrt(self.variances[t]), cfg):
                self.stopped[t], self.stop_reasons[t] = True, "converged"
                return
        if cfg.max_items is not None and n >= cfg.max_items:
            self.stopped[t], self.stop_reasons[t] = True, "max_items"
        elif n >= self.n_items:
            self.stopped[t], self.stop_reasons[t] = True, "exhausted"
