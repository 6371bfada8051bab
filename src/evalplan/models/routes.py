"""Evaluated models (``/v1/models``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from evalplan.auth.audit import record
from evalplan.auth.deps import DbSession
from evalplan.auth.teams import team_name, team_names
from evalplan.db.models import Model
from evalplan.kit.deps import Pagination
from evalplan.kit.schemas import VisibilityPatch
from evalplan.models import service as model_service
from evalplan.models.schemas import ModelCreate, ModelList, ModelOut

router = APIRouter(prefix="/v1/models", tags=["models"])


def model_out(model: Model, team: str | None = None) -> ModelOut:
    return ModelOut(id=model.id, name=model.name, family=model.family, metadata=model.meta or {},
                    created_at=model.created_at, team=team, visibility=model.visibility)


@router.post("", status_code=201, response_model=ModelOut)
def create_model(body: ModelCreate, session: DbSession) -> ModelOut:
    model = model_service.create_model(session, name=body.name, family=body.family, metadata=body.metadata,
                                       visibility=body.visibility)
    record(session, "create", "model", model.id, name=model.name)
    session.commit()
    return model_out(model, team_name(session, model.team_id))


@router.get("", response_model=ModelList)
def list_models(session: DbSession, page: Pagination, family: Annotated[str | None, Query()] = None) -> ModelList:
    result = model_service.list_models(session, limit=page.limit, cursor=page.cursor, family=family)
    names = team_names(session, {m.team_id for m in result.items})
    return ModelList(items=[model_out(m, names[m.team_id]) for m in result.items], next_cursor=result.next_cursor)


@router.get("/{model:path}", response_model=ModelOut)
def read_model(model: str, session: DbSession) -> ModelOut:
    row = model_service.get_model(session, model)
    return model_out(row, team_name(session, row.team_id))


@router.delete("/{model:path}", status_code=204, response_class=Response)
def delete_model(model: str, session: DbSession) -> Response:
    """Delete the model with its scores, responses and hidden states (its benchmarks get a new data_version).
    409 while a published coreset uses it as a reference model. Audited."""
    model_service.delete_model(session, model_service.get_model(session, model, write=True))
    session.commit()
    return Response(status_code=204)


@router.patch("/{model:path}", response_model=ModelOut)
def patch_model(model: str, body: VisibilityPatch, session: DbSession) -> ModelOut:
    """Change the visibility (`private` or `public`); audited."""
    row = model_service.get_model(session, model, write=True)
    if row.visibility != body.visibility:
        record(session, "visibility", "model", row.id, was=row.visibility, now=body.visibility)
        row.visibility = body.visibility
    session.commit()
    return model_out(row, team_name(session, row.team_id))
