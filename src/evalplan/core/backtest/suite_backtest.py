"""Backtest of a multi-benchmark coreset: several benchmarks, one total budget (issue "Multi-benchmark").

The protocol the service follows for a coreset over several benchmarks
(``src/evalplan/coresets/families/score_based.py``), replayed offline on full score matrices:

1. The benchmarks' matrices share their models (rows aligned). A model's overall score is the
   mean of its per-benchmark means. References are drawn once per seed on the overall score
   (:func:`evalplan.core.backtest.backtest.split_models`) and are the same for every benchmark.
2. The total budget ``max(B, round(fraction * total items))`` is split over the benchmarks in
   proportion to their sizes, at least one each (:func:`stratified_counts`).
3. Per benchmark, the selector is fitted on the references with that benchmark's k_b and the
   predictor maps the references' coreset scores to that benchmark's mean. Its interval is the
   split-conformal rule on the references' cross-fitted errors, with the selector and the
   predictor refitted on ten folds, as the service calibrates. ``gp_irt`` / ``p_irt`` get no
   interval.
4. Overall = mean of the per-benchmark estimates. Its interval uses the pooled per-reference
   errors (:func:`evalplan.core.coresets.intervals.pooled_errors`), as the service does. Per-benchmark
   estimates are clipped to the score range [0, 1] when the data lie in it (the service clips to
   each benchmark's scale).

Rows: one per (scope, method, predictor, budget, seed), where ``scope`` is a benchmark name or
``"overall"``. Keys: the row keys of :func:`evalplan.core.backtest.backtest.run_backtest` (``agreement`` and
``stability`` are NaN here), plus ``scope``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from evalplan.core.backtest.backtest import (
    _NO_INTERVAL,
    _factory,
    _fixed_errors,
    _select,
    _selection_aware_errors,
    impute_item_mean,
    paper_label,
    regression_metrics,
    split_models,
)
from evalplan.core.coresets.intervals import interval_from_errors, pooled_errors
from evalplan.core.irt.irt import irt_predictor_for
from evalplan.core.selection.baselines import stratified_counts

__all__ = ["OVERALL", "split_total_budget", "run_suite_backtest"]

OVERALL = "overall"


def split_total_budget(sizes: Sequence[int], fraction: float) -> list[int]:
    """Per-benchmark counts of the total ``max(B, round(fraction * sum(sizes)))``: proportional to
    size, at least one each (the service's integer-budget rule)."""
    sizes_arr = np.asarray(sizes, dtype=np.int64)
    total = max(len(sizes_arr), int(round(float(fraction) * int(sizes_arr.sum()))))
    return [int(c) for c in stratified_counts(sizes_arr, total)]


def _estimate(name: str, Y_ref: np.ndarray, idx: np.ndarray, weights: Any, selector: Any, yr: np.ndarray,
              Xt: np.ndarray, seed: int) -> np.ndarray:
    if name in ("gp_irt", "p_irt"):
        est = irt_predictor_for(Y_ref, idx, weights=weights, selector=selector, seed=seed).predict(Xt)
        return est.gp_irt if name == "gp_irt" else est.p_irt
    if name == "weighted_mean" and weights is None:
        weights = np.full(idx.size, 1.0 / idx.size)
    return np.asarray(_factory(name, weights)().fit(Y_ref[:, idx], yr).predict(Xt), dtype=float)


def run_suite_backtest(
    mats: Sequence[Any],
    names: Sequence[str],
    plan: Mapping[str, Sequence[str]],
    budgets: Sequence[float] = (0.05, 0.1),
    # the options of evalplan.core.backtest.backtest.run_backtest, with the same meaning
    n_reference: int = 30, split: str = "stratified", seeds: int | Sequence[int] = 5, level: float = 0.95,
    method_params: Mapping[str, Mapping[str, Any]] | None = None, intervals: bool = True,
    checkpoint: Callable[[], None] | None = None, interval: str | None = None,
) -> list[dict[str, Any]]:
    """Rows for every (scope, method, predictor, budget, seed); ``plan`` maps a selector to its
    predictor names (see the module docstring). ``checkpoint`` is called before each selection and
    prediction and raises to stop (cooperative cancellation)."""
    if len(mats) != len(names) or len(mats) < 2:
        raise ValueError("a suite needs at least two benchmarks, one name each")
    mats = [impute_item_mean(Y) for Y in mats]
    n_models = {Y.shape[0] for Y in mats}
    if len(n_models) != 1:
        raise ValueError("the benchmarks' matrices must have the same models (rows)")
    method_params = dict(method_params or {})
    seed_list = list(range(int(seeds))) if isinstance(seeds, (int, np.integer)) else [int(x) for x in seeds]
    if not seed_list:
        raise ValueError("need at least one seed")
    in_unit = all(float(Y.min()) >= 0.0 and float(Y.max()) <= 1.0 for Y in mats)
    s_b = np.stack([Y.mean(axis=1) for Y in mats])  # (B, models)
    s_all = s_b.mean(axis=0)
    sizes = [Y.shape[1] for Y in mats]
    rows: list[dict[str, Any]] = []
    for seed in seed_list:
        ref, test = split_models(s_all, n_reference, split, np.random.default_rng(seed))
        for budget in budgets:
            counts = split_total_budget(sizes, float(budget))
            for method, pred_names in plan.items():
                selected: list[tuple[np.ndarray, np.ndarray | None, Any]] = []
                caches: list[dict[tuple[int, ...], tuple[np.ndarray, np.ndarray | None]]] = []
                t_sel = 0.0
                for b, Y in enumerate(mats):
                    if checkpoint is not None:
                        checkpoint()
                    t0 = time.perf_counter()
                    idx, weights, selector = _select(method, Y[ref], counts[b], seed, method_params.get(method, {}))
                    t_sel += time.perf_counter() - t0
                    selected.append((np.asarray(idx), weights, selector))
                    caches.append({})
                for name in pred_names:
                    t1 = time.perf_counter()
                    centers, errors, per_rows = [], [], []
                    fixeds: list[np.ndarray | None] = []
                    for b, Y in enumerate(mats):
                        if checkpoint is not None:
                            checkpoint()
                        idx, weights, selector = selected[b]
                        yr, yt = s_b[b, ref], s_b[b, test]
                        c = _estimate(name, Y[ref], idx, weights, selector, yr, Y[test][:, idx], seed)
                        if in_unit:
                            c = np.clip(c, 0.0, 1.0)
                        cov = width = math.nan
                        e = None
                        if intervals and name not in _NO_INTERVAL and name != "guard":
                            e = _selection_aware_errors(method, name, Y[ref], yr, counts[b], seed,
                                                        method_params.get(method, {}), caches[b])
                            f = _fixed_errors(name, Y[ref][:, idx], yr, weights, interval)
                            fixeds.append(f)
                            lo, hi = interval_from_errors(c, e, level, f, interval)
                            cov, width = float(np.mean((lo <= yt) & (yt <= hi))), float(np.mean(hi - lo))
                        centers.append(c)
                        errors.append(e)
                        per_rows.append((names[b], counts[b], regression_metrics(yt, c), cov, width))
                    seconds = t_sel + time.perf_counter() - t1
                    est = np.mean(centers, axis=0)
                    cov = width = math.nan
                    complete = [e for e in errors if e is not None]
                    if len(complete) == len(errors):
                        fx = [f for f in fixeds if f is not None]
                        pooled_fixed = pooled_errors(np.vstack(fx)) if fx and len(fx) == len(errors) else None
                        lo, hi = interval_from_errors(est, pooled_errors(np.vstack(complete)), level, pooled_fixed,
                                                      interval)
                        if in_unit:
                            lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
                        y_all = s_all[test]
                        cov, width = float(np.mean((lo <= y_all) & (y_all <= hi))), float(np.mean(hi - lo))
                    per_rows.append((OVERALL, int(sum(counts)), regression_metrics(s_all[test], est), cov, width))
                    for scope, k, metrics, c_, w_ in per_rows:
                        rows.append({
                            "scope": scope, "method": method, "predictor": name, "label": paper_label(method, name),
                            "split": split, "budget": float(budget), "k": int(k), "seed": seed,
                            "n_reference": int(ref.size), "n_test": int(test.size), **metrics,
                            "agreement": math.nan, "coverage": c_, "interval_width": w_,
                            "frac_flagged": math.nan, "seconds": seconds, "stability": math.nan,
                        })
    return rows
