"""Evaluated models (LLMs): create, list and bulk get-or-create by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from evalplan.auth.audit import record
from evalplan.auth.deletion import register_team_blockers, register_team_part
from evalplan.auth.dependents import published_dependents
from evalplan.auth.names import check_new_names
from evalplan.auth.naming import check_new_name, get_named
from evalplan.auth.scoping import owned_by_caller, require_own, team_of
from evalplan.db.models import Model, Team
from evalplan.kit.errors import Conflict, InvalidInput
from evalplan.kit.hook import Hook
from evalplan.kit.pagination import Page, keyset_page
from evalplan.kit.upsert import insert_ignoring_conflicts


def create_model(session: Session, *, name: str, family: str | None = None,
                 metadata: dict[str, Any] | None = None, visibility: str = "private") -> Model:
    check_new_name(session, Model.name, name, "model")
    row = {"name": name, "family": family, "metadata": dict(metadata or {}), "visibility": visibility}
    if not insert_ignoring_conflicts(session, Model, [row], ["team_id", "name"],
                                     team_id=team_of(session)):  # a concurrent request took it
        raise Conflict(f"a model named {name!r} already exists",
                       [{"field": "name", "detail": "model names are unique per team"}])
    return session.scalars(select(Model).where(Model.name == name, owned_by_caller(session, Model))).one()


def get_model(session: Session, ref: str, *, write: bool = False) -> Model:
    """The model ``ref`` (id, name or ``team/name``; ``evalplan.auth.naming``) readable by the caller, else 404."""
    return get_named(session, Model, ref, kind="model", write=write)


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


def ensure_models(session: Session, names: list[str], created_ids: set[str] | None = None) -> dict[str, str]:
    """Map each name to the caller's own model id, creating missing models in the caller's team (safe under
    concurrent first use). The ids this call created (not those a concurrent transaction did) are added to
    ``created_ids`` when given."""
    existing: dict[str, str] = {}
    unique = list(dict.fromkeys(names))
    for start in range(0, len(unique), 500):
        chunk = unique[start:start + 500]
        existing.update(session.execute(select(Model.name, Model.id)
                                        .where(Model.name.in_(chunk), owned_by_caller(session, Model))).all())
    missing = [n for n in unique if n not in existing]
    if missing:
        check_new_names(session, missing, "model", "model")
        # get-or-create without a race: a name another transaction created meanwhile is skipped
        # by ON CONFLICT DO NOTHING and read back (evalplan.kit.upsert)
        session.flush()
        # in name order: two uploads introducing the same new models in different orders take the unique-index
        # locks in one order, so neither can wait on the other in a cycle (a deadlock would abort one)
        created = insert_ignoring_conflicts(session, Model, [{"name": n, "metadata": {}} for n in sorted(missing)],
                                            ["team_id", "name"], team_id=team_of(session))
        for start in range(0, len(missing), 500):
            chunk = missing[start:start + 500]
            existing.update(session.execute(select(Model.name, Model.id)
                                            .where(Model.name.in_(chunk), owned_by_caller(session, Model))).all())
        for name in missing:  # the models this upload created (not those a concurrent one did) are audited
            if existing.get(name) in created:
                record(session, "create", "model", existing[name], name=name, via="score upload")
        if created_ids is not None:
            created_ids.update(created)
    return existing


def list_models(session: Session, *, limit: int, cursor: str | None, family: str | None = None) -> Page[Model]:
    stmt = select(Model)
    if family is not None:
        stmt = stmt.where(Model.family == family)
    return keyset_page(session, stmt, Model.id, limit=limit, cursor=cursor, what="model")


def delete_model(session: Session, model: Model) -> None:
    """Delete a model with its scores, responses and hidden states (audited); the benchmarks it had scores on
    get a new ``data_version``. 409 while a published coreset uses it as a reference."""
    require_own(session, model, f"model {model.name!r}")
    published = published_dependents(session, model=model)
    if published:
        raise Conflict(f"model {model.name!r} cannot be deleted: {len(published)} published coreset(s) use it as a "
                       "reference model", [{"parameter": "model", "detail": "published coresets depend on it"}])
    _ON_DELETE.get()(session, model.id)
    record(session, "delete", "model", model.id, name=model.name)
    session.delete(model)
    session.flush()


#: what the benchmarks domain (above models) deletes with a model: ``(session, model id) -> None`` (its scores
#: and responses; the benchmarks it had scores on get a new ``data_version``), registered by
#: ``evalplan.benchmarks.repository``
_ON_DELETE: Hook[Callable[[Session, str], None]] = Hook(
    # a process that deletes models imports the benchmarks (evalplan.main does)
    "no dropper of a model's scores registered: import evalplan.benchmarks.repository")


def on_model_deleted(dropper: Callable[[Session, str], None]) -> None:
    """``dropper`` deletes what of its domain goes with a deleted model (its own rules, its own tables)."""
    _ON_DELETE.register(dropper)


def _delete_team_models(session: Session, team_id: str) -> list[str]:
    """Team deletion's part: each of the team's models under the rules of its ``DELETE``."""
    models = list(session.scalars(select(Model).where(Model.team_id == team_id)))
    ids = [m.id for m in models]
    for model in models:
        delete_model(session, model)
    return ids


def _team_blockers(session: Session, team: Team, published: list[str]) -> list[dict[str, Any]]:
    """The team's models that other teams' published coresets use as a reference (``published``: the team's own
    published coresets, reported apart)."""
    found: list[dict[str, Any]] = []
    for model in session.scalars(select(Model).where(Model.team_id == team.id)):
        foreign_published = [c for c in published_dependents(session, model=model) if c not in published]
        if foreign_published:
            found.append({"detail": f"model {model.name!r}: {len(foreign_published)} published coreset(s) of other "
                                    "teams use it as a reference model", "model": model.name})
    return found


register_team_part("models", _delete_team_models)  # team deletion (evalplan.auth.deletion)
register_team_blockers("models", _team_blockers)
