"""Sequential backtest: replay held-out models as session targets, for every session method.

Pure numpy; no web, database or queue. Used by the ``sequential_backtest`` job
(``POST /v1/backtests`` with ``sequential: true``), ``evalplan backtest --sequential`` and
``bench/sessions/sequential_backtest_bench.py``.

Protocol (docs/RESULTS.md, papers/004 §5.1)
-------------------------------------------
* ``interpolation``: ``n_targets`` models drawn uniformly at random (``seed``); the references are
  the other models.
* ``extrapolation``: the ``n_targets`` best models by full-benchmark mean are the targets, the next
  ``round(gap * M)`` models by rank are discarded (the paper's gap, 20%), the rest are references.
* Reference pools above ``ref_cap`` are subsampled uniformly at random (``seed``).
* Missing reference cells are filled with that reference's mean; each target is evaluated over the
  items it has scores for, and its truth is its mean there (the estimand of a session).
* Each (target, method) is one session with ``half_width: 0`` (never stops on precision) run for
  ``n_max`` items, proposing with the method's own selection and posting the target's true scores;
  the reported ``estimate`` and ``level`` interval (``evalplan.core.sequential.stopping``: inside the
  score range) after every item form the trajectory. The precision rules are then replayed on it:
  a rule's stop is the first ``n >= min_items`` with half-width <= ``half_width`` (exactly what a
  live session with that ``stop`` does, since selection never depends on the rule). A rule not met
  within ``n_max`` items is *censored*: it counts ``n_max`` items in ``mean_items`` and is reported
  in ``reached``; coverage and error at stop are over the targets that reached it.
  ``anytime_valid`` rules change the selection (uniform random) and get their own sessions.

Metrics per (method): ``mae`` / ``rmse`` at each budget n (score units), ``coverage`` at each
budget (truth inside the interval), and per rule ``mean_items``, ``median_items``, ``reached``
(fraction), ``coverage_at_stop``, ``mae_at_stop``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalplan.core.sequential.config import SessionConfig
from evalplan.core.sequential.methods import ESTIMATORS
from evalplan.core.sequential.prior import BucketPrior
from evalplan.core.sequential.stopping import PrecisionSession, StopRule

REGIMES = ("interpolation", "extrapolation")
DEFAULT_BUDGETS = (25, 50, 100, 200)
EXTRAPOLATION_GAP = 0.2

EstimatorFactory = Callable[[BucketPrior, SessionConfig], Any]


def session_estimators() -> dict[str, EstimatorFactory]:
    """Every single-target session method -> its estimator factory ``(prior, config)``: the table of
    ``evalplan.core.sequential`` (``ESTIMATORS``) when it has one, else the BayesAME family."""
    return dict(ESTIMATORS)


def split_targets(X: np.ndarray, regime: str, n_targets: int, ref_cap: int | None,
                  seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(targets, references, n discarded) model indices of ``regime`` (see the module docstring)."""
    if regime not in REGIMES:
        raise ValueError(f"regime: must be one of {REGIMES}, got {regime!r}")
    rng = np.random.default_rng(seed)
    M = X.shape[0]
    gap = 0
    if regime == "interpolation":
        if n_targets > M - 2:
            raise ValueError(f"n_targets: at most {M - 2} with {M} models (2 references are needed)")
        targets = np.sort(rng.choice(M, size=n_targets, replace=False))
        pool = np.setdiff1d(np.arange(M), targets)
    else:
        gap = int(round(EXTRAPOLATION_GAP * M))
        if n_targets + gap > M - 2:
            raise ValueError(f"n_targets: at most {M - 2 - gap} with {M} models in extrapolation "
                             f"({gap} models of the gap and 2 references are needed)")
        means = np.nanmean(X, axis=1)
        order = np.argsort(-means, kind="stable")
        targets = np.sort(order[:n_targets])
        pool = np.sort(order[n_targets + gap:])
    if ref_cap is not None and len(pool) > ref_cap:
        pool = np.sort(rng.choice(pool, size=ref_cap, replace=False))
    return targets, pool, gap


def fill_reference_means(R: np.ndarray) -> np.ndarray:
    """Missing reference cells -> that reference's mean (what a session does)."""
    R = np.array(R, dtype=np.float64, copy=True)
    means = np.nanmean(R, axis=1, keepdims=True)
    means = np.where(np.isnan(means), np.nanmean(R) if np.isfinite(R).any() else 0.0, means)
    return np.where(np.isnan(R), np.broadcast_to(means, R.shape), R)


def replay(prior: BucketPrior, scores: np.ndarray, factory: EstimatorFactory, config: SessionConfig, *,
           level: float, score_range: tuple[float, float], n_max: int,
           rule: StopRule | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, lo, hi) after each of up to ``n_max`` items of one session on ``scores``."""
    rule = rule or StopRule(half_width=0.0, level=level, min_items=1)
    session = PrecisionSession(factory(prior, config), rule=rule, score_range=score_range, seed=config.seed,
                               batch_size=1, max_items=n_max)
    est, lo, hi = [], [], []
    while not session.stopped and session.n_observed < n_max:
        proposed = session.propose()
        if not proposed:
            break
        item = proposed[0]
        session.observe(item, float(scores[item]))
        a, b = session.ci
        est.append(session.estimate)
        lo.append(a)
        hi.append(b)
    return np.asarray(est), np.asarray(lo), np.asarray(hi)


def first_stop(lo: np.ndarray, hi: np.ndarray, rule: StopRule) -> int | None:
    """1-based n at which ``rule`` stops the trajectory, or None if it never does."""
    if rule.half_width <= 0:
        return None
    ok = (hi - lo) / 2.0 <= rule.half_width
    ok[: max(rule.min_items, 1) - 1] = False
    hits = np.flatnonzero(ok)
    return int(hits[0]) + 1 if hits.size else None


@dataclass
class TargetRun:
    method: str
    target: int
    truth: float
    n_items: int
    estimate: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    stops: list[int | None]  # per rule: 1-based items at stop (None = not within n_max)
    stop_estimate: list[float | None]
    stop_covered: list[bool | None]
    seconds: float


def _run_target(task: dict[str, Any]) -> list[TargetRun]:
    prior, scores, truth = task["prior"], task["scores"], task["truth"]
    out = []
    for method, factory in task["methods"]:
        t0 = time.perf_counter()
        config = SessionConfig(method=method, seed=task["seed"], stop={"half_width": 0.0, "level": task["level"],
                                                                       "min_items": 1},
                               level=task["level"], **task["config"].get(method, {}))
        est, lo, hi = replay(prior, scores, factory, config, level=task["level"], score_range=task["score_range"],
                             n_max=task["n_max"])
        stops, stop_est, stop_cov = [], [], []
        for rule in task["rules"]:
            if rule.anytime_valid:
                av_config = SessionConfig(method=method, seed=task["seed"], stop=rule.as_dict(), level=rule.level,
                                          **task["config"].get(method, {}))
                e2, l2, h2 = replay(prior, scores, factory, av_config, level=rule.level,
                                    score_range=task["score_range"], n_max=task["n_max"], rule=rule)
                n = len(e2) if len(e2) and (h2[-1] - l2[-1]) / 2 <= rule.half_width else None
                e_at = float(e2[-1]) if n else None
                cov = bool(l2[-1] <= truth <= h2[-1]) if n else None
            else:
                if rule.level != task["level"]:
                    raise ValueError("stops: every non-anytime rule must use the backtest's level")
                n = first_stop(lo, hi, rule)
                e_at = float(est[n - 1]) if n else None
                cov = bool(lo[n - 1] <= truth <= hi[n - 1]) if n else None
            stops.append(n)
            stop_est.append(e_at)
            stop_cov.append(cov)
        out.append(TargetRun(method, task["target"], truth, len(scores), est, lo, hi, stops, stop_est, stop_cov,
                             time.perf_counter() - t0))
    return out


def _nanmean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def summarize(runs: list[TargetRun], methods: Sequence[str], budgets: Sequence[int],
              rules: Sequence[StopRule]) -> list[dict[str, Any]]:
    """One row per method: MAE / RMSE / coverage at each budget and the stop metrics per rule."""
    rows = []
    for m in methods:
        mine = [r for r in runs if r.method == m]
        row: dict[str, Any] = {"method": m, "n_targets": len(mine),
                               "seconds": _nanmean([r.seconds for r in mine])}
        mae, rmse, cov, n_at = {}, {}, {}, {}
        for b in budgets:
            errs, hits = [], []
            for r in mine:
                n = min(b, r.n_items, len(r.estimate))
                if n < 1:
                    continue
                errs.append(r.estimate[n - 1] - r.truth)
                hits.append(r.lo[n - 1] <= r.truth <= r.hi[n - 1])
            key = str(b)
            mae[key] = _nanmean(np.abs(errs).tolist())
            rmse[key] = float(math.sqrt(np.mean(np.square(errs)))) if errs else math.nan
            cov[key] = _nanmean([float(h) for h in hits])
            n_at[key] = len(errs)
        row.update(mae=mae, rmse=rmse, coverage=cov)
        stops = []
        for k, rule in enumerate(rules):
            items = [float(len(r.estimate) if r.stops[k] is None else r.stops[k]) for r in mine]  # type: ignore[arg-type]
            fracs = [n / r.n_items for n, r in zip(items, mine)]
            reached = [r for r in mine if r.stops[k] is not None]
            stops.append({
                **rule.as_dict(),
                "mean_items": _nanmean(items), "median_items": float(np.median(items)) if items else math.nan,
                "mean_fraction": _nanmean(fracs),
                "reached": len(reached) / len(mine) if mine else math.nan,
                "coverage_at_stop": _nanmean([float(bool(r.stop_covered[k])) for r in reached]),
                "mae_at_stop": _nanmean([abs(float(r.stop_estimate[k]) - r.truth)  # type: ignore[arg-type]
                                         for r in reached]),
            })
        row["stops"] = stops
        rows.append(row)
    return rows


def run_sequential_backtest(
    X: np.ndarray,
    estimators: Mapping[str, EstimatorFactory],
    *,
    regime: str = "interpolation",
    n_targets: int = 20,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    stops: Sequence[StopRule] = (StopRule(half_width=0.02),),
    level: float = 0.95,
    max_items: int | None = None,
    ref_cap: int | None = 100,
    seed: int = 0,
    score_range: tuple[float, float] = (0.0, 1.0),
    method_config: Mapping[str, Mapping[str, Any]] | None = None,
    progress: Callable[[float], None] | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """Replay held-out models of ``X`` (models x items, NaN = missing) as session targets.

    ``estimators``: method name -> factory ``(prior, config) -> estimator``. Each session runs
    ``n_max = max_items`` items (default: the larger of the largest budget and 30% of the items),
    at most the target's items. Returns ``{"rows": summarize(...), "targets": [...], "setup": {...}}``.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 3 or X.shape[1] < 2:
        raise ValueError("X: need a models x items matrix with >= 3 models and >= 2 items")
    budgets = sorted({int(b) for b in budgets})
    if not budgets or budgets[0] < 1:
        raise ValueError("budgets: positive item counts")
    methods = list(estimators)
    targets, refs, gap = split_targets(X, regime, n_targets, ref_cap, seed)
    N = X.shape[1]
    n_max = int(max_items) if max_items is not None else max(budgets[-1], int(math.ceil(0.3 * N)))
    rules = list(stops)
    R_all = X[refs]
    priors: dict[bytes, BucketPrior] = {}
    tasks = []
    for t in targets:
        cols = ~np.isnan(X[t])
        if cols.sum() < 2:
            continue
        key = np.packbits(cols).tobytes()
        if key not in priors:
            priors[key] = BucketPrior.from_reference_scores(fill_reference_means(R_all[:, cols]))
        scores = X[t, cols]
        tasks.append({"prior": priors[key], "scores": scores, "truth": float(scores.mean()), "target": int(t),
                      "methods": [(m, estimators[m]) for m in methods], "seed": seed, "level": level,
                      "score_range": score_range, "n_max": min(n_max, int(cols.sum())), "rules": rules,
                      "config": {k: dict(v) for k, v in (method_config or {}).items()}})
    runs: list[TargetRun] = []
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for k, out in enumerate(pool.map(_run_target, tasks)):
                runs.extend(out)
                if progress:
                    progress((k + 1) / len(tasks))
    else:
        for k, task in enumerate(tasks):
            runs.extend(_run_target(task))
            if progress:
                progress((k + 1) / len(tasks))
    means = np.nanmean(X, axis=1)
    setup = {"regime": regime, "n_models": int(X.shape[0]), "n_items": int(N), "n_targets": len(tasks),
             "n_references": int(len(refs)), "gap": gap, "n_max": n_max, "level": level, "seed": seed,
             "budgets": budgets, "target_means": [float(means[targets].min()), float(means[targets].max())],
             "reference_means": [float(means[refs].min()), float(means[refs].max())]}
    per_target = [{"method": r.method, "target": r.target, "truth": r.truth, "n_items": r.n_items,
                   "estimate_at": {str(b): float(r.estimate[min(b, len(r.estimate)) - 1]) for b in budgets
                                   if len(r.estimate)},
                   "items_to_stop": r.stops, "seconds": r.seconds} for r in runs]
    return {"rows": summarize(runs, methods, budgets, rules), "targets": per_target, "setup": setup}


def _pct(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.0f}%"


def _x100(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.2f}"


def markdown_table(rows: Sequence[Mapping[str, Any]], budgets: Sequence[int], label: str = "") -> str:
    """MAE x100 and 95%-interval coverage at each budget, then per rule: mean items (fraction of
    the items), reached, coverage and MAE x100 at stop. ``label`` leads each row (e.g. data set)."""
    head = ["method"] + [f"MAE n={b}" for b in budgets] + [f"cov n={b}" for b in budgets]
    rules = rows[0]["stops"] if rows else []
    for r in rules:
        hw = f"±{r['half_width']:g}" + (" AV" if r.get("anytime_valid") else "")
        head += [f"items to {hw}", f"reached {hw}", f"cov at stop {hw}"]
    if label:
        head = ["data set", "regime"] + head
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [str(row["method"])] + [_x100(row["mae"][str(b)]) for b in budgets] + \
                [_pct(row["coverage"][str(b)]) for b in budgets]
        for st in row["stops"]:
            cells += [f"{st['mean_items']:.0f} ({100 * st['mean_fraction']:.0f}%)", _pct(st["reached"]),
                      _pct(st["coverage_at_stop"])]
        if label:
            cells = [str(row.get("benchmark", "")), str(row.get("regime", ""))] + cells
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
