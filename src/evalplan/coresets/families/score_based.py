"""Evaluation-supervised (score-based) coresets (papers/002): validation and the selection job.

The science is ``evalplan.core.selection.score_based`` (selectors), ``evalplan.core.irt`` (IRT anchors and
p-IRT / gp-IRT), ``evalplan.core.predictors`` and ``evalplan.core.intervals``; this module moves data between
them and the database (see docs/DECISIONS.md "Score-based coresets"); predictions are
``score_predictions``.

* validate: ``reference_models`` (a list or ``"all"``) with scores on every benchmark, at least
  :data:`MIN_REFERENCES`; ``predictor`` one of ``PREDICTORS``; budget an int total (split over
  the benchmarks by ``stratified_counts``, at least one each) or ``{"fraction": f}`` per benchmark.
* job (``coreset_scores``, queue ``cpu``): per benchmark, the reference matrix (models x items,
  missing cells imputed by the item's mean over the references), the selector fitted with that
  benchmark's k_b; the coreset stores, in its deferred ``fitted_state`` column
  (``{"fits": {benchmark_id: fit}}``), the references' coreset scores ``X_ref`` and full-benchmark
  scores ``y_ref`` per benchmark (plus weights, lambda, IRT parameters) so that predict refits the
  predictor deterministically. ``diagnostics`` (returned by GET) keeps only ``fits_summary``: per
  benchmark ``n_items``, ``k``, ``lambda`` and ``n_references`` -- never arrays that grow with
  references x k. The job also stores ``calibration``: the references' cross-fitted errors
  (selector + predictor refitted on ten folds of the references,
  ``evalplan.core.intervals.coreset_cross_fitted_errors``), so that intervals account for the coreset
  having been chosen on the same references, and the fixed-coreset errors of the ``"calibrated"``
  rule (``fixed_errors``); for the IRT predictors the IRT pipeline refitted on
  :data:`IRT_CALIBRATION_FOLDS` folds and the in-sample residuals; for ``auto`` its outer-fold errors
  and its choice's leave-one-reference-out errors.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from evalplan.benchmarks.score_matrix import load_matrix
from evalplan.core.auto import (
    CHOICE_RULE,
    CHOICE_RULES,
    INNER_FOLDS,
    MAX_SECONDS,
    OUTER_FOLDS,
    SE_MULT,
    auto_select,
    parse_selectors,
)
from evalplan.core.design_coreset import design_coreset
from evalplan.core.intervals import (
    GUARD_EXTRAPOLATED,
    INTERVAL_RULES,
    base_rule,
    coreset_cross_fitted_errors,
    fixed_coreset_errors,
)
from evalplan.core.irt import IRT_CALIBRATION_FOLDS, IRTSelection, irt_cross_fitted_errors, irt_predictor_for
from evalplan.core.selection.base import ParamSpec
from evalplan.core.selection.baselines import stratified_counts
from evalplan.core.selection.score_based import SCORE_METHODS, SCORE_PARAMS
from evalplan.core.sequential.stopping import DEFAULT_LEVEL  # one default interval level everywhere (issue 26)
from evalplan.coresets.budget import plan_budget
from evalplan.coresets.families import score_predictions
from evalplan.coresets.families.base import CoresetRequest, SelectionPlan, TargetScores
from evalplan.coresets.families.design_predictions import DESIGN
from evalplan.coresets.families.score_predictions import (
    DEFAULT_PREDICTOR,
    IRT_PREDICTORS,
    PREDICTORS,
    predictor_factory,
    reference_loo_errors,
)
from evalplan.coresets.repository import load_for_job, save_selection
from evalplan.db.models import Benchmark, BenchmarkModel, Coreset, Item, Model
from evalplan.kit.errors import ErrorCollector, InvalidInput
from evalplan.kit.jobs import JobContext
from evalplan.kit.validation import check_params
from evalplan.models.service import get_reference_models

IRT_PARAMS: dict[str, ParamSpec] = {
    "dim": ParamSpec(int, "IRT dimension; default: chosen from 5 and 10 by tinyBenchmarks' validation heuristic",
                     minimum=1, maximum=64),
    "epochs": ParamSpec(int, "SVI epochs of the IRT fit (py-irt default 2000)", minimum=1, maximum=100000),
    "lr": ParamSpec(float, "Adam learning rate of the IRT fit (py-irt default 0.1)", minimum=0, exclusive_minimum=True),
}
AUTO_PARAMS: dict[str, ParamSpec] = {
    "max_seconds": ParamSpec(float, f"wall-time cap of the whole choice, all benchmarks together (default "
                             f"{MAX_SECONDS:g}); selectors that would not fit are skipped", minimum=0,
                             exclusive_minimum=True, maximum=3600),
    "outer_folds": ParamSpec(int, f"folds of the references for the honest (outer) error (default {OUTER_FOLDS})",
                             minimum=2, maximum=10),
    "inner_folds": ParamSpec(int, f"folds of each training set for the choice (default {INNER_FOLDS})",
                             minimum=2, maximum=10),
    "selectors": ParamSpec(list, "selectors to choose among (default all: random, mrmr, lasso, anchor_points, "
                           "random_search, irt)"),
    "choice": ParamSpec(str, "how the inner cross-validation chooses: 'prior' (default: mRMR with the mean of ridge "
                        "and kernel ridge unless a candidate beats it by more than se_mult standard errors) or "
                        "'min' (the lowest inner RMSE)", default=CHOICE_RULE, choices=CHOICE_RULES),
    "se_mult": ParamSpec(float, f"standard errors a candidate must beat the prior by (default {SE_MULT:g})",
                         default=SE_MULT, minimum=0, maximum=100),
}
METHOD_PARAMS: dict[str, dict[str, ParamSpec]] = {**SCORE_PARAMS, "irt": IRT_PARAMS, "auto": AUTO_PARAMS}
MIN_REFERENCES = 3  # LOO intervals need a few references; random_search (Search+) needs >= 3 for CV
CALIBRATION_FOLDS = 10  # folds of the references for the cross-fitted interval errors
NON_SELECTOR_PARAMS = ("irt", "interval", "method_share")  # params of the predictor / interval, not the selector
CORESET_INTERVALS = (*INTERVAL_RULES, DESIGN)
DEFAULT_METHOD_SHARE = 0.0  # measured: any take-all share of the method widened the design interval (RESULTS)
WEIGHTED_METHODS = ("anchor_points", "irt")  # methods whose weights_ are non-negative item weights


class ScoreBasedFamily:
    """Selectors on the reference models' score matrix, with stored predictors (papers/002)."""

    name = "score_based"
    methods = tuple(sorted(METHOD_PARAMS))
    job_kind = "coreset_scores"
    queue = "cpu"
    default_level = DEFAULT_LEVEL

    def check_params(self, method: str, params: dict[str, Any], seed: int, *,
                     field: str = "params") -> dict[str, Any]:
        """422 unless ``params`` are valid constructor parameters of ``method`` (errors at ``field.<name>``)."""
        irt_options = params.pop("irt", None) if method != "irt" else None
        interval = params.pop("interval", None)
        if interval is not None and interval not in CORESET_INTERVALS:
            raise InvalidInput(f"{field}.interval must be one of {', '.join(CORESET_INTERVALS)}",
                               [{"field": f"{field}.interval", "detail": f"got {interval!r}"}])
        extra: dict[str, Any] = {} if interval is None else {"interval": interval}
        if "method_share" in params:
            extra["method_share"] = _check_method_share(method, params.pop("method_share"), interval, field)
        checked = check_params(METHOD_PARAMS[method], params, method=method, field=field)
        if irt_options is not None:  # the IRT model of a gp_irt / p_irt predictor on another selector
            if not isinstance(irt_options, dict):
                raise InvalidInput(f"{field}.irt must be an object of IRT options ({', '.join(IRT_PARAMS)})",
                                   [{"field": f"{field}.irt", "detail": "an object"}])
            checked_irt = check_params(IRT_PARAMS, irt_options, method="irt", field=f"{field}.irt")
        if method == "irt":
            return {**checked, **extra}  # the spec's rules are all of IRTSelection's parameter checks
        if method == "auto":
            return {**_check_auto_params(checked, field), **extra}
        try:
            selector = SCORE_METHODS[method](k=1, seed=seed, **checked)
            if hasattr(selector, "validate_params"):
                selector.validate_params()
            else:  # MRMR validates inside fit: a tiny dummy fit
                rng = np.random.default_rng(0)
                selector.fit(rng.integers(0, 2, size=(6, 4)).astype(float))
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"invalid parameters for {method!r}: {exc}", [{"field": field,
                                                                              "detail": str(exc)}]) from None
        return {**checked, **extra} if irt_options is None else {**checked, **extra, "irt": checked_irt}

    def check_method_params(self, params: dict[str, dict[str, Any]] | None, methods: Collection[str],
                            errors: ErrorCollector, *, not_listed: str, title: str) -> dict[str, dict[str, Any]]:
        """``params`` (method -> selector parameters) of a several-method request (plans, backtests):
        a method not in ``methods`` (``not_listed`` says where they are listed) or parameters for
        ``random`` are added to ``errors``, which are raised as ``title``; then each other method's
        parameters are checked by :meth:`check_params` at ``params.<method>``."""
        for m, given in (params or {}).items():
            if m not in methods:
                errors.add(f"params names method {m!r}, which is {not_listed}", field=f"params.{m}")
            elif m == "random" and given:
                errors.add("the random selector takes no parameters", field="params.random")
        errors.raise_if_any(title)
        for m, given in (params or {}).items():
            if isinstance(given, dict) and given.get("interval") == DESIGN:
                errors.add(f"params.{m}.interval \"design\" is an option of POST /v1/coresets (a random draw); "
                           "plans and backtests measure the calibrated and conformal rules",
                           field=f"params.{m}.interval")
        errors.raise_if_any(title)
        return {m: self.check_params(m, dict(v), 0, field=f"params.{m}")
                for m, v in (params or {}).items() if m != "random"}

    def validate(self, session: Session, request: CoresetRequest, benchmarks: list[Benchmark]) -> SelectionPlan:
        return validate_request(session, request, benchmarks)

    def select(self, ctx: JobContext, coreset_id: str) -> dict[str, Any]:
        return select_score_coreset(ctx, coreset_id, ctx.payload["per_benchmark"], ctx.payload["references"],
                                    bool(ctx.payload.get("predictor_explicit")))

    def predict(self, session: Session, coreset: Coreset, scores: TargetScores, level: float) -> dict[str, Any]:
        return score_predictions.predict(session, coreset, scores.values, scores.model, level)

    def predict_many(self, session: Session, coreset: Coreset, scores: list[TargetScores],
                     level: float) -> list[dict[str, Any]]:
        return score_predictions.predict_many(session, coreset, [(s.values, s.model) for s in scores], level)

    def freeze(self, session: Session, coreset: Coreset) -> dict[str, Any]:
        """Nothing more: predict reads only ``fitted_state["fits"]`` (the references' coreset and full
        scores, weights, IRT parameters, calibration errors), stored by the selection job."""
        return {"fits": "fitted_state.fits, stored at selection"}


SCORE_BASED = ScoreBasedFamily()


# --------------------------------------------------------------------------- validation


def _item_pks(session: Session, benchmark: Benchmark) -> list[int]:
    return list(session.scalars(select(Item.pk).where(Item.benchmark_id == benchmark.id).order_by(Item.pk)))


def _reference_names(session: Session, benchmarks: list[Benchmark], refs: list[str] | str) -> list[str]:
    """Reference model names (sorted) that have scores on every benchmark; 422 otherwise."""
    having = {b.id: set(session.scalars(
        select(Model.name).join(BenchmarkModel, BenchmarkModel.model_id == Model.id)
        .where(BenchmarkModel.benchmark_id == b.id))) for b in benchmarks}
    if refs == "all":
        return sorted(set.intersection(*having.values()) if having else set())
    names = [m.name for m in get_reference_models(session, refs)]
    errors = ErrorCollector()
    for b in benchmarks:
        for n in names:
            if n not in having[b.id]:
                errors.add(f"reference model {n!r} has no scores on benchmark {b.name!r}",
                           field="reference_models", model=n, benchmark=b.name)
    errors.raise_if_any("reference models without scores")
    return sorted(names)


def validate_request(session: Session, request: CoresetRequest, benchmarks: list[Benchmark]) -> SelectionPlan:
    """422 unless the predictor, the references and the benchmarks suit the score-based method."""
    method = request.method
    predictor = request.predictor
    if predictor is not None and predictor not in PREDICTORS:
        raise InvalidInput(f"unknown predictor {predictor!r}; valid predictors: {', '.join(PREDICTORS)}",
                           [{"field": "predictor", "detail": f"one of {list(PREDICTORS)}"}])
    if method == "auto" and predictor is not None:
        raise InvalidInput("method 'auto' chooses the predictor itself (by nested cross-validation); omit predictor",
                           [{"field": "predictor", "detail": "not allowed with method auto"}])
    if request.reference_models is None:
        raise InvalidInput(
            f"score-based method {method!r} needs reference_models (a list of model names or \"all\"), "
            f"at least {MIN_REFERENCES} with scores on every benchmark",
            [{"field": "reference_models", "detail": f"at least {MIN_REFERENCES} models"}])
    sizes = [len(_item_pks(session, b)) for b in benchmarks]
    errors = ErrorCollector()
    for b, n in zip(benchmarks, sizes):
        if n == 0:
            errors.add(f"benchmark {b.name!r} has no items", field="benchmarks", benchmark=b.name)
    errors.raise_if_any("benchmarks cannot be used")
    counts = plan_counts(request.budget, sizes, [b.name for b in benchmarks])
    design = (request.params or {}).get("interval") == DESIGN
    if design:
        if predictor is not None:
            raise InvalidInput('params.interval "design" estimates with the difference estimator, not a predictor; '
                               "omit predictor", [{"field": "predictor", "detail": "not used with interval design"}])
        design_counts(counts, sizes, [b.name for b in benchmarks],
                      float((request.params or {}).get("method_share", DEFAULT_METHOD_SHARE)))
    names = _reference_names(session, benchmarks, request.reference_models)
    if method == "auto":
        need = auto_min_references(dict(request.params or {}))
        if len(names) < need:
            raise InvalidInput(
                f"method 'auto' needs at least {need} reference models with scores on every benchmark (two per "
                f"outer fold); {len(names)} qualify",
                [{"field": "reference_models", "detail": f"at least {need} reference models", "found": len(names)}])
    if len(names) < MIN_REFERENCES:
        raise InvalidInput(
            f"score-based method {method!r} needs at least {MIN_REFERENCES} reference models with scores on "
            f"every benchmark ({', '.join(b.name for b in benchmarks)}); {len(names)} qualify"
            + (f" ({', '.join(names)})" if names else ""),
            [{"field": "reference_models", "detail": f"at least {MIN_REFERENCES} reference models",
              "found": len(names)}])
    if method == "irt" or predictor in IRT_PREDICTORS:
        for b in benchmarks:
            matrix = load_matrix(session, b, b.default_metric)
            rows = [i for i, n in enumerate(matrix.model_names) if n in set(names)]
            vals = np.asarray(matrix.values)[rows]
            vals = vals[~np.isnan(vals)]
            if vals.size and (vals.min() < 0 or vals.max() > 1):
                raise InvalidInput(f"IRT needs scores in [0, 1]; benchmark {b.name!r} has scores outside",
                                   [{"field": "method", "detail": "irt needs scores in [0, 1]"}])
    if "irt" in (request.params or {}) and method != "irt" and predictor not in IRT_PREDICTORS:
        raise InvalidInput("params.irt sets the IRT model of a gp_irt / p_irt predictor; this request has predictor "
                           f"{predictor or DEFAULT_PREDICTOR!r}",
                           [{"field": "params.irt", "detail": "needs an IRT predictor"}])
    payload = {"method": method, "k": int(sum(counts)), "per_benchmark": [int(c) for c in counts],
               "predictor_explicit": predictor is not None, "references": names}
    stored = request.reference_models if request.reference_models == "all" else names
    # method auto: the predictor is its choice per benchmark (diagnostics.auto), not the family's default
    chosen = DESIGN if design else "auto" if method == "auto" else predictor or DEFAULT_PREDICTOR
    return SelectionPlan(payload=payload, reference_models=stored, predictor=chosen)


def _check_auto_params(checked: dict[str, Any], field: str) -> dict[str, Any]:
    """``selectors``: distinct names of :data:`evalplan.core.auto.DEFAULT_SELECTORS`; 422 otherwise."""
    names = checked.get("selectors")
    if names is not None:
        if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise InvalidInput(f"{field}.selectors must be a non-empty list of distinct selector names",
                               [{"field": f"{field}.selectors", "detail": "distinct names"}])
        try:
            parse_selectors(names)
        except ValueError as exc:
            raise InvalidInput(f"{field}.selectors: {exc}", [{"field": f"{field}.selectors",
                                                              "detail": str(exc)}]) from None
    return checked


def _check_method_share(method: str, share: Any, interval: Any, field: str) -> float:
    """``params.method_share``: the share of the budget the method selects and the design takes whole; a number
    in [0, 1), only with ``interval: "design"``, and 0 for ``auto`` (whose choice is of predictors)."""
    where = [{"field": f"{field}.method_share", "detail": "a number in [0, 1) with interval \"design\""}]
    if interval != DESIGN:
        raise InvalidInput(f"{field}.method_share needs {field}.interval \"design\"", where)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= float(share) < 1.0:
        raise InvalidInput(f"{field}.method_share must be a number in [0, 1), got {share!r}", where)
    if method == "auto" and share:
        raise InvalidInput(f"{field}.method_share must be 0 for method auto: auto chooses a predictor, which the "
                           "design's estimate does not use", where)
    return float(share)


def method_items(k: int, share: float) -> int:
    """Items of a design coreset's budget ``k`` that the method selects and the design takes whole."""
    return int(round(share * k))


def design_counts(counts: list[int], sizes: list[int], names: list[str], share: float) -> list[tuple[int, int]]:
    """Per benchmark (items the method selects and the design takes whole, items drawn) for ``params.interval:
    "design"``; :class:`InvalidInput` (at ``budget``) where fewer than 2 would be drawn from the items left."""
    out, errors = [], ErrorCollector()
    for name, k, n in zip(names, counts, sizes):
        fixed = method_items(k, share)
        drawn = k - fixed
        if not (2 <= drawn <= n - fixed or drawn == n - fixed == 0):
            errors.add(f"benchmark {name!r}: a budget of {k} of its {n} items leaves {drawn} to draw; a design "
                       "needs at least 2 drawn items (or every item)", field="budget", benchmark=name, k=k)
        out.append((fixed, drawn))
    errors.raise_if_any("budget too small for a design-based coreset")
    return out


def auto_min_references(params: dict[str, Any]) -> int:
    """References ``auto`` needs: two per outer fold, at least 6 (``evalplan.core.auto.auto_select``)."""
    folds = params.get("outer_folds", OUTER_FOLDS)
    return max(6, 2 * int(folds if isinstance(folds, int) else OUTER_FOLDS))


def plan_counts(budget: Any, sizes: list[int], names: list[str]) -> list[int]:
    """Items per benchmark: a fraction of each, or an integer total split by size (at least one each)."""
    plan = plan_budget(budget, sizes, names, stratified=True)
    if plan.per_benchmark is not None:
        return list(plan.per_benchmark)
    return [int(c) for c in stratified_counts(np.asarray(sizes), plan.total)]


# --------------------------------------------------------------------------- the job


def _reference_block(session: Session, benchmark: Benchmark, names: list[str]) -> tuple[list[int], np.ndarray]:
    """(item pks, references x items scores with NaN where missing), rows in ``names`` order."""
    matrix = load_matrix(session, benchmark, benchmark.default_metric)
    row_of = {n: i for i, n in enumerate(matrix.model_names)}
    values = np.full((len(names), len(matrix.item_pks)), np.nan)
    for r, n in enumerate(names):
        if n in row_of:
            values[r] = np.asarray(matrix.values)[row_of[n]]
    return [int(pk) for pk in matrix.item_pks], values


def impute(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Missing cells -> the item's mean over the references (0 for an item nobody has)."""
    missing = np.isnan(values)
    if not missing.any():
        return values, 0
    with np.errstate(all="ignore"):
        means = np.nanmean(values, axis=0)
    means = np.where(np.isnan(means), 0.0, means)
    return np.where(missing, means[None, :], values), int(missing.sum())


def _irt_params(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The IRT options: ``irt``'s own params, or ``params.irt`` of another selector."""
    source = params if method == "irt" else dict(params.get("irt") or {})
    return {key: source[key] for key in IRT_PARAMS if key in source}


def _fit_selector(method: str, params: dict[str, Any], seed: int, k: int, Y: np.ndarray) -> Any:
    if method == "irt":
        return IRTSelection(k=k, seed=seed, **_irt_params(method, params)).fit(Y)
    return SCORE_METHODS[method](k=k, seed=seed, **{key: v for key, v in params.items()
                                                    if key not in NON_SELECTOR_PARAMS}).fit(Y)


def _irt_fit(method: str, params: dict[str, Any], seed: int, fitted: Any, Y: np.ndarray, ranking: np.ndarray,
             weights: list[float] | None) -> dict[str, Any]:
    """tinyBenchmarks' IRT model and gp-IRT lambda for the coreset (``evalplan.core.irt``): the selector's
    own model for ``irt``, else the pipeline fitted on the references; and the references' residuals
    under it, which calibrate the interval (in-sample: the IRT model saw these references)."""
    pred = irt_predictor_for(Y, ranking, weights=weights, selector=fitted, seed=seed, **_irt_params(method, params))
    est = pred.predict(Y[:, ranking])
    y_ref = Y.mean(axis=1)
    dim = int(pred.a_.shape[1])
    return {"kind": "tinybenchmarks", "a": pred.a_.tolist(), "b": pred.b_.tolist(), "lam": float(pred.lam_),
            "bias": float(pred.bias_), "dim": dim, "selected": ranking.tolist(),
            "residuals": {"gp_irt": (y_ref - est.gp_irt).tolist(), "p_irt": (y_ref - est.p_irt).tolist()}}


def _cross_fitted_calibration(method: str, params: dict[str, Any], seed: int, k: int, Y: np.ndarray,
                              y: np.ndarray, predictor: str) -> dict[str, Any]:
    """Held-out errors of the whole pipeline (selector + predictor refitted on each of
    :data:`CALIBRATION_FOLDS` folds of the references; ``evalplan.core.intervals.cross_fitted_errors``),
    stored so that predict's interval accounts for the coreset having been chosen on these
    references. Falls back to predict-time leave-one-reference-out residuals (``kind: "loo"``)
    when a fold is too small for the selector."""
    def select(Y_train: np.ndarray) -> tuple[np.ndarray, list[float] | None]:
        fitted = _fit_selector(method, params, seed, k, Y_train)
        w = getattr(fitted, "weights_", None)
        keep = method in WEIGHTED_METHODS and w is not None
        return np.asarray(fitted.ranking_, dtype=np.int64), np.asarray(w, dtype=float).tolist() if keep else None

    if method == "irt":  # ten refits of tinyBenchmarks' SVI pipeline (2-3 fits of 2000 epochs each) are out of budget
        return {"kind": "loo", "reason": "method irt: the IRT pipeline is not refitted per fold"}
    try:
        errors = coreset_cross_fitted_errors(select, lambda w: predictor_factory(predictor, {"weights": w}), Y, y,
                                             n_folds=CALIBRATION_FOLDS, seed=seed)
    except ValueError as exc:
        return {"kind": "loo", "reason": f"cross-fitting failed: {exc}"}
    return {"kind": "cross_fitted", "predictor": predictor, "n_folds": min(CALIBRATION_FOLDS, len(y)),
            "errors": errors.tolist()}


def _irt_cross_fitted_calibration(method: str, params: dict[str, Any], seed: int, k: int, Y: np.ndarray,
                                  predictor: str, irt: dict[str, Any]) -> dict[str, Any]:
    """The IRT predictors' ``"calibrated"`` interval (``evalplan.core.irt.irt_cross_fitted_errors``): held-out
    errors of the whole pipeline on :data:`IRT_CALIBRATION_FOLDS` folds of the references -- the IRT
    model at the dimension ``irt["dim"]`` chosen on all references, the selection (for ``irt``,
    tinyBenchmarks' anchors of the fold's model) and the estimate refitted without the fold -- as the
    pessimistic half, and the references' in-sample residuals under the stored IRT model
    (``irt["residuals"]``) as the optimistic half (``fixed_errors``). Falls back to
    ``{"kind": "reference_residuals"}`` (the conformal rule on the residuals) when a fold is too small."""
    variant = "p_irt" if predictor == "p_irt" else "gp_irt"
    options = {key: v for key, v in _irt_params(method, params).items() if key in ("epochs", "lr")}

    def select(Y_train: np.ndarray) -> tuple[np.ndarray, list[float] | None]:
        fitted = _fit_selector(method, params, seed, k, Y_train)
        w = getattr(fitted, "weights_", None)
        weights = np.asarray(w, dtype=float).tolist() if method in WEIGHTED_METHODS and w is not None else None
        return np.asarray(fitted.ranking_, dtype=np.int64), weights

    try:
        errors = irt_cross_fitted_errors(Y, variant, int(irt["dim"]), float(irt["bias"]), k,
                                         select=None if method == "irt" else select,
                                         n_folds=IRT_CALIBRATION_FOLDS, seed=seed, **options)
    except ValueError as exc:
        return {"kind": "reference_residuals", "reason": f"cross-fitting failed: {exc}"}
    return {"kind": "cross_fitted", "predictor": predictor, "source": "irt_folds",
            "n_folds": min(IRT_CALIBRATION_FOLDS, len(Y)), "errors": errors.tolist(),
            "fixed_errors": list(irt["residuals"][variant])}


def select_score_coreset(ctx: JobContext, coreset_id: str, per_benchmark: list[int], names: list[str],
                         predictor_explicit: bool) -> dict[str, Any]:
    started = time.perf_counter()
    coreset = load_for_job(ctx, coreset_id)
    method, params, seed = coreset.method, dict(coreset.params or {}), coreset.seed
    predictor = coreset.predictor or DEFAULT_PREDICTOR
    benchmark_ids = list(coreset.benchmark_ids)
    ranges: list[tuple[float, float]] = []
    with ctx.session_factory() as session:
        blocks = []
        for bid in benchmark_ids:
            benchmark = session.get(Benchmark, bid)
            if benchmark is None:
                raise InvalidInput(f"benchmark {bid} was deleted since the coreset was requested")
            blocks.append(_reference_block(session, benchmark, names))
            ranges.append(score_predictions.score_scale(benchmark))
    ctx.progress(0.1)

    picks: list[tuple[float, int, int, float | None, float | None]] = []
    fits: dict[str, Any] = {}
    auto: dict[str, Any] = {}
    max_seconds = float(params.get("max_seconds", MAX_SECONDS))
    deadline = started + max_seconds if method == "auto" else None
    imputed: dict[str, int] = {}
    for b, (bid, k_b, (item_pks, raw)) in enumerate(zip(benchmark_ids, per_benchmark, blocks)):
        keep = ~np.all(np.isnan(raw), axis=1)
        if int(keep.sum()) < MIN_REFERENCES:
            raise InvalidInput(f"fewer than {MIN_REFERENCES} reference models still have scores on benchmark {bid}")
        Y, n_imputed = impute(raw)
        imputed[bid] = n_imputed
        if params.get("interval") == DESIGN:
            fits[bid], ranked = _design_fit(method, params, seed, k_b, Y, item_pks, ranges[b])
            picks.extend(((r + 1) / k_b, b, pk, None, w) for r, (pk, w) in enumerate(ranked))
            ctx.progress(0.1 + 0.8 * (b + 1) / len(benchmark_ids))
            continue
        if method == "auto":
            share = None if deadline is None else max(deadline - time.perf_counter(), 0.0) / (len(blocks) - b)
            auto_fit, auto_ranking, auto_weights, auto[bid] = _auto_fit(ctx, params, seed, k_b, Y, item_pks, share)
            for r, col in enumerate(auto_ranking.tolist()):
                w_r = None if auto_weights is None else auto_weights[r]
                picks.append(((r + 1) / k_b, b, item_pks[col], None,
                              None if w_r is None or not np.isfinite(w_r) else float(w_r)))
            fits[bid] = _with_guard_errors(auto_fit, predictor_explicit)
            ctx.progress(0.1 + 0.8 * (b + 1) / len(benchmark_ids))
            continue
        fitted = _fit_selector(method, params, seed, k_b, Y)
        ranking = np.asarray(fitted.ranking_, dtype=np.int64)
        gains = np.asarray(getattr(fitted, "gains_", np.full(len(ranking), np.nan)), dtype=float)
        weights = getattr(fitted, "weights_", None)
        weights = None if weights is None else np.asarray(weights, dtype=float)
        for r, (col, gain) in enumerate(zip(ranking.tolist(), gains.tolist())):
            picks.append(((r + 1) / k_b, b, item_pks[col], gain if np.isfinite(gain) else None,
                          None if weights is None or not np.isfinite(weights[r]) else float(weights[r])))
        X_ref = Y[:, ranking]
        y_ref = Y.mean(axis=1)
        fit: dict[str, Any] = {
            "items": [item_pks[c] for c in ranking.tolist()], "n_items": len(item_pks),
            "X_ref": X_ref.tolist(), "y_ref": y_ref.tolist(),
            "weights": weights.tolist() if method in WEIGHTED_METHODS and weights is not None else None,
            "lambda": None, "irt": None,
        }
        if predictor in ("ridge", "kernel_ridge"):
            fit["lambda"] = float(predictor_factory(predictor, fit)().fit(X_ref, y_ref).lambda_)
        if predictor in IRT_PREDICTORS:
            fit["irt"] = _irt_fit(method, params, seed, fitted, Y, ranking, fit["weights"])
            if base_rule(params.get("interval")) == "calibrated":  # "conformal": the residuals alone
                calibration = _irt_cross_fitted_calibration(method, params, seed, k_b, Y, predictor, fit["irt"])
                if calibration["kind"] == "cross_fitted":
                    fit["calibration"] = calibration
        else:
            fit["calibration"] = _cross_fitted_calibration(method, params, seed, k_b, Y, y_ref, predictor)
            if fit["calibration"]["kind"] == "cross_fitted":  # the "calibrated" interval's optimistic half
                fit["calibration"]["fixed_errors"] = fixed_coreset_errors(predictor_factory(predictor, fit), X_ref,
                                                                          y_ref).tolist()
        fits[bid] = _with_guard_errors(fit, predictor_explicit)
        ctx.progress(0.1 + 0.8 * (b + 1) / len(benchmark_ids))

    picks.sort(key=lambda p: (p[0], p[1]))
    rows = [{"coreset_id": coreset_id, "rank": r + 1, "item_pk": int(p[2]), "benchmark_id": benchmark_ids[p[1]],
             "gain": p[3], "weight": p[4]} for r, p in enumerate(picks)]
    diagnostics = {
        "k": len(rows), "per_benchmark": {bid: int(k_b) for bid, k_b in zip(benchmark_ids, per_benchmark)},
        "reference_models": names, "n_references": len(names), "imputed_cells": imputed,
        "predictor": predictor, "predictor_explicit": predictor_explicit, "fits_summary": fits_summary(fits),
        "seconds": round(time.perf_counter() - started, 3),
    }
    if method == "auto":
        diagnostics["auto"] = auto
    save_selection(ctx, coreset_id, rows, diagnostics, fitted_state={"fits": fits})
    return {"coreset_id": coreset_id, "n_items": len(rows), "per_benchmark": diagnostics["per_benchmark"],
            "imputed_cells": imputed, "seconds": diagnostics["seconds"]}


def _with_guard_errors(fit: dict[str, Any], predictor_explicit: bool) -> dict[str, Any]:
    """``fit`` with the extrapolation guard's AIPW leave-one-reference-out errors (``fit["loo_errors"]``), which
    predict's interval for a flagged target needs: M refits, done here once instead of on the first such
    predict of every serving process (issue 34, predict p99). None when the caller chose the predictor
    (the guard then keeps it)."""
    if not predictor_explicit:
        fit["loo_errors"] = {GUARD_EXTRAPOLATED: reference_loo_errors(fit, GUARD_EXTRAPOLATED).tolist()}
    return fit


def _design_fit(method: str, params: dict[str, Any], seed: int, k: int, Y: np.ndarray, item_pks: list[int],
                score_range: tuple[float, float]) -> tuple[dict[str, Any], list[tuple[int, float]]]:
    """One benchmark of ``params.interval: "design"`` (``evalplan.core.design_coreset``): the method selects
    ``round(method_share k)`` items, taken whole; the rest of ``k`` is the stratified draw. Returns the stored fit
    (``design``: the draw's state, ``X_ref`` the references' scores at its items) and the coreset rows
    ``(item pk, design weight 1 / pi)``: the method's items in its order, then the drawn ones."""
    lo, hi = score_range
    if not (np.isfinite(lo) and np.isfinite(hi)):
        lo, hi = (float(Y.min()) if not np.isfinite(lo) else lo), (float(Y.max()) if not np.isfinite(hi) else hi)
    fixed_k = method_items(k, float(params.get("method_share", DEFAULT_METHOD_SHARE)))
    fixed = (np.asarray(_fit_selector(method, params, seed, fixed_k, Y).ranking_, dtype=np.int64) if fixed_k
             else np.zeros(0, dtype=np.int64))
    design = design_coreset(Y, k, seed=seed, score_range=(lo, hi), take_all=fixed.tolist())
    weight = dict(zip(design.items.tolist(), (1.0 / design.inclusion).tolist()))
    taken = set(fixed.tolist())
    order = fixed.tolist() + [c for c in design.items.tolist() if c not in taken]
    fit: dict[str, Any] = {
        "items": [item_pks[c] for c in design.items.tolist()], "n_items": len(item_pks),
        "X_ref": Y[:, design.items].tolist(), "y_ref": Y.mean(axis=1).tolist(), "weights": None, "lambda": None,
        "irt": None, "design": {**design.state(), "method_items": int(fixed.size)},
    }
    return fit, [(item_pks[c], weight[c]) for c in order]


def _auto_fit(ctx: JobContext, params: dict[str, Any], seed: int, k: int, Y: np.ndarray, item_pks: list[int],
              max_seconds: float | None) -> tuple[dict[str, Any], np.ndarray, np.ndarray | None, dict[str, Any]]:
    """One benchmark of ``method: "auto"`` (``evalplan.core.auto.auto_select``): (the stored fit with the
    chosen predictor, the ranking, the item weights, ``diagnostics.auto[benchmark]``). The calibration
    is auto's outer-fold errors (the choice itself refitted without each fold) and the chosen
    predictor's leave-one-reference-out errors on the chosen coreset (``fixed_errors``)."""
    selectors = parse_selectors(params["selectors"]) if params.get("selectors") else None
    if selectors is not None and not np.all((Y >= 0) & (Y <= 1)):
        selectors = tuple(s for s in selectors if s.method != "irt")
        if not selectors:
            raise InvalidInput("method auto: the only selector asked for is irt, which needs scores in [0, 1]")
    result = auto_select(Y, k, seed=seed, selectors=selectors, outer_folds=int(params.get("outer_folds", OUTER_FOLDS)),
                         inner_folds=int(params.get("inner_folds", INNER_FOLDS)), max_seconds=max_seconds,
                         checkpoint=ctx.check_cancelled, choice=str(params.get("choice", CHOICE_RULE)),
                         se_mult=float(params.get("se_mult", SE_MULT)))
    choice = result.choice
    ranking = np.asarray(result.selection.idx, dtype=np.int64)
    weights = result.selection.weights
    X_ref = Y[:, ranking]
    fit: dict[str, Any] = {
        "items": [item_pks[c] for c in ranking.tolist()], "n_items": len(item_pks),
        "X_ref": X_ref.tolist(), "y_ref": Y.mean(axis=1).tolist(),
        "weights": None if weights is None else np.asarray(weights, dtype=float).tolist(),
        "lambda": None, "irt": None, "selector": choice.selector.method, "predictor": choice.predictor,
        "components": list(choice.components),
    }
    parts = list(choice.components) or [choice.predictor]
    if any(p in IRT_PREDICTORS for p in parts):
        fit["irt"] = _irt_fit("irt", dict(choice.selector.params), seed, result.selection.selector, Y, ranking,
                              fit["weights"])
    for p in parts:
        if p in ("ridge", "kernel_ridge") and fit["lambda"] is None:
            fit["lambda"] = float(predictor_factory(p, fit)().fit(X_ref, Y.mean(axis=1)).lambda_)
    fit["calibration"] = {"kind": "cross_fitted", "predictor": choice.predictor, "source": "auto_outer_folds",
                          "n_folds": len(result.outer), "errors": result.outer_errors.tolist()}
    if result.fixed_errors is not None:  # the "calibrated" rule's optimistic half, as the single-method path
        fit["calibration"]["fixed_errors"] = np.asarray(result.fixed_errors, dtype=float).tolist()
    return fit, ranking, weights, result.summary()


def fits_summary(fits: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The small, user-facing part of the fits (``diagnostics.fits_summary``); no per-reference arrays."""
    def irt(fit: dict[str, Any]) -> dict[str, Any] | None:
        s = fit.get("irt")
        return None if not s else {"dim": s.get("dim"), "gp_irt_lambda": s.get("lam"), "bias": s.get("bias")}

    def calibration(fit: dict[str, Any]) -> str:
        if fit.get("design"):
            return DESIGN
        if (fit.get("calibration") or {}).get("kind") == "cross_fitted":
            return "cross_fitted"
        if (fit.get("irt") or {}).get("residuals"):
            return "reference_residuals"
        return str((fit.get("calibration") or {}).get("kind", "loo"))

    return {bid: {"n_items": int(fit["n_items"]), "k": len(fit["items"]), "lambda": fit.get("lambda"),
                  "n_references": len(fit["y_ref"]), "irt": irt(fit),
                  "calibration": calibration(fit),
                  **({"design": design_summary(fit["design"])} if fit.get("design") else {}),
                  **({"selector": fit["selector"], "predictor": fit.get("predictor"),
                      "components": list(fit.get("components") or [])} if fit.get("selector") else {})}
            for bid, fit in fits.items()}


def design_summary(state: dict[str, Any]) -> dict[str, Any]:
    """A design coreset's strata as users read them: per stratum its size ``N_h``, items drawn ``n_h`` and whether
    it is the method's take-all stratum (``diagnostics.fits_summary[b].design``)."""
    strata = np.asarray(state["item_strata"], dtype=np.int64)
    sizes = np.bincount(strata)
    drawn = np.bincount(strata[np.asarray(state["items"], dtype=np.int64)], minlength=sizes.size)
    take_all = int(state.get("method_items", 0)) > 0
    return {"method_items": int(state.get("method_items", 0)),
            "strata": [{"size": int(sizes[h]), "drawn": int(drawn[h]),
                        "take_all": bool(take_all and h == sizes.size - 1)} for h in range(sizes.size)]}
