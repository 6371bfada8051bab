"""KRR leave-one-out fit speed (paper 002 §2.3 / App. D.1): whole lambda grid, M=400 x k=100.

Run: ``python -m bench krr_speed_bench``. Prints a markdown table; target median <= 1 s.
"""

from __future__ import annotations

import time

import numpy as np

from evalplan.core.coresets.predictors import LAMBDAS_BINARY, LAMBDAS_CONTINUOUS, KernelRidgePredictor

M, K, REPEATS, TARGET_S = 400, 100, 5, 1.0


def _time_fit(X: np.ndarray, y: np.ndarray, lambdas: tuple[float, ...]) -> tuple[float, KernelRidgePredictor]:
    times, p = [], None
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        p = KernelRidgePredictor(degree=2, coef0=1.0, lambdas=lambdas).fit(X, y)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), p


def main() -> None:
    rng = np.random.default_rng(0)
    X_cont = rng.uniform(0, 1, size=(M, K))
    y_cont = X_cont.mean(axis=1) + 0.01 * rng.standard_normal(M)
    X_bin = (rng.uniform(size=(M, K)) < 0.5).astype(float)
    y_bin = X_bin.mean(axis=1)
    rows = []
    for name, X, y, grid in (
        ("continuous", X_cont, y_cont, LAMBDAS_CONTINUOUS),
        ("binary", X_bin, y_bin, LAMBDAS_BINARY),
    ):
        med, p = _time_fit(X, y, grid)
        rows.append((name, len(grid), med, p.lambda_, "yes" if med <= TARGET_S else "NO"))
    print(f"KRR LOO fit, M={M} reference models x k={K} coreset items, median of {REPEATS}\n")
    print("| data | grid size | median fit time (s) | chosen lambda | <= 1 s |")
    print("|---|---|---|---|---|")
    for name, n, med, lam, ok in rows:
        print(f"| {name} | {n} | {med:.4f} | {lam:.4g} | {ok} |")


if __name__ == "__main__":
    main()
