"""mRMR selection speed: 400 models x 1,000 binary items (synthetic 2-PL), 10% coreset (k=100).

Prints a markdown table (median of 3 fits; target <= 2 s). Run: ``python -m bench mrmr_speed_bench``.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from evalplan.core.selection.mrmr import MRMR

N_MODELS, N_ITEMS, K, TARGET_S, REPEATS = 400, 1000, 100, 2.0, 3


def synthetic_2pl(n_models: int, n_items: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    a = rng.lognormal(0.0, 0.3, size=n_items)
    b = rng.normal(size=n_items)
    p = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
    return (rng.random((n_models, n_items)) < p).astype(np.float64)


def main() -> None:
    rows = []
    # the target size, and the paper's M = 30 regime (small classes: many items solved by few models)
    for n_models in (N_MODELS, 30):
        Y = synthetic_2pl(n_models, N_ITEMS)
        for scheme in ("miq", "mid"):
            times, sel = [], None
            for _ in range(REPEATS):
                t0 = time.perf_counter()
                sel = MRMR(k=K, scheme=scheme).fit(Y)
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            rows.append((n_models, scheme, sel.estimator_, sel.n_neighbors_, med, min(times), med <= TARGET_S))
    print(f"mRMR speed: M models x {N_ITEMS} binary items (2-PL), k={K}, median of {REPEATS}\n")
    print("| M | scheme | estimator | n_neighbors | median s | min s | target <= 2 s |")
    print("|---|---|---|---|---|---|---|")
    for m, s_, e, nn, med, mn, ok in rows:
        print(f"| {m} | {s_} | {e} | {nn} | {med:.3f} | {mn:.3f} | {'pass' if ok else 'FAIL'} |")


if __name__ == "__main__":
    main()
