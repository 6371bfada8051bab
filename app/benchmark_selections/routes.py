"""Benchmark-level selection (``/v1/benchmark-selections``, paper 000 §4.4): create (synchronous), read, predict."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.benchmark_selections import service
from app.benchmark_selections.schemas import (
    BenchmarkSelectionCreate,
    BenchmarkSelectionOut,
    BenchmarkSelectionPredict,
    BenchmarkSelectionPrediction,
)
from app.kit.deps import DbSession

router = APIRouter(prefix="/v1/benchmark-selections", tags=["benchmark-selections"])


@router.post("", status_code=201, response_model=BenchmarkSelectionOut)
def create_selection(body: BenchmarkSelectionCreate, session: DbSession, response: Response) -> BenchmarkSelectionOut:
    """Select `k` benchmarks from a summary matrix (uploaded, or computed from item scores)."""
    selection = service.create_selection(session, body)
    view = BenchmarkSelectionOut.model_validate(service.selection_view(selection))
    session.commit()
    response.headers["Location"] = f"/v1/benchmark-selections/{selection.id}"
    return view


@router.get("/{selection_id}", response_model=BenchmarkSelectionOut)
def read_selection(selection_id: str, session: DbSession) -> BenchmarkSelectionOut:
    return BenchmarkSelectionOut.model_validate(service.selection_view(service.get_selection(session, selection_id)))


@router.post("/{selection_id}/predict", response_model=BenchmarkSelectionPrediction)
def predict(selection_id: str, body: BenchmarkSelectionPredict, session: DbSession) -> BenchmarkSelectionPrediction:
    """Impute every benchmark from the scores on the selected ones (Gaussian conditional mean, eq. 8)."""
    selection = service.get_selection(session, selection_id)
    return BenchmarkSelectionPrediction.model_validate(service.predict(selection, body.scores))
