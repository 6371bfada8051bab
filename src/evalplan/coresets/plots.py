"""A coreset's charts: composition, greedy gain curve, references' predicted vs true scores.

Shared by ``GET /v1/coresets/{id}/plot.svg`` and the coreset page.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy.orm import Session

from evalplan import charts
from evalplan.benchmarks.repository import benchmark_map
from evalplan.coresets.curation import published_reads
from evalplan.coresets.families.score_based import SCORE_BASED
from evalplan.coresets.families.score_predictions import reference_predictions
from evalplan.coresets.registry import family_of
from evalplan.coresets.repository import coreset_rows, text_item_counts
from evalplan.coresets.shared_view import shared_prediction_rows
from evalplan.db.models import Coreset

OBJECTIVES = {"facility_location": "facility-location objective", "mrmr": "mRMR score",
              "k_center": "covering radius reduction"}


def composition_rows(session: Session, coreset: Coreset, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``{benchmark, capability, selected, total}`` per benchmark of the coreset, in its order."""
    with published_reads(session, coreset):  # a published version's benchmark names and sizes are shared
        benchmarks = benchmark_map(session, coreset.benchmark_ids)
        sizes = text_item_counts(session, list(coreset.benchmark_ids))
    selected = Counter(r["benchmark"] for r in items)
    return [{"benchmark": b.name, "capability": b.capability, "selected": selected.get(b.name, 0),
             "total": sizes[b.id][0]} for bid in coreset.benchmark_ids if (b := benchmarks.get(bid)) is not None]


def composition_chart(session: Session, coreset: Coreset, items: list[dict[str, Any]]) -> Any:
    return charts.coreset_composition(composition_rows(session, coreset, items),
                                      title=f"Coreset composition ({coreset.method})")


def gain_chart(coreset: Coreset, items: list[dict[str, Any]]) -> Any | None:
    """The greedy gain curve of a text coreset whose method records a gain per pick (facility
    location): score-based selectors' per-pick scores are not a coverage objective."""
    if family_of(coreset.method).name != "text":
        return None
    if not any(r.get("gain") is not None for r in items):
        return None
    return charts.gain_curve(items, objective=OBJECTIVES.get(coreset.method, "selection objective"))


def prediction_rows(session: Session, coreset: Coreset, level: float | None = None) -> list[dict[str, Any]]:
    """The reference models' held-out predictions (score-based coresets; empty otherwise)."""
    family = family_of(coreset.method)
    if coreset.status != "ready" or family.name != "score_based":
        return []
    with published_reads(session, coreset):
        rows = reference_predictions(session, coreset, level or family.default_level)
    return shared_prediction_rows(session, coreset, rows)  # another team: withheld names as "reference <i>"


def prediction_chart(rows: list[dict[str, Any]], level: float | None = None) -> Any | None:
    if not rows:
        return None
    return charts.predicted_vs_true(rows, level=level or SCORE_BASED.default_level,
                                    title="Reference models: held-out predicted vs true score")


def coreset_figure(session: Session, coreset: Coreset) -> Any:
    """Every chart of the coreset, stacked: composition, then gains and/or predictions."""
    items = coreset_rows(session, coreset)
    parts = [composition_chart(session, coreset, items), gain_chart(coreset, items),
             prediction_chart(prediction_rows(session, coreset))]
    return charts.combine(*[p for p in parts if p is not None])
