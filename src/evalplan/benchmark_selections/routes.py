"""Benchmark-level selection (``/v1/benchmark-selections``, paper 000 §4.4): create (synchronous), read, predict."""

from __future__ import annotations

from fastapi import APIRouter, Response

from evalplan.auth.audit import change_visibility, record
from evalplan.auth.caller import SCOPE_EXTRA
from evalplan.auth.deps import DbSession
from evalplan.auth.teams import team_name
from evalplan.benchmark_selections import schemas, service
from evalplan.kit.schemas import VisibilityPatch

router = APIRouter(prefix="/v1/benchmark-selections", tags=["benchmark-selections"])


@router.post("", status_code=201, response_model=schemas.BenchmarkSelectionOut)
def create_selection(body: schemas.BenchmarkSelectionCreate, session: DbSession,
                     response: Response) -> schemas.BenchmarkSelectionOut:
    """Select `k` benchmarks from a summary matrix (uploaded, or computed from item scores)."""
    selection = service.create_selection(session, body)
    record(session, "create", "benchmark_selection", selection.id, benchmarks=selection.benchmark_names,
           visibility=selection.visibility)
    session.flush()
    view = schemas.BenchmarkSelectionOut.model_validate(service.selection_view(selection,
                                                                               team_name(session, selection.team_id)))
    session.commit()
    response.headers["Location"] = f"/v1/benchmark-selections/{selection.id}"
    return view


@router.get("/{selection_id}", response_model=schemas.BenchmarkSelectionOut)
def read_selection(selection_id: str, session: DbSession) -> schemas.BenchmarkSelectionOut:
    selection = service.get_selection(session, selection_id)
    return schemas.BenchmarkSelectionOut.model_validate(service.selection_view(selection,
                                                                               team_name(session, selection.team_id)))


@router.patch("/{selection_id}", response_model=schemas.BenchmarkSelectionOut)
def patch_selection(selection_id: str, body: VisibilityPatch, session: DbSession) -> schemas.BenchmarkSelectionOut:
    """Change the visibility (`private` or `public`; the owning team only); audited."""
    selection = service.get_selection(session, selection_id)
    change_visibility(session, selection, body.visibility, "benchmark_selection", f"benchmark selection "
                                                                                  f"{selection_id!r}")
    session.commit()
    return schemas.BenchmarkSelectionOut.model_validate(service.selection_view(selection,
                                                                               team_name(session, selection.team_id)))


@router.post("/{selection_id}/predict", response_model=schemas.BenchmarkSelectionPrediction,
             openapi_extra={SCOPE_EXTRA: "read"})
def predict(selection_id: str, body: schemas.BenchmarkSelectionPredict,
            session: DbSession) -> schemas.BenchmarkSelectionPrediction:
    """Impute every benchmark from the scores on the selected ones (Gaussian conditional mean, eq. 8)."""
    selection = service.get_selection(session, selection_id)
    return schemas.BenchmarkSelectionPrediction.model_validate(service.predict(selection, body.scores))
