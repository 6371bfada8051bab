"""Hidden states of models on a benchmark's items (RepCore, papers/003 §2.2): upload, list, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Response, UploadFile

from evalplan.auth.deps import DbSession
from evalplan.hidden_states import service as hidden_state_service
from evalplan.hidden_states.schemas import HiddenStatesList, HiddenStatesOut, HiddenStatesStored
from evalplan.kit.deps import AppSettings
from evalplan.kit.schemas import MODEL_NAME_PATTERN

router = APIRouter(prefix="/v1/benchmarks", tags=["hidden-states"])


@router.post("/{benchmark}/hidden-states", status_code=201, response_model=HiddenStatesStored)
def upload_hidden_states(
    benchmark: str,
    session: DbSession,
    settings: AppSettings,
    model: Annotated[str, Form(pattern=MODEL_NAME_PATTERN, description="The model's name or id (created if unknown).")],
    file: Annotated[UploadFile,
                    File(description=".npy (N x d, float16/float32) with `items`, or .npz with `ids` and `states`.")],
    items: Annotated[str | None,
                     Form(description="For .npy: the item ids of the rows, in order, as a JSON list.")] = None,
) -> HiddenStatesStored:
    """Store one model's hidden states (final layer, last output token) on the benchmark's items.

    Streamed into database chunks; a re-upload for the same (benchmark, model) replaces the old one.
    """
    result = hidden_state_service.store_hidden_states(
        session, benchmark, model, file.file, items, chunk_bytes=settings.hidden_state_chunk_bytes)
    session.commit()
    return HiddenStatesStored.model_validate(result)


@router.get("/{benchmark}/hidden-states", response_model=HiddenStatesList)
def list_hidden_states(benchmark: str, session: DbSession) -> HiddenStatesList:
    """What is stored, one entry per model."""
    rows = hidden_state_service.list_hidden_states(session, benchmark)
    return HiddenStatesList(items=[HiddenStatesOut.model_validate(r) for r in rows])


@router.delete("/{benchmark}/hidden-states/{model}", status_code=204, response_class=Response)
def delete_hidden_states(benchmark: str, model: str, session: DbSession) -> Response:
    hidden_state_service.delete_hidden_states(session, benchmark, model)
    session.commit()
    return Response(status_code=204)
