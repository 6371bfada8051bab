"""The score-based family's request validation (synchronous, 422 before anything is stored).

* ``params``: each method's constructor parameters (``params.METHOD_PARAMS``, checked by a dummy
  construction or fit), ``params.irt`` (the IRT model of an IRT predictor on another
  selector), ``params.interval`` and ``params.method_share`` (the design interval);
* the request: ``reference_models`` (a list or ``"all"``) with scores on every benchmark, at least
  ``params.MIN_REFERENCES``; ``predictor`` one of ``PREDICTORS``;
  budget an int total (split over the benchmarks by ``stratified_counts``, at least one each) or
  ``{"fraction": f}`` per benchmark.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from evalplan.benchmarks.score_matrix import load_matrix
from evalplan.core.coresets.auto import OUTER_FOLDS, parse_selectors
from evalplan.core.selection.baselines import stratified_counts
from evalplan.core.selection.score_based import SCORE_METHODS
from evalplan.coresets.budget import plan_budget
from evalplan.coresets.families.base import CoresetRequest, SelectionPlan
from evalplan.coresets.families.design_predictions import DESIGN
from evalplan.coresets.families.score_based.params import (
    CORESET_INTERVALS,
    DEFAULT_METHOD_SHARE,
    IRT_PARAMS,
    METHOD_PARAMS,
    MIN_REFERENCES,
    method_items,
)
from evalplan.coresets.families.score_predictions import DEFAULT_PREDICTOR, IRT_PREDICTORS, PREDICTORS
from evalplan.coresets.repository import item_pks, scored_model_names
from evalplan.db.models import Benchmark
from evalplan.kit.errors import ErrorCollector, InvalidInput
from evalplan.kit.validation import check_params as check_spec
from evalplan.models.service import get_reference_models


def check_params(method: str, params: dict[str, Any], seed: int, *, field: str = "params") -> dict[str, Any]:
    """422 unless ``params`` are valid constructor parameters of ``method`` (errors at ``field.<name>``)."""
    irt_options = params.pop("irt", None) if method != "irt" else None
    interval = params.pop("interval", None)
    if interval is not None and interval not in CORESET_INTERVALS:
        raise InvalidInput(f"{field}.interval must be one of {', '.join(CORESET_INTERVALS)}",
                           [{"field": f"{field}.interval", "detail": f"got {interval!r}"}])
    extra: dict[str, Any] = {} if interval is None else {"interval": interval}
    if "method_share" in params:
        extra["method_share"] = _check_method_share(method, params.pop("method_share"), interval, field)
    checked = check_spec(METHOD_PARAMS[method], params, method=method, field=field)
    if irt_options is not None:  # the IRT model of a gp_irt / p_irt predictor on another selector
        if not isinstance(irt_options, dict):
            raise InvalidInput(f"{field}.irt must be an object of IRT options ({', '.join(IRT_PARAMS)})",
                               [{"field": f"{field}.irt", "detail": "an object"}])
        checked_irt = check_spec(IRT_PARAMS, irt_options, method="irt", field=f"{field}.irt")
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


def check_method_params(params: dict[str, dict[str, Any]] | None, methods: Collection[str],
                        errors: ErrorCollector, *, not_listed: str, title: str) -> dict[str, dict[str, Any]]:
    """``params`` (method -> selector parameters) of a several-method request (plans, backtests):
    a method not in ``methods`` (``not_listed`` says where they are listed) or parameters for
    ``random`` are added to ``errors``, which are raised as ``title``; then each other method's
    parameters are checked by :func:`check_params` at ``params.<method>``."""
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
    return {m: check_params(m, dict(v), 0, field=f"params.{m}")
            for m, v in (params or {}).items() if m != "random"}


def _reference_names(session: Session, benchmarks: list[Benchmark], refs: list[str] | str) -> list[str]:
    """Reference model names (sorted) that have scores on every benchmark; 422 otherwise."""
    having = {b.id: scored_model_names(session, b.id) for b in benchmarks}
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
    sizes = [len(item_pks(session, b.id)) for b in benchmarks]
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
    """``selectors``: distinct names of :data:`evalplan.core.coresets.auto.DEFAULT_SELECTORS`; 422 otherwise."""
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
    """References ``auto`` needs: two per outer fold, at least 6 (``evalplan.core.coresets.auto.auto_select``)."""
    folds = params.get("outer_folds", OUTER_FOLDS)
    return max(6, 2 * int(folds if isinstance(folds, int) else OUTER_FOLDS))


def plan_counts(budget: Any, sizes: list[int], names: list[str]) -> list[int]:
    """Items per benchmark: a fraction of each, or an integer total split by size (at least one each)."""
    plan = plan_budget(budget, sizes, names, stratified=True)
    if plan.per_benchmark is not None:
        return list(plan.per_benchmark)
    return [int(c) for c in stratified_counts(np.asarray(sizes), plan.total)]
