"""How many items the default session needs on one benchmark, measured on its references (issue 33 item 5).

The static planner (:mod:`.planner`) answers "which coreset reaches ±h"; a session answers with the items it
draws until its interval is within ±h. This module replays held-out references as sessions, exactly as the
service runs them (:func:`evalplan.core.sequential.methods.make_estimator` and
:class:`evalplan.core.sequential.stopping.PrecisionSession` with the request's stop), for the default method
and for ``method: "random"`` on the same targets, and reports the items each needed, their share of the
benchmark, the ratio, and whether the interval at the stop covered the held-out model's true mean.

Protocol (the sequential backtest's, :func:`.sequential_backtest.split_targets`, with every other model as a
reference):

* ``random_models`` (``interpolation``): ``n_targets`` references drawn at random (``seed``) are held out;
* ``best_models`` (``extrapolation``): the ``n_targets`` best references are held out and the next 20% by
  rank are discarded, so the targets score above every remaining reference (the hard case: intervals that
  miss the best models are what the issue measured on held-out data);
* a session that never reaches ±h observes every item (its interval is then exact): it counts all of them.

The figures are as good as the references: a held-out reference stands in for the caller's model. With
``n_targets`` targets a regime's coverage moves by ``1 / n_targets`` per miss: it is evidence, not a guarantee;
the guarantee is the stop rule's (docs/RESULTS.md "Precision stops valid at the stop").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from evalplan.core.sequential.config import SessionConfig
from evalplan.core.sequential.methods import DEFAULT_METHOD, make_estimator
from evalplan.core.sequential.prior import BucketPrior
from evalplan.core.sequential.stopping import DEFAULT_MIN_ITEMS, PrecisionSession, StopRule

from .sequential_backtest import EXTRAPOLATION_GAP, fill_reference_means, split_targets

SESSION_TARGETS = 8  # held-out references per regime (the request's session_targets; 4 under-stated items, DECISIONS)
MAX_SESSION_TARGETS = 40
REGIMES = {"random_models": "interpolation", "best_models": "extrapolation"}
REGIME_LABELS = {"random_models": "random", "best_models": "the best"}  # the plan page's and the CLI's words
BASELINE = "random"
UPPER_LEVEL = 0.9  # the one-sided level of ``items_upper`` (the mean over a handful of targets is noisy)


def run_session(prior: BucketPrior, scores: np.ndarray, method: str, rule: StopRule,
                score_range: tuple[float, float], seed: int) -> tuple[int, float, float, float, bool]:
    """One session of ``method`` on a target whose item scores are ``scores``, posting each proposed item's
    score until ``rule`` stops it (or every item is observed): (items, estimate, lo, hi, reached)."""
    config = SessionConfig(method=method, seed=seed, stop=rule.as_dict(), level=rule.level)
    estimator = make_estimator(prior, config, score_range)
    session = PrecisionSession(estimator, rule=rule, score_range=score_range, seed=seed, batch_size=1,
                               max_items=len(scores))
    while not session.stopped and session.n_observed < len(scores):
        proposed = session.propose()
        if not proposed:
            break
        for item in proposed:
            session.observe(item, float(scores[item]))
    lo, hi = session.ci
    reached = (hi - lo) / 2.0 <= rule.half_width and session.n_observed < len(scores)
    return session.n_observed, float(session.estimate), float(lo), float(hi), bool(reached)


def holds(lo: float, hi: float, truth: float) -> bool:
    """``lo <= truth <= hi`` up to float round-off (a session that observed every item reports the mean summed
    in its own order: equal to the truth, not always to the last bit)."""
    tol = 1e-9 * max(1.0, abs(truth))
    return lo - tol <= truth <= hi + tol


def upper_mean(values: Sequence[float], n_max: int, level: float = UPPER_LEVEL) -> float | None:
    """One-sided ``level`` upper confidence bound of the mean of ``values`` (Student t; at most ``n_max``), None
    with fewer than two values: the planned items a new model's session stays under more often than the mean."""
    if len(values) < 2:
        return None
    sd = float(np.std(values, ddof=1))
    bound = float(np.mean(values)) + float(student_t.ppf(level, len(values) - 1)) * sd / math.sqrt(len(values))
    return min(bound, float(n_max))


def _summary(runs: list[dict[str, Any]], n_items: int) -> dict[str, Any]:
    items = [r["items"] for r in runs]
    upper = upper_mean(items, n_items)
    return {"items": float(np.mean(items)), "median_items": float(np.median(items)),
            "items_range": [float(min(items)), float(max(items))], "items_upper": upper,
            "share": float(np.mean(items)) / n_items, "share_upper": None if upper is None else upper / n_items,
            "reached": float(np.mean([r["reached"] for r in runs])),
            "coverage_at_stop": float(np.mean([r["covered"] for r in runs]))}


def plan_session(Y: Any, half_width: float, level: float = 0.95, *,
                 score_range: tuple[float, float] = (0.0, 1.0), n_targets: int = SESSION_TARGETS, seed: int = 0,
                 method: str = DEFAULT_METHOD, min_items: int = DEFAULT_MIN_ITEMS,
                 max_seconds: float | None = None,
                 progress: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Items ``method`` (the default session) and ``random`` need for ±``half_width`` at ``level`` on held-out
    rows of ``Y`` (references x items, NaN = missing), per regime (module docstring).

    Returns ``{method, baseline, half_width, level, n_items, n_models, items, items_upper, share, share_upper,
    vs_random, coverage_at_stop, best_models: {...}, regimes: {random_models: {...}, best_models: {...}}, stopped,
    seconds}``; the top-level figures are the ``random_models`` regime's, ``best_models`` those of the best
    held-out models; ``items_upper`` is the one-sided 90% upper bound of the mean items over the targets
    (:func:`upper_mean`: with a handful of targets the mean under-stated a new model's items, docs/RESULTS.md
    "What the planner says a session needs"). A regime the references cannot form (too few
    models for its targets and the gap) is reported with ``skipped`` and why. ``stopped`` is ``"done"`` or
    ``"max_seconds"`` (the targets run so far are reported)."""
    if not (math.isfinite(half_width) and half_width > 0):
        raise ValueError(f"half_width must be a positive number, got {half_width!r}")
    if not 1 <= n_targets <= MAX_SESSION_TARGETS:
        raise ValueError(f"n_targets must be in [1, {MAX_SESSION_TARGETS}], got {n_targets}")
    X = np.asarray(Y, dtype=np.float64)
    M, N = X.shape
    rule = StopRule(half_width=float(half_width), level=float(level), min_items=int(min_items))
    lo, hi = float(score_range[0]), float(score_range[1])
    started = time.perf_counter()
    stopped = "done"
    regimes: dict[str, dict[str, Any]] = {}
    total = 2 * len(REGIMES) * n_targets
    done = 0
    for label, regime in REGIMES.items():
        gap = 0 if regime == "interpolation" else int(round(EXTRAPOLATION_GAP * M))
        k = min(n_targets, M - 2 - gap)  # at least 2 references stay
        if k < 1:
            regimes[label] = {"skipped": f"{M} reference models leave no held-out model after the "
                                         f"{gap} of the gap and 2 references"}
            continue
        targets, refs, _ = split_targets(X, regime, k, None, seed)
        prior_cache: dict[bytes, BucketPrior] = {}
        runs: dict[str, list[dict[str, Any]]] = {method: [], BASELINE: []}
        for t in targets:
            if stopped != "done":
                break
            cols = ~np.isnan(X[t])
            if cols.sum() < max(2, min_items):
                continue
            key = np.packbits(cols).tobytes()
            if key not in prior_cache:
                prior_cache[key] = BucketPrior.from_reference_scores(fill_reference_means(X[refs][:, cols]))
            scores = X[t, cols]
            truth = float(scores.mean())
            for name in (method, BASELINE):
                n, est, a, b, reached = run_session(prior_cache[key], scores, name, rule, (lo, hi), seed)
                runs[name].append({"target": int(t), "items": n, "estimate": est, "interval": [a, b],
                                   "truth": truth, "reached": reached, "covered": holds(a, b, truth)})
                done += 1
                if progress is not None:
                    progress(min(done / total, 0.99))
            if max_seconds is not None and time.perf_counter() - started > max_seconds:
                stopped = "max_seconds"
        if not runs[method]:
            regimes[label] = {"skipped": "no held-out target with enough scored items"
                              if stopped == "done" else "max_seconds ran out before this regime"}
            continue
        ours, theirs = _summary(runs[method], N), _summary(runs[BASELINE], N)
        regimes[label] = {"regime": regime, "targets": len(runs[method]), "n_references": int(len(refs)),
                          **ours, "random": theirs,
                          "vs_random": ours["items"] / theirs["items"] if theirs["items"] else math.nan,
                          "runs": runs[method], "random_runs": runs[BASELINE]}
    if progress is not None:
        progress(1.0)
    head = regimes.get("random_models", {})
    best = regimes.get("best_models", {})
    keys = ("items", "items_upper", "share", "share_upper", "vs_random", "coverage_at_stop")
    return {"method": method, "baseline": BASELINE, "half_width": float(half_width), "level": float(level),
            "min_items": int(min_items), "n_items": int(N), "n_models": int(M),
            **{key: head.get(key) for key in keys},
            "best_models": {key: best.get(key) for key in keys},
            "regimes": regimes, "stopped": stopped, "seconds": time.perf_counter() - started}


def suite_session_items(plans: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Suite total of per-benchmark session plans: items for random held-out models and for the best ones."""
    def total(key: str, sub: str | None = None) -> float | None:
        values = [(p.get(sub) or {}).get(key) if sub else p.get(key) for p in plans]
        return float(sum(values)) if values and all(v is not None for v in values) else None  # type: ignore[arg-type]

    n_all = sum(int(p["n_items"]) for p in plans)
    items, best = total("items"), total("items", "best_models")
    upper, best_upper = total("items_upper"), total("items_upper", "best_models")
    return {"items": items, "share": items / n_all if items is not None and n_all else None,
            "items_upper": upper, "best_models_items": best, "best_models_items_upper": best_upper,
            "n_items": n_all}
