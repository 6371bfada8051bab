"""Benchmarks: create, read, list, with their item and model counts."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, overload

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalplan.auth.audit import record
from evalplan.auth.deletion import register_team_blockers, register_team_part
from evalplan.auth.dependents import foreign_dependents, published_dependents, reader
from evalplan.auth.names import check_new_names
from evalplan.auth.naming import check_new_name, get_named
from evalplan.auth.scoping import owned_by_caller, require_own, team_of
from evalplan.benchmarks import repository as _repository  # noqa: F401  (registers the benchmarks' dependents reader)
from evalplan.core.benchmarks.score_scale import ScoreScale
from evalplan.db.ids import looks_like_id
from evalplan.db.models import Benchmark, BenchmarkModel, Item, ModelResponse, ScoreRow, Team
from evalplan.kit.errors import Conflict, InvalidInput
from evalplan.kit.hook import Hook
from evalplan.kit.pagination import Page, keyset_page
from evalplan.kit.upsert import insert_ignoring_conflicts


@dataclass
class BenchmarkView:
    benchmark: Benchmark
    n_items: int
    n_models: int


def get_benchmark(session: Session, ref: str, *, for_update: bool = False, write: bool | None = None) -> Benchmark:
    """The benchmark ``ref`` (id, name or ``team/name``; ``evalplan.auth.naming``) readable by the caller, 404
    otherwise. ``for_update`` locks it and, unless ``write=False``, requires the caller to own it (403)."""
    return get_named(session, Benchmark, ref, kind="benchmark", for_update=for_update,
                     write=for_update if write is None else write)


def get_benchmarks(session: Session, refs: list[str], *, location: str = "field") -> list[Benchmark]:
    """Benchmarks by id or name, in the given order: 404 for an unknown one, 422 for none or one named
    twice (errors at ``{location: "benchmarks"}``, ``location`` "field" or "parameter")."""
    if not refs:
        raise InvalidInput("benchmarks must name at least one benchmark", [{location: "benchmarks", "detail": "empty"}])
    benchmarks = [get_benchmark(session, ref) for ref in refs]
    if len({b.id for b in benchmarks}) != len(benchmarks):
        raise InvalidInput("a benchmark is named twice", [{location: "benchmarks", "detail": "duplicates"}])
    return benchmarks


def scale_of(benchmark: Benchmark) -> ScoreScale:
    return ScoreScale(benchmark.score_kind, benchmark.score_min, benchmark.score_max)


@overload
def score_range(benchmark: Benchmark, *, infinite: Literal[False] = False) -> tuple[float | None, float | None]:
    ...


@overload
def score_range(benchmark: Benchmark, *, infinite: Literal[True]) -> tuple[float, float]:
    ...


def score_range(benchmark: Benchmark, *, infinite: bool = False) -> tuple[float | None, float | None]:
    """The benchmark's declared score range (binary: ``[0, 1]``); an open end is None, or with ``infinite``
    ``-inf`` / ``inf`` (what a session clips its intervals to)."""
    if benchmark.score_kind == "binary":
        return 0.0, 1.0
    if not infinite:
        return benchmark.score_min, benchmark.score_max
    scale = scale_of(benchmark)
    lo = -math.inf if scale.minimum is None else float(scale.minimum)
    hi = math.inf if scale.maximum is None else float(scale.maximum)
    return lo, hi


def validate_scale(kind: str, minimum: float | None, maximum: float | None) -> tuple[float | None, float | None]:
    if kind == "binary":
        return 0.0, 1.0
    if minimum is not None and maximum is not None and minimum >= maximum:
        raise InvalidInput("score_min must be below score_max",
                           [{"field": "score_min", "detail": f"{minimum} >= {maximum}"}])
    return minimum, maximum


def create_benchmark(
    session: Session,
    *,
    name: str,
    capability: str | None = None,
    description: str | None = None,
    embedding_fields: list[str] | None = None,
    score_kind: str = "continuous",
    score_min: float | None = 0.0,
    score_max: float | None = 1.0,
    default_metric: str = "score",
    visibility: str = "private",
) -> Benchmark:
    minimum, maximum = validate_scale(score_kind, score_min, score_max)
    check_new_name(session, Benchmark.name, name, "benchmark")
    benchmark = Benchmark(
        name=name,
        capability=capability,
        description=description,
        embedding_fields=list(embedding_fields or []),
        score_kind=score_kind,
        score_min=minimum,
        score_max=maximum,
        default_metric=default_metric,
        data_version=0,
        visibility=visibility,
    )
    session.add(benchmark)
    try:
        session.flush()
    except IntegrityError:
        raise Conflict(f"a benchmark named {name!r} already exists",
                       [{"field": "name", "detail": "benchmark names are unique per team"}]) from None
    record(session, "create", "benchmark", benchmark.id, name=benchmark.name)
    return benchmark


def get_or_create_benchmark(session: Session, *, name: str, description: str | None, score_kind: str,
                            score_min: float | None, score_max: float | None,
                            default_metric: str) -> tuple[Benchmark, bool]:
    """The caller's benchmark named ``name``, locked (FOR UPDATE), created first when missing; ``(benchmark, created)``.

    Safe under concurrent first use (two imports of one new task): ``INSERT ... ON CONFLICT DO
    NOTHING`` then a re-read, so the loser uses the winner's row instead of failing.
    """
    stmt = select(Benchmark).where(Benchmark.name == name, owned_by_caller(session, Benchmark)).with_for_update()
    benchmark = session.scalars(stmt).first()
    if benchmark is not None:
        return benchmark, False
    minimum, maximum = validate_scale(score_kind, score_min, score_max)
    check_new_names(session, [name], "benchmark", "benchmark")
    if looks_like_id(name):
        check_new_name(session, Benchmark.name, name, "benchmark")  # raises the 422
    session.flush()
    created = insert_ignoring_conflicts(session, Benchmark, [{
        "name": name, "description": description, "embedding_fields": [], "score_kind": score_kind,
        "score_min": minimum, "score_max": maximum, "default_metric": default_metric, "data_version": 0,
    }], ["team_id", "name"], team_id=team_of(session))
    benchmark = session.scalars(stmt.execution_options(populate_existing=True)).one()
    if benchmark.id in created:
        record(session, "create", "benchmark", benchmark.id, name=benchmark.name, via="import")
    return benchmark, benchmark.id in created


def set_visibility(session: Session, benchmark: Benchmark, visibility: str) -> None:
    """PATCH visibility (audited); back to private is 409 while other teams build on it."""
    require_own(session, benchmark, f"benchmark {benchmark.name!r}")
    if visibility == benchmark.visibility:
        return
    if visibility == "private":
        dependents = foreign_dependents(session, benchmark)
        if dependents:
            raise Conflict(f"benchmark {benchmark.name!r} cannot become private: {len(dependents)} coreset(s) or "
                           "session(s) of other teams are built on it",
                           [{"field": "visibility", "detail": f"{len(dependents)} dependents in other teams"}])
    record(session, "visibility", "benchmark", benchmark.id, was=benchmark.visibility, now=visibility)
    benchmark.visibility = visibility
    session.flush()


def counts(session: Session, benchmark_ids: list[str]) -> dict[str, tuple[int, int]]:
    """(n_items, n_models) per benchmark id; n_models counts models with scores on it."""
    if not benchmark_ids:
        return {}
    n_items = dict(
        session.execute(
            select(Item.benchmark_id, func.count())
            .where(Item.benchmark_id.in_(benchmark_ids)).group_by(Item.benchmark_id)
        ).all()
    )
    n_models = dict(
        session.execute(
            select(BenchmarkModel.benchmark_id, func.count())
            .where(BenchmarkModel.benchmark_id.in_(benchmark_ids))
            .group_by(BenchmarkModel.benchmark_id)
        ).all()
    )
    return {b: (int(n_items.get(b, 0)), int(n_models.get(b, 0))) for b in benchmark_ids}


def view(session: Session, benchmark: Benchmark) -> BenchmarkView:
    n_items, n_models = counts(session, [benchmark.id])[benchmark.id]
    return BenchmarkView(benchmark, n_items, n_models)


def list_benchmarks(session: Session, *, limit: int, cursor: str | None,
                    capability: str | None = None) -> Page[BenchmarkView]:
    stmt = select(Benchmark)
    if capability is not None:
        stmt = stmt.where(Benchmark.capability == capability)
    page = keyset_page(session, stmt, Benchmark.id, limit=limit, cursor=cursor, what="benchmark")
    by_id = counts(session, [b.id for b in page.items])
    return Page([BenchmarkView(b, *by_id[b.id]) for b in page.items], page.next_cursor)


def delete_benchmark(session: Session, benchmark: Benchmark) -> None:
    """Delete a benchmark with everything that hangs on it, all or nothing (audited).

    409 while a published coreset (of any team) is built on it, or another team's coreset or session
    is; the caller's own unpublished coresets on it go with it. Items, score rows, model responses, hidden states,
    priors, trained models and sessions go by cascade (score rows and responses also explicitly)."""
    require_own(session, benchmark, f"benchmark {benchmark.name!r}")
    published = published_dependents(session, benchmark_id=benchmark.id)
    if published:
        raise Conflict(f"benchmark {benchmark.name!r} cannot be deleted: {len(published)} published coreset(s) "
                       "are built on it", [{"parameter": "benchmark", "detail": "published coresets depend on it",
                                            "coresets": published if _all_readable(session, published) else []}])
    foreign = foreign_dependents(session, benchmark)
    if foreign:
        raise Conflict(f"benchmark {benchmark.name!r} cannot be deleted: {len(foreign)} coreset(s) or session(s) "
                       "of other teams are built on it", [{"parameter": "benchmark", "detail": "other teams depend"}])
    own = _ON_DELETE.get()(session, benchmark)
    session.execute(delete(ScoreRow).where(ScoreRow.benchmark_id == benchmark.id))
    session.execute(delete(ModelResponse).where(ModelResponse.benchmark_id == benchmark.id))
    record(session, "delete", "benchmark", benchmark.id, name=benchmark.name, coresets=own)
    session.delete(benchmark)
    session.flush()


def _all_readable(session: Session, coreset_ids: list[str]) -> bool:
    return len(reader("readable_coresets")(session, coreset_ids)) == len(coreset_ids)


#: what a domain above benchmarks deletes with a benchmark: ``(session, benchmark) -> ids of what went`` (the
#: caller's own coresets on it, registered by ``evalplan.coresets.repository``)
_ON_DELETE: Hook[Callable[[Session, Benchmark], list[str]]] = Hook(
    # a process that deletes benchmarks imports the coresets (evalplan.main does)
    "no deleter of the coresets on a benchmark registered: import evalplan.coresets.repository")


def on_benchmark_deleted(deleter: Callable[[Session, Benchmark], list[str]]) -> None:
    """``deleter`` deletes what of its domain goes with a deleted benchmark (its own rules, its own tables)."""
    _ON_DELETE.register(deleter)


def _delete_team_benchmarks(session: Session, team_id: str) -> list[str]:
    """Team deletion's part: each of the team's benchmarks under the rules of its ``DELETE``."""
    benchmarks = list(session.scalars(select(Benchmark).where(Benchmark.team_id == team_id)))
    ids = [b.id for b in benchmarks]
    for benchmark in benchmarks:
        delete_benchmark(session, benchmark)
    return ids


def _team_blockers(session: Session, team: Team, published: list[str]) -> list[dict[str, Any]]:
    """The team's benchmarks that other teams' coresets or sessions are built on (``published``: the team's own
    published coresets, reported apart)."""
    found: list[dict[str, Any]] = []
    for benchmark in session.scalars(select(Benchmark).where(Benchmark.team_id == team.id)):
        foreign_published = [c for c in published_dependents(session, benchmark_id=benchmark.id)
                             if c not in published]
        others = foreign_dependents(session, benchmark)
        if foreign_published or others:
            found.append({"detail": f"benchmark {benchmark.name!r}: {len(set(foreign_published) | set(others))} "
                                    "coreset(s) or session(s) of other teams are built on it",
                          "benchmark": benchmark.name})
    return found


register_team_part("benchmarks", _delete_team_benchmarks)  # team deletion (evalplan.auth.deletion)
register_team_blockers("benchmarks", _team_blockers)
