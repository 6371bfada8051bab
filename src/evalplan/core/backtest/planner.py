"""Budget planner: the smallest coreset that reaches a requested precision, from backtests on the
reference models (issue 16 §4; no paper answers "how many items do I need for +-2 points?").

For one benchmark (the references' models x items score matrix ``Y``, NaN imputed by the item
mean as in :func:`evalplan.core.backtest.backtest.impute_item_mean`) and each candidate ``(method, predictor)``,
budgets are tried from small to large (:func:`budget_grid`). At each budget ``k`` and seed the
pipeline the service would build is backtested on the references themselves:

* score-based methods (``anchor_points``, ``mrmr``, ...): the **cross-fitted errors** of
  :func:`evalplan.core.backtest.backtest._selection_aware_errors` -- ten folds of the references, the selector
  *and* the predictor refitted without each fold, exactly what a score-based coreset job stores as
  its calibration (``evalplan.coresets.families.score_based``). The expected RMSE is their root mean
  square; the interval is the one such a coreset reports: by default the ``"calibrated"`` rule
  (:func:`evalplan.core.coresets.intervals.calibrated_half_width`) on those errors and the leave-one-reference-out
  errors of the predictor on the coreset selected on all references (what the job stores as
  ``fixed_errors``), or, with ``params[method].interval = "conformal"``, ``+- q`` with ``q`` the
  split-conformal quantile of the cross-fitted errors alone
  (:func:`evalplan.core.coresets.intervals.interval_from_errors`).
  ``auto``: its outer-fold errors and its chosen predictor's fixed-coreset errors, likewise.
* ``random`` (+ ``mean``): a uniformly random coreset (the backtest's seeded draw) predicted by its
  mean; error = coreset mean - full mean per reference; interval = the one a ``random`` coreset
  reports, the finite-population normal interval of :func:`evalplan.core.coresets.prediction.estimate_from_coreset`,
  its width averaged over the references.

Per (candidate, budget) the evidence row averages over ``seeds`` (each seed a different random
coreset, fold assignment and selector seed). A candidate *reaches* the request when its mean
interval half-width is ``<= half_width``. The plan is the smallest budget some candidate reaches,
and among the candidates that reach it the one with the smallest expected RMSE. The grid stops at
the first budget reached (every candidate is evaluated there); when none does below the full
benchmark, the plan is ``method: "full"`` (every item, error 0).

A suite plan (:func:`plan_suite`) is the per-benchmark plans side by side: total items and their split.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalplan.core.backtest.backtest import (
    _fixed_errors,
    _select,
    _selection_aware_errors,
    impute_item_mean,
    paper_label,
)
from evalplan.core.coresets.auto import auto_select
from evalplan.core.coresets.intervals import DEFAULT_INTERVAL, base_rule, interval_from_errors
from evalplan.core.coresets.prediction import estimate_from_coreset

__all__ = [
    "Candidate", "DEFAULT_CANDIDATES", "DEFAULT_FRACTIONS", "PLANNER_METHODS", "PLANNER_PREDICTORS",
    "FULL", "parse_candidate", "budget_grid", "min_references", "evaluate_candidate", "plan_benchmark", "plan_suite",
]

FULL = "full"
PLANNER_METHODS = ("random", "anchor_points", "mrmr", "lasso", "random_search", "hardness", "pbsc", "irt", "auto")
#: ``auto`` (evalplan.core.coresets.auto) is opt-in, never a default candidate: each budget tried costs one nested CV
#: (~6-25 CPU s at 30 x 1,000) per seed, i.e. minutes per benchmark for a bisection over the grid
PLANNER_PREDICTORS = {"random": ("mean",), "auto": ("auto",)}
SCORE_PREDICTORS = ("kernel_ridge", "ridge", "weighted_mean", "mean")
DEFAULT_PREDICTOR = {"random": "mean", "anchor_points": "weighted_mean", "auto": "auto"}
#: selector parameters the planner uses unless the request sets them (AnchorPoints' PAM swap over
#: 1,000 items costs minutes per fold on 2 cores); the plan reports them, to be passed to the coreset.
PLANNER_PARAMS: dict[str, dict[str, Any]] = {"anchor_points": {"n_init": 1, "swap": "never"}}
DEFAULT_FRACTIONS = (0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.75, 0.9)
MIN_K = 2  # one item says nothing about its own variance


#: selectors whose ranking at budget k is the first k items of their ranking at any larger budget (greedy)
PREFIX_METHODS = ("mrmr",)


class PrefixSelections:
    """One greedy selection per (training references, seed) at the largest budget ``k_cap`` the search
    may try, cut to each budget asked: mRMR's ranking at k is the prefix of its ranking at k' > k
    (002 §2.1-2.2: items are added one at a time), so the bisection over budgets selects once per fold
    instead of once per fold and budget, with the same items."""

    def __init__(self, method: str, params: Mapping[str, Any], k_cap: int) -> None:
        self.method, self.params, self.k_cap = method, dict(params), int(k_cap)
        self.cache: dict[tuple[int, bytes], np.ndarray] = {}

    def __call__(self, Y_train: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, Any, Any]:
        key = (int(seed), np.ascontiguousarray(Y_train).tobytes())
        ranking = self.cache.get(key)
        if ranking is None or ranking.size < k:
            cap = max(int(k), min(self.k_cap, Y_train.shape[1]))
            ranking = np.asarray(_select(self.method, Y_train, cap, int(seed), self.params)[0], dtype=np.int64)
            self.cache[key] = ranking
        return ranking[:k], None, None


@dataclass(frozen=True)
class Candidate:
    """A (selector, predictor) pair the service can build as a coreset."""

    method: str
    predictor: str

    @property
    def label(self) -> str:
        return paper_label(self.method, self.predictor)


DEFAULT_CANDIDATES = (Candidate("random", "mean"), Candidate("anchor_points", "weighted_mean"),
                      Candidate("mrmr", "kernel_ridge"))


def allowed_predictors(method: str) -> tuple[str, ...]:
    """The predictors a candidate of ``method`` may use (a random coreset is predicted by its mean)."""
    return PLANNER_PREDICTORS.get(method, SCORE_PREDICTORS)


def default_predictor(method: str) -> str:
    return DEFAULT_PREDICTOR.get(method, "kernel_ridge")


def parse_candidate(entry: str) -> Candidate:
    """``"method"`` (its default predictor) or ``"method:predictor"``; ValueError naming what is wrong."""
    method, sep, predictor = (part.strip() for part in entry.partition(":"))
    if method not in PLANNER_METHODS:
        raise ValueError(f"unknown method {method!r}; one of {list(PLANNER_METHODS)}")
    if not sep:
        predictor = default_predictor(method)
    if predictor not in allowed_predictors(method):
        raise ValueError(f"predictor {predictor!r} cannot follow {method!r}; one of {list(allowed_predictors(method))}")
    return Candidate(method, predictor)


def min_references(level: float) -> int:
    """Fewest references whose split-conformal quantile at ``level`` is finite: ``ceil((M+1) level) <= M``."""
    return max(3, math.ceil(level / (1.0 - level) - 1e-9))


def budget_grid(n_items: int, fractions: Sequence[float] = DEFAULT_FRACTIONS) -> list[int]:
    """Sorted unique coreset sizes ``round(f * n_items)``, each in ``[MIN_K, n_items - 1]``."""
    ks = {min(n_items - 1, max(MIN_K, int(round(float(f) * n_items)))) for f in fractions}
    return sorted(k for k in ks if MIN_K <= k < n_items)


def _random_errors_widths(Y: np.ndarray, s: np.ndarray, k: int, seed: int, level: float,
                          score_range: tuple[float | None, float | None], binary: bool
                          ) -> tuple[np.ndarray, np.ndarray]:
    idx, _, _ = _select("random", Y, k, seed, {})
    N = Y.shape[1]
    labels = np.zeros(k, dtype=np.int64)
    errors = np.empty(Y.shape[0])
    widths = np.empty(Y.shape[0])
    for i in range(Y.shape[0]):
        est = estimate_from_coreset(Y[i, idx], labels, [N], level=level, score_range=score_range,
                                    binary=binary)["benchmarks"][0]
        lo, hi = est["interval"]
        errors[i] = s[i] - float(est["estimate"])
        widths[i] = float(hi - lo)
    return errors, widths


def evaluate_candidate(Y: np.ndarray, candidate: Candidate, k: int, level: float, seeds: Sequence[int],
                       params: Mapping[str, Any] | None = None,
                       score_range: tuple[float | None, float | None] = (0.0, 1.0),
                       prefix_select: Callable[[np.ndarray, int, int], tuple[np.ndarray, Any, Any]] | None = None,
                       ) -> dict[str, Any]:
    """One evidence row: the candidate's backtest at budget ``k`` on the references ``Y`` (imputed,
    finite), averaged over ``seeds`` (see the module docstring). ``prefix_select(Y_train, k, seed)``
    replaces the selector for a greedy method (:class:`PrefixSelections`)."""
    s = Y.mean(axis=1)
    binary = bool(np.all((Y == 0.0) | (Y == 1.0)))
    t0 = time.perf_counter()
    params = dict(params or {})
    # the width rule the coreset will report ("extended" is "calibrated"'s width, extended per target only)
    rule = base_rule(str(params.pop("interval", None) or DEFAULT_INTERVAL))
    rmse, mae, width, q90 = [], [], [], []
    for seed in seeds:
        fixed: np.ndarray | None = None
        if candidate.method == "random":
            e, w = _random_errors_widths(Y, s, k, int(seed), level, score_range, binary)
            width.append(float(np.mean(w)))
        elif candidate.method == "auto":  # its outer-fold errors: the choice refitted without each fold
            res = auto_select(Y, k, seed=int(seed), **params)
            e = res.outer_errors
            fixed = res.fixed_errors if rule == "calibrated" else None
            lo, hi = interval_from_errors(0.0, e, level, fixed, rule)
            width.append(float(hi - lo))
        else:
            e = _selection_aware_errors(candidate.method, candidate.predictor, Y, s, k, int(seed), params, {},
                                        select=prefix_select)
            if rule == "calibrated":  # the chosen coreset's leave-one-reference-out errors, as the job stores
                idx, weights, _ = (_select(candidate.method, Y, k, int(seed), params) if prefix_select is None
                                   else prefix_select(Y, k, int(seed)))
                fixed = _fixed_errors(candidate.predictor, Y[:, idx], s, weights, rule)
            lo, hi = interval_from_errors(0.0, e, level, fixed, rule)
            width.append(float(hi - lo))
        rmse.append(float(np.sqrt(np.mean(e**2))))
        mae.append(float(np.mean(np.abs(e))))
        q90.append(float(np.quantile(np.abs(e), level)))
    n = len(rmse)

    def se(v: list[float]) -> float | None:
        return float(np.std(v, ddof=1) / math.sqrt(n)) if n > 1 else None

    return {"method": candidate.method, "predictor": candidate.predictor, "label": candidate.label,
            "budget": int(k), "fraction": k / Y.shape[1], "expected_rmse": float(np.mean(rmse)),
            "expected_rmse_se": se(rmse), "mae": float(np.mean(mae)), "interval_width": float(np.mean(width)),
            "interval_width_se": se(width), "half_width": float(np.mean(width)) / 2.0,
            "error_quantile": float(np.mean(q90)), "n_seeds": n,
            "interval_rule": "finite_population" if candidate.method == "random" else rule,
            "seconds": time.perf_counter() - t0}


def plan_benchmark(Y: Any, half_width: float, level: float = 0.95,
                   candidates: Sequence[Candidate] = DEFAULT_CANDIDATES,
                   fractions: Sequence[float] = DEFAULT_FRACTIONS, seeds: int | Sequence[int] = 3,
                   params: Mapping[str, Mapping[str, Any]] | None = None,
                   score_range: tuple[float | None, float | None] = (0.0, 1.0),
                   max_seconds: float | None = None,
                   progress: Callable[[float], None] | None = None) -> dict[str, Any]:
    """The plan for one benchmark (see the module docstring).

    ``progress(fraction)`` is called after each (candidate, budget) evidence row with the share of the
    search done (an upper bound of the bisection steps; 1.0 at the end).

    Returns ``{method, predictor, label, budget, fraction, n_items, expected_rmse, interval_width,
    half_width, reached, interval_rule, level, requested_half_width, n_references, evidence: [rows], stopped}``
    (``interval_rule``: the rule of ``interval_width``, ``"calibrated"`` unless ``params[method].interval``
    says ``"conformal"``; ``"finite_population"`` for random; None for the full benchmark);
    ``stopped`` is ``"reached"``, ``"grid_exhausted"`` (the plan is the full benchmark),
    ``"max_seconds"`` (time ran out before any budget was reached: full benchmark, evidence so far) or
    ``"max_seconds_reached"`` (time ran out, the plan is the best reached so far). ``params`` are
    the selector parameters used (:data:`PLANNER_PARAMS` unless given).
    """
    if not (math.isfinite(half_width) and half_width > 0):
        raise ValueError(f"half_width must be a positive number, got {half_width!r}")
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    if not candidates:
        raise ValueError("need at least one candidate method")
    Y = impute_item_mean(Y)
    M, N = Y.shape
    if M < min_references(level):
        raise ValueError(f"{M} reference models give no finite {level:g} interval; need at least "
                         f"{min_references(level)}")
    seed_list = list(range(int(seeds))) if isinstance(seeds, (int, np.integer)) else [int(x) for x in seeds]
    if not seed_list:
        raise ValueError("need at least one seed")
    params = {**PLANNER_PARAMS, **dict(params or {})}
    grid = budget_grid(N, fractions)
    started = time.perf_counter()
    evidence: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    best_idx = len(grid)  # the grid index of the smallest budget reached so far
    stopped = "grid_exhausted"

    steps_max = len(candidates) * max(1, math.ceil(math.log2(len(grid) + 1)))

    prefix: dict[Candidate, PrefixSelections] = {}

    def run(cand: Candidate, i: int) -> dict[str, Any]:
        row = evaluate_candidate(Y, cand, grid[i], level, seed_list, params.get(cand.method), score_range,
                                 prefix.get(cand))
        row["reached"] = bool(row["half_width"] <= half_width)
        evidence.append(row)
        if progress is not None:
            progress(min(len(evidence) / steps_max, 0.99))
        return row

    timed_out = False
    for cand in candidates:
        lo, hi = 0, min(best_idx, len(grid) - 1)  # a candidate matters only at budgets <= the best so far
        if cand.method in PREFIX_METHODS:
            prefix[cand] = PrefixSelections(cand.method, params.get(cand.method) or {}, grid[hi])
        found: tuple[int, dict[str, Any]] | None = None
        while lo <= hi:  # bisection for the smallest reached grid index
            if max_seconds is not None and time.perf_counter() - started > max_seconds:
                timed_out = True
                break
            mid = (lo + hi) // 2
            row = run(cand, mid)
            if row["reached"]:
                found, hi = (mid, row), mid - 1
            else:
                lo = mid + 1
        if found is not None:
            idx, row = found
            if idx < best_idx or (best is not None and idx == best_idx
                                  and row["expected_rmse"] < best["expected_rmse"]):
                best_idx, best = idx, row
        if timed_out:
            break
    if timed_out:
        stopped = "max_seconds" if best is None else "max_seconds_reached"
    elif best is not None:
        stopped = "reached"
    if progress is not None:
        progress(1.0)
    evidence.sort(key=lambda r: (r["budget"], r["label"]))
    chosen_params = params.get(best["method"], {}) if best is not None else {}
    base = {"params": dict(chosen_params), "n_items": N, "n_references": M, "level": level,
            "requested_half_width": float(half_width), "evidence": evidence, "stopped": stopped,
            "seconds": time.perf_counter() - started}
    if best is None:
        return {**base, "method": FULL, "predictor": None, "label": "full benchmark", "budget": N,
                "fraction": 1.0, "expected_rmse": 0.0, "interval_width": 0.0, "half_width": 0.0, "reached": True,
                "interval_rule": None}
    keep = ("method", "predictor", "label", "budget", "fraction", "expected_rmse", "interval_width", "half_width",
            "reached", "interval_rule")
    return {**base, **{key: best[key] for key in keep}}


def plan_suite(plans: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The suite total of per-benchmark plans: items in all, their split, and the share of the suite."""
    split = {name: int(p["budget"]) for name, p in plans.items()}
    total = sum(split.values())
    n_all = sum(int(p["n_items"]) for p in plans.values())
    return {"total_items": total, "n_items": n_all, "fraction": total / n_all if n_all else math.nan,
            "split": split, "all_reached": all(p["method"] != FULL for p in plans.values())}
