"""Evaluation-supervised (score-based) coresets (papers/002): the family, its validation and its selection job.

The science is ``evalplan.core.selection.score_based`` (selectors), ``evalplan.core.irt.irt`` (IRT anchors and
p-IRT / gp-IRT), ``evalplan.core.coresets.predictors`` and ``evalplan.core.coresets.intervals``; this package moves
data between
them and the database (see docs/DECISIONS.md "Score-based coresets"): ``params.py`` (each method's parameters,
the family's constants), ``validate.py`` (the request, 422 before anything is stored), ``select.py`` (the
``coreset_scores`` job); its queries are in ``evalplan.coresets.repository`` and its predictions in
``score_predictions``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy.orm import Session

from evalplan.core.sequential.stopping import DEFAULT_LEVEL  # one default interval level everywhere (issue 26)
from evalplan.coresets.families import score_predictions
from evalplan.coresets.families.base import CoresetRequest, SelectionPlan, TargetScores
from evalplan.coresets.families.score_based import validate
from evalplan.coresets.families.score_based.params import METHOD_PARAMS
from evalplan.coresets.families.score_based.select import select_score_coreset
from evalplan.coresets.families.score_based.validate import auto_min_references
from evalplan.db.models import Benchmark, Coreset
from evalplan.kit.errors import ErrorCollector
from evalplan.kit.jobs import JobContext

__all__ = ["SCORE_BASED", "ScoreBasedFamily", "auto_min_references"]


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
        return validate.check_params(method, params, seed, field=field)

    def check_method_params(self, params: dict[str, dict[str, Any]] | None, methods: Collection[str],
                            errors: ErrorCollector, *, not_listed: str, title: str) -> dict[str, dict[str, Any]]:
        """``params`` (method -> selector parameters) of a several-method request (plans, backtests); see
        :func:`~evalplan.coresets.families.score_based.validate.check_method_params`."""
        return validate.check_method_params(params, methods, errors, not_listed=not_listed, title=title)

    def validate(self, session: Session, request: CoresetRequest, benchmarks: list[Benchmark]) -> SelectionPlan:
        return validate.validate_request(session, request, benchmarks)

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
