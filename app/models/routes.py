"""Evaluated models."""

from __future__ import annotations

from fastapi import APIRouter, Query
from sqlalchemy.orm import Session

from app.kit.deps import PageDep, PageParams, SessionDep
from app.db.models import Model
from app.models.schemas import ModelCreate, ModelList, ModelOut
from app.models import service as models_registry
from app.models.service import get_model

router = APIRouter(prefix="/v1/models", tags=["models"])


def model_out(model: Model) -> ModelOut:
    return ModelOut(id=model.id, name=model.name, family=model.family, metadata=model.meta or {},
                    created_at=model.created_at)


@router.post("", status_code=201, response_model=ModelOut)
def create_model(body: ModelCreate, session: Session = SessionDep) -> ModelOut:
    model = models_registry.create_model(session, name=body.name, family=body.family, metadata=body.metadata)
    session.commit()
    return model_out(model)


@router.get("", response_model=ModelList)
def list_models(family: str | None = Query(None), page: PageParams = PageDep, session: Session = SessionDep) -> ModelList:
    result = models_registry.list_models(session, limit=page.limit, cursor=page.cursor, family=family)
    return ModelList(items=[model_out(m) for m in result.items], next_cursor=result.next_cursor)


@router.get("/{model:path}", response_model=ModelOut)
def read_model(model: str, session: Session = SessionDep) -> ModelOut:
    return model_out(get_model(session, model))
