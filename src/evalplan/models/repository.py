"""The model table's queries that other domains call (docs/ARCHITECTURE.md "Table ownership")."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from evalplan.auth.naming import find_named, find_named_many
from evalplan.db.models import Model


def model_one(session: Session, model_id: str) -> Model:
    """The readable model ``model_id`` (``NoResultFound`` otherwise)."""
    return session.get_one(Model, model_id)


def model_named(session: Session, ref: str) -> Model | None:
    """The readable model ``ref`` names (id, the caller's own name, a public one, ``team/name``), or None."""
    return find_named(session, Model, ref, kind="model")


def models_named(session: Session, refs: list[str]) -> dict[str, Model | None]:
    """:func:`model_named` of each of ``refs`` (one query for the plain refs)."""
    return find_named_many(session, Model, refs, kind="model")


def names_by_id(session: Session, ids: Iterable[str]) -> dict[str, str]:
    """id -> name of the readable models among ``ids`` (one query)."""
    wanted = list(ids)
    if not wanted:
        return {}
    return {model_id: name for model_id, name in session.execute(select(Model.id, Model.name)
                                                                 .where(Model.id.in_(wanted)))}


def team_names_among(session: Session, team_id: str, names: list[str]) -> list[str]:
    """Those of ``names`` that name a readable model of team ``team_id``."""
    return list(session.scalars(select(Model.name).where(Model.team_id == team_id, Model.name.in_(names))))


def name_of_id(session: Session, model_id: str) -> str | None:
    """The name of the readable model with id ``model_id``."""
    return session.scalars(select(Model.name).where(Model.id == model_id)).first()


def name_of_ref(session: Session, ref: str) -> str | None:
    """The name of a readable model whose id or name is ``ref``."""
    return session.scalars(select(Model.name).where((Model.id == ref) | (Model.name == ref))).first()


def id_of_ref(session: Session, ref: str) -> str | None:
    """The id of a readable model whose name or id is ``ref``."""
    return session.scalars(select(Model.id).where((Model.name == ref) | (Model.id == ref))).first()
