"""Benchmark-level selection (paper 000 §4.4): create (synchronous, 201), read, predict."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from app.kit.deps import SessionDep
from app.benchmark_selections.schemas import BenchmarkSelectionCreate, BenchmarkSelectionPredict
from app.benchmark_selections import service

router = APIRouter(prefix="/v1/benchmark-selections", tags=["benchmark-selections"])


@router.post("", status_code=201)
def create_selection(body: BenchmarkSelectionCreate, session: Session = SessionDep) -> JSONResponse:
    """Select `k` benchmarks from a summary matrix (uploaded, or computed from item scores)."""
    selection = service.create_selection(session, body)
    view = service.selection_view(selection)
    session.commit()
    return JSONResponse(view, status_code=201, headers={"Location": f"/v1/benchmark-selections/{selection.id}"})


@router.get("/{selection_id}")
def read_selection(selection_id: str, session: Session = SessionDep) -> JSONResponse:
    return JSONResponse(service.selection_view(service.get_selection(session, selection_id)))


@router.post("/{selection_id}/predict")
def predict(selection_id: str, body: BenchmarkSelectionPredict, session: Session = SessionDep) -> JSONResponse:
    """Impute every benchmark from the scores on the selected ones (Gaussian conditional mean, eq. 8)."""
    return JSONResponse(service.predict(service.get_selection(session, selection_id), body.scores))
