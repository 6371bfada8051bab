"""Evaluated models (LLMs): create, list and bulk get-or-create by name."""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from app.db.models import Model
from app.kit.errors import Conflict, InvalidInput, NotFound
from app.kit.pagination import Page, keyset_page
from app.kit.upsert import insert_ignoring_conflicts
from app.kit.validation import check_new_name


def create_model(session: Session, *, name: str, family: str | None = None,
                 metadata: dict[str, Any] | None = None) -> Model:
    check_new_name(session, Model.name, name, "model")
    row = {"name": name, "family": family, "metadata": dict(metadata or {})}
    if not insert_ignoring_conflicts(session, Model, [row], ["name"]):  # a concurrent request took the name
        raise Conflict(f"a model named {name!r} already exists",
                       [{"field": "name", "detail": "model names are unique"}])
    return session.scalars(select(Model).where(Model.name == name)).one()


def get_model(session: Session, ref: str) -> Model:
    model = session.scalars(select(Model).where(or_(Model.id == ref, Model.name == ref))).first()
    if model is None:
        raise NotFound(f"model {ref!r} does not exist",
                       [{"parameter": "model", "detail": f"no model with id or name {ref!r}"}])
    return model


def check_reference_form(refs: Any) -> list[str] | str | None:
    """``reference_models`` must be None, ``"all"`` or a list of model names (ids); 422 otherwise."""
    if refs is None or refs == "all":
        return refs
    if isinstance(refs, str) or not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        raise InvalidInput('reference_models must be a list of model names or "all"',
                           [{"field": "reference_models", "detail": f"got {refs!r}"}])
    return refs


def get_reference_models(session: Session, refs: Any) -> list[Model]:
    """The one reference-model check of a list: its form, every model exists (404 naming it), none
    is named twice (422). ``"all"`` and None are the caller's to resolve."""
    models = [get_model(session, ref) for ref in check_reference_form(refs) or []]
    if len({m.id for m in models}) != len(models):
        raise InvalidInput("a reference model is named twice", [{"field": "reference_models", "detail": "duplicates"}])
    return models


def ensure_models(session: Session, names: list[str]) -> dict[str, str]:
    """Map each name to its model id, creating missing models (safe under concurrent first use)."""
    existing: dict[str, str] = {}
    unique = list(dict.fromkeys(names))
    for start in range(0, len(unique), 500):
        chunk = unique[start:start + 500]
        existing.update(session.execute(select(Model.name, Model.id).where(Model.name.in_(chunk))).all())
    missing = [n for n in unique if n not in existing]
    if missing:
        # get-or-create without a race: a name another transaction created meanwhile is skipped
        # by ON CONFLICT DO NOTHING and read back (app.kit.upsert)
        session.flush()
        insert_ignoring_conflicts(session, Model, [{"name": n, "metadata": {}} for n in missing], ["name"])
        for start in range(0, len(missing), 500):
            chunk = missing[start:start + 500]
            existing.update(session.execute(select(Model.name, Model.id).where(Model.name.in_(chunk))).all())
    return existing


def list_models(session: Session, *, limit: int, cursor: str | None, family: str | None = None) -> Page[Model]:
    stmt = select(Model)
    if family is not None:
        stmt = stmt.where(Model.family == family)
    return keyset_page(session, stmt, Model.id, limit=limit, cursor=cursor, what="model")
