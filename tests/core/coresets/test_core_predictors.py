"""Tests for evalplan.core.coresets.predictors / evalplan.core.coresets.intervals (paper 002 §2.3, App. D.1, App. L.1)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import Ridge

from evalplan.core.coresets.intervals import (
    cross_fitted_errors,
    extrapolation_flag,
    guarded_predict,
    interval_from_errors,
    jackknife_plus_bounds,
    loo_conformal_interval,
    pooled_errors,
)
from evalplan.core.coresets.predictors import (
    LAMBDAS_BINARY,
    LAMBDAS_CONTINUOUS,
    AIPWPredictor,
    KernelRidgePredictor,
    MeanPredictor,
    RidgePredictor,
    WeightedMeanPredictor,
    default_lambdas,
)


def _data(M: int = 25, k: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, size=(M, k))
    y = X.mean(axis=1) + 0.3 * (X[:, 0] - 0.5) ** 2 + 0.02 * rng.standard_normal(M)
    return X, y


def _brute_loo_ridge(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    out = np.empty(len(y))
    for i in range(len(y)):
        m = np.arange(len(y)) != i
        r = Ridge(alpha=lam, fit_intercept=True).fit(X[m], y[m])
        out[i] = y[i] - r.predict(X[i : i + 1])[0]
    return out


def _brute_loo_krr(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    out = np.empty(len(y))
    for i in range(len(y)):
        m = np.arange(len(y)) != i
        kr = KernelRidge(alpha=lam, kernel="poly", degree=2, coef0=1.0).fit(X[m], y[m])
        out[i] = y[i] - kr.predict(X[i : i + 1])[0]
    return out


def test_lambda_grids_match_d1() -> None:
    assert np.allclose(LAMBDAS_BINARY, [0.1, 10**-0.5, 1, 10**0.5, 10])
    assert np.allclose(LAMBDAS_CONTINUOUS, [0.01, 10**-1.5, 0.1, 10**-0.5, 1, 10**0.5, 10, 10**1.5, 100])
    assert default_lambdas(np.array([[0, 1], [1, 1.0]])) == LAMBDAS_BINARY
    assert default_lambdas(np.array([[0, 0.5], [1, 1.0]])) == LAMBDAS_CONTINUOUS


@pytest.mark.parametrize("seed", [0, 1])
def test_ridge_loo_equals_brute_force_over_grid(seed: int) -> None:
    X, y = _data(seed=seed)
    p = RidgePredictor(lambdas=LAMBDAS_CONTINUOUS).fit(X, y)
    for j, lam in enumerate(LAMBDAS_CONTINUOUS):
        assert np.allclose(p.loo_residuals_[:, j], _brute_loo_ridge(X, y, lam), atol=1e-9)
    assert p.lambda_ == LAMBDAS_CONTINUOUS[int(np.argmin(p.loo_mse_))]
    ref = Ridge(alpha=p.lambda_).fit(X, y)
    Xt = np.random.default_rng(5).uniform(0, 1, size=(4, X.shape[1]))
    assert np.allclose(p.predict(Xt), ref.predict(Xt), atol=1e-10)


@pytest.mark.parametrize("seed", [0, 1])
def test_krr_loo_equals_brute_force_over_grid(seed: int) -> None:
    X, y = _data(seed=seed)
    p = KernelRidgePredictor(lambdas=LAMBDAS_CONTINUOUS).fit(X, y)
    for j, lam in enumerate(LAMBDAS_CONTINUOUS):
        assert np.allclose(p.loo_residuals_[:, j], _brute_loo_krr(X, y, lam), atol=1e-8)
    assert np.isclose(p.loo_mse_.min(), p.loo_mse_[list(p.lambdas_).index(p.lambda_)])


def test_krr_prediction_equals_sklearn_kernel_ridge() -> None:
    X, y = _data(M=40, k=10, seed=3)
    p = KernelRidgePredictor(degree=2, coef0=1).fit(X, y)
    assert p.gamma_ == pytest.approx(1 / 10)  # sklearn's default gamma, as in the paper's code
    kr = KernelRidge(alpha=p.lambda_, kernel="poly", degree=2, coef0=1.0).fit(X, y)
    Xt = np.random.default_rng(9).uniform(0, 1, size=(6, 10))
    assert np.allclose(p.predict(Xt), kr.predict(Xt), atol=1e-9)
    assert np.allclose(p.predict(X), kr.predict(X), atol=1e-9)
    explicit = KernelRidgePredictor(gamma=1.0).fit(X, y)
    kr1 = KernelRidge(alpha=explicit.lambda_, kernel="poly", gamma=1.0, degree=2, coef0=1.0).fit(X, y)
    assert np.allclose(explicit.predict(Xt), kr1.predict(Xt), atol=1e-9)


def test_binary_grid_used_for_binary_scores() -> None:
    rng = np.random.default_rng(0)
    X = (rng.uniform(size=(30, 6)) < 0.5).astype(float)
    y = X.mean(axis=1)
    assert tuple(KernelRidgePredictor().fit(X, y).lambdas_) == LAMBDAS_BINARY


def test_mean_and_weighted_mean() -> None:
    X, y = _data()
    Xt = np.array([[0.0, 1, 1, 1, 0, 0, 0, 1]])
    assert np.allclose(MeanPredictor().fit(X, y).predict(Xt), [0.5])
    w = np.array([3.0, 1, 0, 0, 0, 0, 0, 0])
    assert np.allclose(WeightedMeanPredictor(w).fit(X, y).predict(Xt), [0.25])
    with pytest.raises(ValueError):
        WeightedMeanPredictor([1.0, 2.0]).fit(X, y)


def _irt_world(seed: int = 0, N: int = 2000, k: int = 60) -> dict:
    """Item scores sigmoid(ability - difficulty) + noise; references weak, target strong."""
    rng = np.random.default_rng(seed)
    diff = rng.normal(0, 1.5, size=N)
    abil_ref = rng.uniform(-2.0, 0.0, size=30)
    abil_t = np.array([2.5])

    def scores(a: np.ndarray) -> np.ndarray:
        s = 1 / (1 + np.exp(-(a[:, None] - diff[None, :])))
        return np.clip(s + 0.05 * rng.standard_normal(s.shape), 0, 1)

    S_ref, S_t = scores(abil_ref), scores(abil_t)
    core = rng.choice(N, size=k, replace=False)
    return {
        "X_ref": S_ref[:, core],
        "y_ref": S_ref.mean(axis=1),
        "X_t": S_t[:, core],
        "y_t": S_t.mean(axis=1),
    }


def test_aipw_corrects_shift_out_of_reference_range() -> None:
    w = _irt_world()
    X, y, Xt, yt = w["X_ref"], w["y_ref"], w["X_t"], w["y_t"]
    assert extrapolation_flag(Xt.mean(), X.mean(axis=1))
    err_aipw = abs(AIPWPredictor().fit(X, y).predict(Xt)[0] - yt[0])
    err_ridge = abs(RidgePredictor().fit(X, y).predict(Xt)[0] - yt[0])
    err_krr = abs(KernelRidgePredictor().fit(X, y).predict(Xt)[0] - yt[0])
    assert err_aipw < 0.03
    assert err_aipw < 0.5 * err_ridge
    assert err_aipw < 0.5 * err_krr


def test_aipw_algebra_and_in_distribution() -> None:
    # estimate = coreset mean + w . (y_ref - coreset mean_ref), per fold-averaged weights
    X, y = _data(M=20, k=12, seed=4)
    p = AIPWPredictor(n_folds=3).fit(X, y)
    Xt = X[:2] + 0.01
    pred = p.predict(Xt)
    assert pred.shape == (2,)
    # an unbiased-in-expectation estimator stays near the truth in distribution
    assert np.all(np.abs(pred - y[:2]) < 0.2)
    # degenerate: one coreset item -> coreset mean + average gap
    X1 = X[:, :1]
    p1 = AIPWPredictor().fit(X1, y)
    assert np.isclose(p1.predict(np.array([[0.3]]))[0], 0.3 + np.mean(y - X1[:, 0]))


@pytest.mark.parametrize("method", ["split", "jackknife+"])
def test_conformal_coverage_iid(method: str) -> None:
    rng = np.random.default_rng(123)
    M, k, reps, level = 40, 4, 300, 0.9
    beta = np.array([0.5, -0.3, 0.2, 0.1])
    hits = 0
    for _ in range(reps):
        X = rng.uniform(0, 1, size=(M + 1, k))
        y = X @ beta + 0.1 * rng.standard_normal(M + 1)
        ci = loo_conformal_interval(RidgePredictor, X[:M], y[:M], X[M], level=level, method=method)
        hits += int(ci.lower[0] <= y[M] <= ci.upper[0])
    cov = hits / reps
    assert abs(cov - level) <= 0.04, cov


@pytest.mark.slow
def test_pooled_interval_covers_the_mean_of_benchmarks_iid() -> None:
    """Five benchmarks, M = 30 shared references: the pooled interval of the mean estimate is
    finite (a Bonferroni union at 0.98 would need rank 31 > 30) and covers at about the level."""
    rng = np.random.default_rng(7)
    M, B, k, reps, level = 30, 5, 3, 300, 0.9
    hits, widths = 0, []
    for _ in range(reps):
        ability = rng.uniform(0, 1, size=M + 1)
        centers, errors, truths = [], [], []
        for _b in range(B):
            X = np.clip(ability[:, None] + 0.15 * rng.standard_normal((M + 1, k)), 0, 1)
            y = 0.8 * ability + 0.05 * rng.standard_normal(M + 1)
            ci = loo_conformal_interval(RidgePredictor, X[:M], y[:M], X[M], level=level)
            assert np.allclose(np.abs(ci.loo_errors), ci.loo_residuals)
            centers.append(ci.center[0]); errors.append(ci.loo_errors); truths.append(y[M])
        lo, hi = interval_from_errors(np.mean(centers), pooled_errors(np.vstack(errors)), level)
        assert np.isfinite(lo) and np.isfinite(hi)
        hits += int(lo <= np.mean(truths) <= hi)
        widths.append(hi - lo)
    assert abs(hits / reps - level) <= 0.05, hits / reps
    with pytest.raises(ValueError):
        pooled_errors(np.ones((2, 3)), weights=np.ones(3))


def test_cross_fitted_errors_include_the_selection() -> None:
    """A selector that picks the k columns most correlated with y on the references (like mRMR's
    relevance / Search+): LOO residuals of the predictor alone are optimistic; cross-fitting the
    selection too restores about nominal coverage on new models."""
    rng = np.random.default_rng(11)
    M, N, k, reps, level = 30, 500, 20, 120, 0.9
    hit_loo = hit_cf = 0

    def select(X: np.ndarray, y: np.ndarray) -> np.ndarray:
        Xc, yc = X - X.mean(0), y - y.mean()
        corr = (Xc.T @ yc) / (np.linalg.norm(Xc, axis=0) * np.linalg.norm(yc) + 1e-12)
        return np.argsort(-corr)[:k]

    for _ in range(reps):
        X = rng.standard_normal((M + 1, N))
        y = 0.3 * X[:, :3].sum(1) + rng.standard_normal(M + 1)
        idx = select(X[:M], y[:M])
        center = RidgePredictor().fit(X[:M][:, idx], y[:M]).predict(X[M:, idx])[0]
        ci = loo_conformal_interval(RidgePredictor, X[:M][:, idx], y[:M], X[M, idx], level=level)
        hit_loo += int(ci.lower[0] <= y[M] <= ci.upper[0])

        def fit_predict(train: np.ndarray, test: np.ndarray, X: np.ndarray = X, y: np.ndarray = y) -> np.ndarray:
            assert not set(train) & set(test) and len(train) + len(test) == M
            j = select(X[train], y[train])
            return RidgePredictor().fit(X[train][:, j], y[train]).predict(X[test][:, j])

        errors = cross_fitted_errors(fit_predict, y[:M], n_folds=10, seed=0)
        lo, hi = interval_from_errors(center, errors, level)
        hit_cf += int(lo <= y[M] <= hi)
    assert hit_loo / reps < 0.8  # optimistic: the selection saw the calibration references
    assert abs(hit_cf / reps - level) <= 0.07, hit_cf / reps


def test_jackknife_plus_hand_case() -> None:
    class _TrainMean:
        def fit(self, X: np.ndarray, y: np.ndarray) -> _TrainMean:
            self.m = float(np.mean(y))
            return self

        def predict(self, X: np.ndarray) -> np.ndarray:
            return np.full(len(np.atleast_2d(X)), self.m)

    X = np.zeros((4, 1))
    y = np.array([0.0, 1, 2, 3])
    # mu_{-i} = [2, 5/3, 4/3, 1]; R = [2, 2/3, 2/3, 2]; alpha = 0.5, M = 4
    # lower: 2nd smallest of [0, 1, 2/3, -1] = 0; upper: 3rd smallest of [4, 7/3, 2, 3] = 3
    ci = loo_conformal_interval(_TrainMean, X, y, np.zeros(1), level=0.5, method="jackknife+")
    assert np.allclose(ci.loo_residuals, [2, 2 / 3, 2 / 3, 2])
    assert np.isclose(ci.lower[0], 0.0) and np.isclose(ci.upper[0], 3.0)
    # split: center 1.5 +- 3rd smallest R (= 2)
    cs = loo_conformal_interval(_TrainMean, X, y, np.zeros(1), level=0.5, method="split")
    assert np.isclose(cs.lower[0], -0.5) and np.isclose(cs.upper[0], 3.5)
    # ranks out of range -> infinite ends
    lo, hi = jackknife_plus_bounds(np.array([2, 5 / 3, 4 / 3, 1.0]), np.array([2, 2 / 3, 2 / 3, 2]), 0.9)
    assert lo[0] == -np.inf and hi[0] == np.inf


def test_extrapolation_flag() -> None:
    ref = np.array([0.2, 0.5, 0.7])
    assert not extrapolation_flag(0.2, ref)
    assert not extrapolation_flag(0.6, ref)
    assert extrapolation_flag(0.19, ref)
    assert extrapolation_flag(0.71, ref)


def test_guarded_predict_uses_aipw_when_extrapolating() -> None:
    w = _irt_world(k=20)
    X, y = w["X_ref"], w["y_ref"]
    Xt = np.vstack([X[0] + 0.001, w["X_t"][0]])
    out = guarded_predict(X, y, Xt)
    assert [o["extrapolation"] for o in out] == [False, True]
    assert [o["predictor"] for o in out] == ["KernelRidgePredictor", "AIPWPredictor"]
    assert all(o["lower"] <= o["prediction"] <= o["upper"] for o in out)
    chosen = guarded_predict(X, y, Xt, predictor_factory=RidgePredictor)
    assert all(o["predictor"] == "RidgePredictor" for o in chosen)
