"""Benchmark-level subset selection from a models x benchmarks score matrix (paper 000, §4.4).

Given a score matrix ``S`` (models x benchmarks) of *training* models, choose ``k`` benchmarks
``A`` so that an unseen model's scores on the complement ``Ā`` can be reconstructed from its
scores on ``A`` alone (the protocol of Smola 2026 that §4.4 follows).

Conventions (decided once, used everywhere in this module)
---------------------------------------------------------
* **Standardized space.** ``fit`` standardizes every benchmark with the *training* mean
  ``mean_`` and the *training* standard deviation ``scale_`` (``ddof=1``; a constant column
  gets ``scale_ = 1``). ``cov_`` is the sample covariance (``ddof=1``) of the standardized
  training scores, i.e. the benchmark *correlation* matrix Σ̂ (unit diagonal). This matches the
  paper's "correlation matrix Σ̂ is estimated on the training split" and its "R² in
  standardized space" (eq. 9). Selection (all three methods), imputation (eq. 8) and the
  residual variance fraction (eqs. 10-11) all use this same Σ̂.
* **Imputation is scale-equivariant.** The Gaussian conditional mean (eq. 8) computed in
  standardized space with the correlation matrix and mapped back (``x * scale_ + mean_``) is
  *identical* to eq. 8 in raw units with the raw covariance ``D Σ̂ D`` (``D = diag(scale_)``),
  so standardizing changes nothing about predictions; it only fixes which Σ̂ the selectors see
  and how eq. 9 weights the benchmarks.
* **Missing training scores (NaN).** Each NaN cell of ``S_train`` is replaced by its column's
  observed training mean before the standardization (column-mean imputation). This shrinks the
  variances/covariances of sparsely observed benchmarks towards 0; it is the simplest rule and is
  adequate for the near-complete leaderboards used here. A column with no observed value is an
  error. ``predict`` requires the selected scores to be complete (NaN -> ``ValueError``);
  :func:`test_r2` skips NaN test cells.
* **Facility location** (FL) maximizes ``F(A) = Σ_i max_{j∈A} Σ⁺_ij`` on the clipped matrix
  ``Σ⁺_ij = max(Σ̂_ij, 0)`` (FL needs non-negative similarities); imputation still uses Σ̂.
* **Greedy entropy** (DPP MAP on the covariance kernel) maximizes ``½ log det Σ_AA``; the gain
  of ``v`` is ``½ log σ²(v | A)`` (conditional variance).
* **Greedy mutual information** maximizes ``I(A; Ā) = ½ log det Σ_AA + ½ log det Σ_ĀĀ
  − ½ log det Σ`` (Krause et al. 2008); the gain of ``v`` is
  ``½ log σ²(v | A) − ½ log σ²(v | Ā \\ {v})``. With fewer training models than benchmarks
  (MMLU: 57 training models, 57 benchmarks, centred -> rank <= 56) Σ̂ is singular and
  ``log det Σ_ĀĀ`` is -inf, so both log-det methods run on ``Σ̂ + λ I`` with
  ``λ = ridge * mean(diag Σ̂)`` (``ridge`` default ``1e-3``; ``λ = 1e-3`` for a correlation
  matrix). The ridge only affects which benchmarks the log-det methods select.
* **Singular Σ_AA in eq. 8 / eq. 10.** Solved by Cholesky; if Σ_AA is not numerically
  positive definite a jitter ``ε · mean(diag Σ_AA)`` is added, ``ε = 1e-10, 1e-8, ..., 1e-2``
  (first one that factorizes). This is the "tiny ridge" fallback; it is a no-op on
  well-conditioned blocks.
* **Ties** (e.g. the first greedy-entropy pick on a correlation matrix, where every
  ``σ²(v | ∅) = 1``) are broken uniformly at random with ``numpy.random.default_rng(seed)``
  among candidates whose gain is within ``1e-12 · max(1, |best|)`` of the best; hence fixed
  seed -> identical ranking. Greedy prefixes are consistent: the first ``j`` entries of
  ``ranking_`` for ``k`` equal the ranking for ``k = j`` (same seed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.linalg import cho_solve

from evalplan.core.linalg import jittered_cholesky

METHODS = ("facility_location", "entropy", "mutual_information")
_TIE_RTOL = 1e-12
_JITTERS = (0.0, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2)


# --------------------------------------------------------------------------- linear algebra
def _cholesky(m: np.ndarray) -> tuple[np.ndarray, bool]:
    """Cholesky factor of ``m`` with the escalating-jitter fallback (see module docstring)."""
    return jittered_cholesky(m, jitters=_JITTERS, check_finite=True), True


def _pick(gains: np.ndarray, candidates: np.ndarray, rng: np.random.Generator) -> int:
    """Index into ``candidates`` of the best gain, ties broken at random."""
    g = gains[candidates]
    best = np.max(g)
    tied = np.flatnonzero(g >= best - _TIE_RTOL * max(1.0, abs(best)))
    return int(candidates[tied[0] if len(tied) == 1 else rng.choice(tied)])


# --------------------------------------------------------------------------- greedy selectors
def greedy_facility_location(sim: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Greedy maximization of ``F(A) = Σ_i max_{j∈A} sim_ij`` (``sim`` must be >= 0).

    Returns ``(order, gains)``: selected column indices in greedy order and the marginal gain of
    each pick (``F(∅) = 0``)."""
    sim = np.asarray(sim, dtype=float)
    n = _check_square(sim, k)
    if np.any(sim < 0):
        raise ValueError("facility location needs non-negative similarities")
    rng = np.random.default_rng(seed)
    cover = np.zeros(n)
    chosen = np.zeros(n, dtype=bool)
    order, gains = [], []
    for _ in range(k):
        gain = np.maximum(sim - cover[:, None], 0.0).sum(axis=0)  # gain of column j
        j = _pick(gain, np.flatnonzero(~chosen), rng)
        order.append(j)
        gains.append(gain[j])
        chosen[j] = True
        cover = np.maximum(cover, sim[:, j])
    return np.array(order, dtype=int), np.array(gains)


def _conditional_variances(cov: np.ndarray, selected: Sequence[int] | np.ndarray) -> np.ndarray:
    """``σ²(v | A)`` for every ``v`` (0 for ``v ∈ A`` up to rounding)."""
    d = np.diag(cov).copy()
    if len(selected) == 0:
        return d
    a = np.asarray(selected, dtype=int)
    c = _cholesky(cov[np.ix_(a, a)])
    w = cho_solve(c, cov[a, :])  # |A| x n
    return np.asarray(d - np.einsum("an,an->n", cov[a, :], w))


def greedy_entropy(cov: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Greedy maximization of ``½ log det cov_AA`` (``cov`` positive definite).

    Gain of ``v`` given ``A``: ``½ log σ²(v | A)``."""
    cov = np.asarray(cov, dtype=float)
    n = _check_square(cov, k)
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    gains = []
    for _ in range(k):
        var = _conditional_variances(cov, chosen)
        g = 0.5 * np.log(np.maximum(var, np.finfo(float).tiny))
        mask = np.ones(n, dtype=bool)
        mask[chosen] = False
        j = _pick(g, np.flatnonzero(mask), rng)
        chosen.append(j)
        gains.append(g[j])
    return np.array(chosen, dtype=int), np.array(gains)


def greedy_mutual_information(cov: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Greedy maximization of ``I(A; V\\A) = ½ log det cov_AA + ½ log det cov_ĀĀ − ½ log det cov``.

    ``cov`` must be positive definite (regularize first). Gain of ``v`` given ``A``:
    ``½ log σ²(v | A) − ½ log σ²(v | Ā\\{v})`` where ``σ²(v | Ā\\{v}) = 1 / [(cov_ĀĀ)⁻¹]_vv``.
    The objective is not monotone: gains can be negative; exactly ``k`` items are still picked."""
    cov = np.asarray(cov, dtype=float)
    n = _check_square(cov, k)
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    gains = []
    tiny = np.finfo(float).tiny
    for _ in range(k):
        rest = np.setdiff1d(np.arange(n), chosen)
        var_a = _conditional_variances(cov, chosen)
        c = _cholesky(cov[np.ix_(rest, rest)])
        prec_diag = np.diag(cho_solve(c, np.eye(len(rest))))
        var_rest = np.zeros(n)
        var_rest[rest] = 1.0 / prec_diag
        g = np.full(n, -np.inf)
        g[rest] = 0.5 * np.log(np.maximum(var_a[rest], tiny)) - 0.5 * np.log(np.maximum(var_rest[rest], tiny))
        j = _pick(g, rest, rng)
        chosen.append(j)
        gains.append(g[j])
    return np.array(chosen, dtype=int), np.array(gains)


def _check_square(m: np.ndarray, k: int) -> int:
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError("expected a square matrix")
    n = m.shape[0]
    if not 0 <= k <= n:
        raise ValueError(f"k={k} must be in [0, {n}]")
    return int(n)


# --------------------------------------------------------------------------- imputation / metrics
class GaussianImputer:
    """Gaussian conditional mean (paper eq. 8): ``x̂_Ā = μ_Ā + Σ_ĀA Σ_AA⁻¹ (x_A − μ_A)``.

    ``mean`` (B,), ``cov`` (B x B), ``selected`` the observed columns in the order in which
    ``predict`` receives them. Works in whatever space ``mean``/``cov`` are in."""

    def __init__(self, mean: np.ndarray, cov: np.ndarray, selected: Sequence[int] | np.ndarray) -> None:
        self.mean = np.asarray(mean, dtype=float)
        self.cov = np.asarray(cov, dtype=float)
        self.selected = np.asarray(selected, dtype=int)
        b = len(self.mean)
        if self.cov.shape != (b, b):
            raise ValueError("cov must be B x B with B = len(mean)")
        if len(np.unique(self.selected)) != len(self.selected):
            raise ValueError("selected has duplicates")
        self.rest = np.setdiff1d(np.arange(b), self.selected)
        a = self.selected
        if len(a):
            c = _cholesky(self.cov[np.ix_(a, a)])
            # coef: |A| x |Ā|, so x̂_Ā = μ_Ā + (x_A − μ_A) @ coef
            self.coef_ = cho_solve(c, self.cov[np.ix_(a, self.rest)])
        else:
            self.coef_ = np.zeros((0, len(self.rest)))

    def predict(self, x_selected: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x_selected, dtype=float))
        if x.shape[1] != len(self.selected):
            raise ValueError(f"expected {len(self.selected)} columns, got {x.shape[1]}")
        if np.isnan(x).any():
            raise ValueError("selected scores must be complete (no NaN)")
        out = np.empty((x.shape[0], len(self.mean)))
        out[:, self.selected] = x
        out[:, self.rest] = self.mean[self.rest] + (x - self.mean[self.selected]) @ self.coef_
        return out


def test_r2(
    S_test: np.ndarray,
    S_pred: np.ndarray,
    train_mean: np.ndarray,
    selected: Sequence[int] | np.ndarray,
    scale: np.ndarray | None = None,
) -> float:
    """Test R² over the unselected columns (paper eq. 9).

    ``1 − Σ_i Σ_{j∈Ā} (Ŝ_ij − S_ij)² / Σ_i Σ_{j∈Ā} (S_ij − x̄_j)²`` with ``x̄_j = train_mean[j]``.
    With ``scale`` (the training std, e.g. ``BenchmarkSelector.scale_``) both sums are taken in
    standardized space, ``(S − x̄) / scale``, as in the paper; without it, in raw units. NaN cells
    of ``S_test`` are skipped. The constant predictor ``Ŝ_ij = x̄_j`` scores exactly 0."""
    S_test = np.atleast_2d(np.asarray(S_test, dtype=float))
    S_pred = np.atleast_2d(np.asarray(S_pred, dtype=float))
    mu = np.asarray(train_mean, dtype=float)
    s = np.ones_like(mu) if scale is None else np.asarray(scale, dtype=float)
    rest = np.setdiff1d(np.arange(S_test.shape[1]), np.asarray(selected, dtype=int))
    y = (S_test[:, rest] - mu[rest]) / s[rest]
    yhat = (S_pred[:, rest] - mu[rest]) / s[rest]
    ok = ~np.isnan(y)
    den = float(np.sum(y[ok] ** 2))
    if den == 0.0:
        return float("nan")
    return 1.0 - float(np.sum((yhat[ok] - y[ok]) ** 2)) / den


test_r2.__test__ = False  # type: ignore[attr-defined]  # not a pytest test despite its name


def residual_variance_fraction(cov: np.ndarray, selected: Sequence[int] | np.ndarray) -> float:
    """``RV(A) = tr(Σ_Ā|A) / tr(Σ)`` with the Schur complement
    ``Σ_Ā|A = Σ_ĀĀ − Σ_ĀA Σ_AA⁻¹ Σ_AĀ`` (paper eqs. 10-11). ``RV(∅) = 1``, ``RV(V) = 0``."""
    cov = np.asarray(cov, dtype=float)
    total = float(np.trace(cov))
    a = np.asarray(selected, dtype=int)
    rest = np.setdiff1d(np.arange(len(cov)), a)
    if len(rest) == 0:
        return 0.0
    if len(a) == 0:
        return float(np.trace(cov[np.ix_(rest, rest)])) / total
    c = _cholesky(cov[np.ix_(a, a)])
    w = cho_solve(c, cov[np.ix_(a, rest)])
    schur_tr = np.trace(cov[np.ix_(rest, rest)]) - np.einsum("ar,ar->", cov[np.ix_(a, rest)], w)
    return float(schur_tr) / total


# --------------------------------------------------------------------------- estimator
class BenchmarkSelector:
    """Select ``k`` benchmarks from a training score matrix (scikit-learn style).

    ``fit(S_train)`` (models x benchmarks, NaN allowed) sets:

    * ``mean_``, ``scale_`` -- training mean / std per benchmark (std ``ddof=1``, 1 if constant);
    * ``cov_`` -- Σ̂, covariance of the standardized training scores (= correlation matrix);
    * ``ranking_`` -- the ``k`` selected benchmark indices in greedy order;
    * ``gains_`` -- the marginal gain of each pick (objective units, see module docstring);
    * ``ridge_`` -- the absolute λ added to Σ̂ for the log-det methods (0 for FL).

    ``predict(S_selected)`` imputes the full matrix (raw units) from the scores on
    ``ranking_[:k]`` (columns in that order; ``k`` defaults to all of ``ranking_``)."""

    def __init__(self, k: int, method: str = "facility_location", seed: int = 0, ridge: float = 1e-3) -> None:
        self.k = k
        self.method = method
        self.seed = seed
        self.ridge = ridge

    def fit(self, S_train: np.ndarray, y: Any = None) -> BenchmarkSelector:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        S = np.asarray(S_train, dtype=float)
        if S.ndim != 2 or S.shape[0] < 2:
            raise ValueError("S_train must be models x benchmarks with at least 2 models")
        observed = ~np.isnan(S)
        if not observed.any(axis=0).all():
            raise ValueError("every benchmark needs at least one observed training score")
        col_mean = np.nanmean(S, axis=0)
        S = np.where(observed, S, col_mean)
        self.mean_ = S.mean(axis=0)
        sd = S.std(axis=0, ddof=1)
        self.scale_ = np.where(sd > 0, sd, 1.0)
        Z = (S - self.mean_) / self.scale_
        self.cov_ = (Z.T @ Z) / (Z.shape[0] - 1)
        self.n_features_in_ = S.shape[1]
        if self.method == "facility_location":
            self.ridge_ = 0.0
            self.ranking_, self.gains_ = greedy_facility_location(np.maximum(self.cov_, 0.0), self.k, self.seed)
        else:
            self.ridge_ = self.ridge * float(np.mean(np.diag(self.cov_)))
            reg = self.cov_ + self.ridge_ * np.eye(len(self.cov_))
            fn = greedy_entropy if self.method == "entropy" else greedy_mutual_information
            self.ranking_, self.gains_ = fn(reg, self.k, self.seed)
        self._imputers: dict[int, GaussianImputer] = {}
        return self

    def imputer(self, k: int | None = None) -> GaussianImputer:
        """Eq.-8 imputer in standardized space for the first ``k`` selected benchmarks."""
        k = len(self.ranking_) if k is None else k
        if not 0 <= k <= len(self.ranking_):
            raise ValueError(f"k={k} must be in [0, {len(self.ranking_)}]")
        if k not in self._imputers:
            self._imputers[k] = GaussianImputer(np.zeros(self.n_features_in_), self.cov_, self.ranking_[:k])
        return self._imputers[k]

    def predict(self, S_selected: np.ndarray, k: int | None = None) -> np.ndarray:
        """Full T x B prediction (raw units) from the T x k scores on ``ranking_[:k]``."""
        imp = self.imputer(k)
        sel = imp.selected
        x = np.atleast_2d(np.asarray(S_selected, dtype=float))
        z = (x - self.mean_[sel]) / self.scale_[sel]
        out = imp.predict(z) * self.scale_ + self.mean_
        out[:, sel] = x  # exact copy of the observed scores (no round-off)
        return np.asarray(out)

    def residual_variance_fraction(self, k: int | None = None) -> float:
        k = len(self.ranking_) if k is None else k
        return residual_variance_fraction(self.cov_, self.ranking_[:k])
