"""Hidden states of models on a benchmark's items (RepCore, papers/003 §2.2): upload, list, delete."""

from __future__ import annotations

from fastapi import APIRouter, File, Form, Request, Response, UploadFile
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from app.kit.deps import SessionDep
from app.kit.schemas import MODEL_NAME_PATTERN
from app.hidden_states import service as hidden_state_service

router = APIRouter(prefix="/v1/benchmarks", tags=["hidden-states"])


@router.post("/{benchmark}/hidden-states", status_code=201)
def upload_hidden_states(
    benchmark: str,
    request: Request,
    model: str = Form(..., pattern=MODEL_NAME_PATTERN, description="The model's name or id (created if unknown)."),
    file: UploadFile = File(..., description=".npy (N x d, float16/float32) with `items`, or .npz with `ids` and `states`."),
    items: str | None = Form(None, description="For .npy: the item ids of the rows, in order, as a JSON list."),
    session: Session = SessionDep,
) -> JSONResponse:
    """Store one model's hidden states (final layer, last output token) on the benchmark's items.

    Streamed into database chunks; a re-upload for the same (benchmark, model) replaces the old one.
    """
    settings = request.app.state.settings
    result = hidden_state_service.store_hidden_states(
        session, benchmark, model, file.file, items, chunk_bytes=settings.hidden_state_chunk_bytes)
    session.commit()
    return JSONResponse(result, status_code=201)


@router.get("/{benchmark}/hidden-states")
def list_hidden_states(benchmark: str, session: Session = SessionDep) -> JSONResponse:
    """What is stored, one entry per model."""
    return JSONResponse({"items": hidden_state_service.list_hidden_states(session, benchmark), "next_cursor": None})


@router.delete("/{benchmark}/hidden-states/{model}", status_code=204)
def delete_hidden_states(benchmark: str, model: str, session: Session = SessionDep) -> Response:
    hidden_state_service.delete_hidden_states(session, benchmark, model)
    session.commit()
    return Response(status_code=204)
