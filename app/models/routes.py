"""Evaluated models (``/v1/models``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.db.models import Model
from app.kit.deps import DbSession, Pagination
from app.models import service as model_service
from app.models.schemas import ModelCreate, ModelList, ModelOut

router = APIRouter(prefix="/v1/models", tags=["models"])


def model_out(model: Model) -> ModelOut:
    return ModelOut(id=model.id, name=model.name, family=model.family, metadata=model.meta or {},
                    created_at=model.created_at)


@router.post("", status_code=201, response_model=ModelOut)
def create_model(body: ModelCreate, session: DbSession) -> ModelOut:
    model = model_service.create_model(session, name=body.name, family=body.family, metadata=body.metadata)
    session.commit()
    return model_out(model)


@router.get("", response_model=ModelList)
def list_models(session: DbSession, page: Pagination, family: Annotated[str | None, Query()] = None) -> ModelList:
    result = model_service.list_models(session, limit=page.limit, cursor=page.cursor, family=family)
    return ModelList(items=[model_out(m) for m in result.items], next_cursor=result.next_cursor)


@router.get("/{model:path}", response_model=ModelOut)
def read_model(model: str, session: DbSession) -> ModelOut:
    return model_out(model_service.get_model(session, model))
