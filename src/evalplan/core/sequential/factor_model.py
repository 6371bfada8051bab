"""``factor``: a low-rank (logistic factor) working model of the item x model score matrix, after FAQ (Wu, Nair &
Candes 2026, "Efficiently Evaluating LLM Performance with Statistical Guarantees": a factor model fitted on the
reference models, the new model's factor given a Gaussian prior from the references' factors and updated online
from its observed items).

Item side, fitted once per reference set (:func:`fit_factor`, cached on the prior): scores scaled to [0, 1] by the
score range, ``P(y_ri = 1) = sigmoid(b_i + U_r . V_i)`` (binary) or the same mean with the Bernoulli quasi-
likelihood (bounded continuous scores), ``k`` factors; MAP by L-BFGS over ``(b, U, V)`` with an L2 penalty
``lambda`` (FAQ: AdamW weight decay), items of equal reference scores merged into one weighted bucket. ``k``
and ``lambda`` are chosen on the references by one entrywise hold-out split (FAQ: 5-fold entrywise CV with the
one-standard-error rule; here one split, the smallest hold-out deviance), on at most ``CV_BUCKETS`` buckets.

Target side (:class:`FactorModel`), refitted after every observation from the observed items only (predictable):
its factor ``u ~ N(m0, S0)`` with ``m0, S0`` the mean and covariance of the references' factors (FAQ's ``MU0,
SIGMA0 = U.mean(0), cov(U)``), the posterior's mode by Newton steps from the last mode (quasi-likelihood divided
by the dispersion ``phi``, 1 for binary scores, read off the references otherwise), Laplace covariance ``H^-1``.
Prediction of an item: ``p_j = sigmoid(eta_j / sqrt(1 + pi s_j^2 / 8))`` (the probit approximation of the
posterior mean), ``eta_j = b_j + V_j . u``, ``s_j^2 = V_j H^-1 V_j``; its uncertainty ``d_j = (p_j (1 - p_j))^2
s_j^2`` (delta method) and residual variance ``phi p_j (1 - p_j)``, all in score units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from .base import derived, store_derived
from .prior import BucketPrior

KS = (1, 2, 3, 5, 8)  # the candidate numbers of factors
LAMBDAS = (0.003, 0.01, 0.03)  # the candidate L2 penalties (per entry of the mean loss)
BIAS_PENALTY = 1e-3  # keeps an item every reference solves (or fails) finite
HOLDOUT = 0.1  # the share of (reference, item) entries held out to choose k and lambda
CV_BUCKETS = 2000  # the choice uses at most this many buckets (seeded subset)
MAXITER = 200  # L-BFGS iterations of a fit
CLIP = 1e-6
NEWTON_STEPS = 8
PRIOR_JITTER = 1e-3  # added to the prior covariance's diagonal, x its mean variance
SHIFT_SD = 1.0  # prior sd of the target's logit shift (an ability offset the references' factors may not reach)
# the largest references x items a session may fit the factor model on: its item side is fitted inside the
# session's create request (248 s at 400 x 12,000 on the loaded 2-core machine, about linear in the cells), so
# larger reference sets are refused (a located 422) rather than holding a worker for minutes
MAX_FIT_CELLS = 500_000


@dataclass(frozen=True)
class FactorFit:
    """The item side: ``b`` (B,), ``V`` (B, k), the references' factors ``U`` (M, k), the target's prior
    ``N(m0, S0)``, the dispersion ``phi``, the chosen ``k`` and ``lam`` and the hold-out deviance per setting
    (``(k, lambda, deviance)`` rows: plain tuples, so that the sessions' prior store keeps the fit)."""

    b: np.ndarray
    V: np.ndarray
    U: np.ndarray
    m0: np.ndarray
    S0: np.ndarray
    phi: float
    k: int
    lam: float
    cv: tuple[tuple[int, float, float], ...]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)))


def _fit(Y: np.ndarray, W: np.ndarray, c: np.ndarray, k: int, lam: float, init: tuple[np.ndarray, ...] | None,
         maxiter: int = MAXITER) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MAP of ``(b, U, V)`` for scores ``Y`` (M, B) in [0, 1] with entry weights ``W`` (M, B; 0 = held out) and
    bucket sizes ``c``: mean weighted Bernoulli (quasi-)deviance + ``lam / 2`` (mean |U_r|^2 + weighted mean
    |V_b|^2) + ``BIAS_PENALTY / 2`` weighted mean b^2."""
    M, B = Y.shape
    cw = c / c.sum()
    Wn = W * cw[None, :] / M  # sums to ~1 over the kept entries
    if init is None:
        Z = np.log(np.clip(Y, 0.05, 0.95) / (1 - np.clip(Y, 0.05, 0.95)))
        b0 = Z.mean(axis=0)
        Uz, s, Vt = np.linalg.svd((Z - b0) * np.sqrt(cw)[None, :], full_matrices=False)
        r = min(k, s.size)
        a = M ** 0.25  # U V^T is the rank-r SVD; a balances the two penalties (mean |U_r|^2 = weighted |V_b|^2)
        U0 = np.zeros((M, k))
        V0 = np.zeros((B, k))
        U0[:, :r] = Uz[:, :r] * np.sqrt(s[:r]) * a
        V0[:, :r] = Vt[:r].T / np.sqrt(cw)[:, None] * np.sqrt(s[:r]) / a
        x0 = np.concatenate([b0, U0.ravel(), V0.ravel()])
    else:
        x0 = np.concatenate([a.ravel() for a in init])

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        b = x[:B]
        U = x[B:B + M * k].reshape(M, k)
        V = x[B + M * k:].reshape(B, k)
        eta = U @ V.T + b[None, :]
        # Bernoulli deviance with fractional y: softplus(eta) - y eta
        sp = np.logaddexp(0.0, eta)
        loss = float((Wn * (sp - Y * eta)).sum())
        G = Wn * (_sigmoid(eta) - Y)  # d loss / d eta
        gb = G.sum(axis=0) + BIAS_PENALTY * cw * b
        gU = G @ V + lam * U / M
        gV = G.T @ U + lam * cw[:, None] * V
        loss += 0.5 * lam * (float((U * U).sum()) / M + float((cw[:, None] * V * V).sum()))
        loss += 0.5 * BIAS_PENALTY * float((cw * b * b).sum())
        return loss, np.concatenate([gb, gU.ravel(), gV.ravel()])

    res = minimize(fun, x0, jac=True, method="L-BFGS-B", options={"maxiter": maxiter})
    x = res.x
    return x[:B].copy(), x[B:B + M * k].reshape(M, k).copy(), x[B + M * k:].reshape(B, k).copy()


def _deviance(Y: np.ndarray, W: np.ndarray, c: np.ndarray, b: np.ndarray, U: np.ndarray, V: np.ndarray) -> float:
    eta = U @ V.T + b[None, :]
    w = W * c[None, :]
    return float((w * (np.logaddexp(0.0, eta) - Y * eta)).sum() / max(w.sum(), 1e-300))


def fit_factor(prior: BucketPrior, score_range: tuple[float, float], *, ks: tuple[int, ...] | None = None,
               lambdas: tuple[float, ...] | None = None, seed: int = 0) -> FactorFit:
    """The item side for ``prior``'s references (module docstring), cached on the prior per score range;
    ``ks`` and ``lambdas`` the candidate settings (default :data:`KS`, :data:`LAMBDAS`)."""
    ks = KS if ks is None else tuple(ks)
    lambdas = LAMBDAS if lambdas is None else tuple(lambdas)
    key = f"factor_fit[{score_range[0]!r},{score_range[1]!r},{ks},{lambdas},{seed}]"
    got = derived(prior, key)
    if got is not None:
        return got  # type: ignore[no-any-return]
    lo, hi = score_range
    Y = np.clip((prior.bucket_vectors.T - lo) / (hi - lo), 0.0, 1.0)  # (M, B)
    M, B = Y.shape
    c = prior.bucket_sizes.astype(np.float64)
    rng = np.random.default_rng([seed, 29])
    cols = np.sort(rng.choice(B, size=CV_BUCKETS, replace=False)) if B > CV_BUCKETS else np.arange(B)
    Yc, cc = Y[:, cols], c[cols]
    held = rng.random(Yc.shape) < HOLDOUT
    cv: list[tuple[int, float, float]] = []
    best = (math.inf, ks[0], lambdas[0])
    ks = tuple(k for k in ks if k < M) or (1,)
    for lam in lambdas:
        for k in ks:
            b, U, V = _fit(Yc, (~held).astype(np.float64), cc, k, lam, None)
            dev = _deviance(Yc, held.astype(np.float64), cc, b, U, V)
            cv.append((k, lam, dev))
            if dev < best[0]:
                best = (dev, k, lam)
    _, k, lam = best
    b, U, V = _fit(Y, np.ones_like(Y), c, k, lam, None)
    p = _sigmoid(U @ V.T + b[None, :])
    binary = bool(np.all((Y == 0.0) | (Y == 1.0)))
    if binary:
        phi = 1.0
    else:  # the quasi-likelihood's dispersion: Pearson's, weighted by bucket sizes
        pv = np.clip(p * (1 - p), 1e-4, None)
        phi = float(max(((c[None, :] * (Y - p) ** 2 / pv).sum()) / (c.sum() * M), 1e-3))
    m0 = U.mean(axis=0)
    S0 = np.atleast_2d(np.cov(U, rowvar=False)) if M > 1 else np.eye(k)
    S0 = S0 + PRIOR_JITTER * max(float(np.trace(S0)) / k, 1e-6) * np.eye(k)
    fit = FactorFit(b=b, V=V, U=U, m0=m0, S0=S0, phi=phi, k=k, lam=lam, cv=tuple(cv))
    return store_derived(prior, key, fit)  # type: ignore[no-any-return]


class FactorModel:
    """The target side (module docstring): per-bucket counts and score sums of the observed items; ``observe``
    refits the target's factor, ``predict`` gives per bucket (mean, uncertainty of the mean, residual variance)
    in score units."""

    def __init__(self, fit: FactorFit, n_buckets: int, score_range: tuple[float, float],
                 shift_sd: float = SHIFT_SD) -> None:
        self.fit = fit
        self.lo, self.hi = float(score_range[0]), float(score_range[1])
        self.span = self.hi - self.lo
        self._cnt = np.zeros(n_buckets)
        self._ysum = np.zeros(n_buckets)  # scaled to [0, 1]
        # the target's coefficients: its factor and (shift_sd > 0) a logit shift, on the features [V, 1]
        k = fit.k
        self.shift = shift_sd > 0
        self._V = np.hstack([fit.V, np.ones((fit.V.shape[0], 1))]) if self.shift else fit.V
        S0 = np.zeros((k + 1, k + 1)) if self.shift else fit.S0.copy()
        if self.shift:
            S0[:k, :k] = fit.S0
            S0[k, k] = shift_sd * shift_sd
        self._m0 = np.concatenate([fit.m0, [0.0]]) if self.shift else fit.m0.copy()
        self._P0 = np.linalg.inv(S0)
        self.u = self._m0.copy()
        self._H = self._P0.copy()
        self._Hinv = S0
        self._pred: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.n = 0

    def observe(self, bucket: int, score: float) -> None:
        y = min(max((score - self.lo) / self.span, 0.0), 1.0)
        self._cnt[bucket] += 1.0
        self._ysum[bucket] += y
        self.n += 1
        self._refit()

    def _refit(self) -> None:
        f = self.fit
        obs = np.flatnonzero(self._cnt)
        V, b, n, s = self._V[obs], f.b[obs], self._cnt[obs], self._ysum[obs]
        u = self.u
        H = self._H
        for _ in range(NEWTON_STEPS):
            p = _sigmoid(b + V @ u)
            g = V.T @ (s - n * p) / f.phi - self._P0 @ (u - self._m0)
            H = (V * (n * p * (1 - p) / f.phi)[:, None]).T @ V + self._P0
            step = np.linalg.solve(H, g)
            u = u + step
            if float(np.abs(step).max()) < 1e-6:
                break
        p = _sigmoid(b + V @ u)
        H = (V * (n * p * (1 - p) / f.phi)[:, None]).T @ V + self._P0
        self.u, self._H = u, H
        self._Hinv = np.linalg.inv(H)
        self._pred = None

    def predict(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per bucket: the predicted mean score, the variance of that mean (the factor's uncertainty) and the
        residual variance of a score around it, in score units."""
        if self._pred is None:
            f = self.fit
            eta = f.b + self._V @ self.u
            s2 = np.einsum("ij,jk,ik->i", self._V, self._Hinv, self._V)
            p = _sigmoid(eta / np.sqrt(1.0 + math.pi * s2 / 8.0))
            pq = p * (1.0 - p)
            span2 = self.span * self.span
            self._pred = (self.lo + self.span * p, pq * pq * s2 * span2, f.phi * pq * span2)
        return self._pred

    def predict_bucket(self, bucket: int) -> float:
        """The predicted mean score of one bucket (cheap: no full prediction)."""
        if self._pred is not None:
            return float(self._pred[0][bucket])
        f = self.fit
        v = self._V[bucket]
        s2 = float(v @ self._Hinv @ v)
        p = float(_sigmoid(np.array((f.b[bucket] + v @ self.u) / math.sqrt(1.0 + math.pi * s2 / 8.0))))
        return self.lo + self.span * p

    @property
    def state(self) -> dict[str, object]:
        f = self.fit
        return {"k": f.k, "lambda": f.lam, "dispersion": f.phi, "n_observed": self.n,
                "shift": float(self.u[-1]) if self.shift else None}
