"""Curated coresets (API.md "Curated coresets"): name series and versions, ``name@version`` references,
publish (frozen), deprecate, delete, diff, provenance and staleness.

* ``POST /v1/coresets`` with ``name`` adds version ``1 + latest`` of the team's series; two concurrent
  creates race on the unique ``(team_id, name, version)``: the loser retries inside a SAVEPOINT and
  takes the next number (:func:`insert_next_version`), so versions are consecutive with no duplicate.
* ``{coreset}`` is an id, ``name@version``, ``name@latest`` (the caller's team) or
  ``team/name@version`` (another team's public series).
* A published version never changes: publishing needs a ready coreset; ``DELETE`` of a published
  one is 409. Its provenance records each benchmark's ``data_version`` and a sha256 of the items and
  scores the selection used; ``stale`` compares that with the benchmarks now.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import delete, func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app import __version__
from app.db.models import Benchmark, BenchmarkModel, Coreset, CoresetItem, Item, Model, Score, utcnow
from app.kit.audit import record
from app.kit.errors import Conflict, InvalidInput, NotFound
from app.kit.naming import normalize_ref, team_id_named
from app.kit.scoping import caller_of, owned_by_caller, require_own, unscoped

VERSION_RETRIES = 20


def parse_ref(ref: str) -> tuple[str | None, str, str] | None:
    """``[team/]name@version`` -> (team, name, version) or None when ``ref`` has no ``@``."""
    ref = normalize_ref(ref)
    if "@" not in ref:
        return None
    name, _, version = ref.rpartition("@")
    team = None
    if "/" in name:
        team, _, name = name.partition("/")
    return team, name, version


def find_coreset(session: Session, ref: str) -> Coreset | None:
    """The coreset ``ref`` names among the readable ones (id or ``[team/]name@version|latest``)."""
    coreset = session.get(Coreset, normalize_ref(ref))
    if coreset is not None:
        return coreset
    parsed = parse_ref(ref)
    if parsed is None:
        return None
    team, name, version = parsed
    stmt = select(Coreset).where(Coreset.name == name)
    if team is None:
        stmt = stmt.where(owned_by_caller(session, Coreset))
    else:
        stmt = stmt.where(Coreset.team_id == team_id_named(session, team))
    if version == "latest":
        stmt = stmt.order_by(Coreset.version.desc())
    elif version.isdigit():
        stmt = stmt.where(Coreset.version == int(version))
    else:
        return None
    return session.scalars(stmt.limit(1)).first()


def get_coreset(session: Session, ref: str, *, write: bool = False, for_update: bool = False) -> Coreset:
    coreset = find_coreset(session, ref)
    if coreset is None:
        raise NotFound(f"coreset {normalize_ref(ref)!r} does not exist",
                       [{"parameter": "coreset", "detail": "no coreset with this id or name@version"}])
    if write:
        require_own(session, coreset, f"coreset {normalize_ref(ref)!r}")
    if for_update:
        locked = session.scalars(select(Coreset).where(Coreset.id == coreset.id).with_for_update()
                                 .execution_options(populate_existing=True)).first()
        assert locked is not None
        coreset = locked
    return coreset


def insert_next_version(session: Session, coreset: Coreset) -> None:
    """Flush ``coreset`` as the next version of its name in the caller's team (race-safe, see module doc)."""
    if not coreset.name:
        coreset.version = 1
        session.add(coreset)
        session.flush()
        return
    for _ in range(VERSION_RETRIES):
        latest = session.scalar(select(func.max(Coreset.version))
                                .where(Coreset.name == coreset.name, owned_by_caller(session, Coreset)))
        coreset.version = (latest or 0) + 1
        try:
            with session.begin_nested():
                session.add(coreset)
                session.flush()
            return
        except IntegrityError:
            continue  # another request took this version: read the new latest and try the next
    raise Conflict(f"could not allocate a version of coreset {coreset.name!r}; retry",
                   [{"field": "name", "detail": "too many concurrent creates"}])


def write_first_on_sqlite(session: Session) -> None:
    """On SQLite, make the transaction's first statement a write, so its write lock is taken before any
    read pins a snapshot (a deferred transaction that read first cannot write after another commit):
    concurrent creates of one series then serialize on the lock instead of failing."""
    if session.get_bind().dialect.name == "sqlite":
        session.execute(text("UPDATE coresets SET version = version WHERE 1 = 0"))


def base_provenance(session: Session, coreset: Coreset) -> dict[str, Any]:
    """What a new coreset records before its selection runs (data fields follow in :func:`data_provenance`)."""
    caller = caller_of(session)
    return {"method": coreset.method, "params": coreset.params, "seed": coreset.seed,
            "reference_models": coreset.reference_models, "predictor": coreset.predictor,
            "embedding_model": coreset.embedding_model, "service_version": __version__,
            "created_by": caller.actor if caller is not None else "local",
            "team": caller.team if caller is not None else "local"}


def benchmark_data_hash(session: Session, benchmark: Benchmark) -> str:
    """sha256 of a benchmark's items (id, content hash) and scores (model, item, metric, value), in a fixed order."""
    digest = hashlib.sha256()
    for item_id, content_hash in session.execute(
            select(Item.item_id, Item.content_hash).where(Item.benchmark_id == benchmark.id).order_by(Item.item_id)):
        digest.update(f"i\t{item_id}\t{content_hash or ''}\n".encode())
    rows = session.execute(
        select(Model.name, Item.item_id, Score.metric, Score.value)
        .join(Item, Item.pk == Score.item_pk).join(Model, Model.id == Score.model_id)
        .where(Item.benchmark_id == benchmark.id).order_by(Model.name, Item.item_id, Score.metric)
        .execution_options(yield_per=10_000))
    for model, item_id, metric, value in rows:
        digest.update(f"s\t{model}\t{item_id}\t{metric}\t{float(value)!r}\n".encode())
    return digest.hexdigest()


def data_provenance(session: Session, coreset: Coreset) -> dict[str, Any]:
    """``data_versions`` and ``data_hash`` (per benchmark id) of the data a selection read."""
    benchmarks = list(session.scalars(select(Benchmark).where(Benchmark.id.in_(coreset.benchmark_ids))))
    return {"data_versions": {b.id: int(b.data_version or 0) for b in benchmarks},
            "data_hash": {b.id: benchmark_data_hash(session, b) for b in benchmarks},
            "n_items": dict(session.execute(select(Item.benchmark_id, func.count())
                                            .where(Item.benchmark_id.in_(coreset.benchmark_ids))
                                            .group_by(Item.benchmark_id)).all())}


def staleness(session: Session, coreset: Coreset) -> tuple[bool, list[dict[str, Any]]]:
    """Whether the source data changed since the selection (data_version or item count differ, or a
    benchmark is gone), with what changed."""
    provenance = coreset.provenance or {}
    versions: dict[str, int] = provenance.get("data_versions") or {}
    if not versions:
        return False, []
    counts = provenance.get("n_items") or {}
    now = {b.id: b for b in session.scalars(select(Benchmark).where(Benchmark.id.in_(list(versions))))}
    n_now = dict(session.execute(select(Item.benchmark_id, func.count()).where(Item.benchmark_id.in_(list(versions)))
                                 .group_by(Item.benchmark_id)).all())
    changes: list[dict[str, Any]] = []
    for benchmark_id, version in versions.items():
        benchmark = now.get(benchmark_id)
        if benchmark is None:
            changes.append({"benchmark": benchmark_id, "change": "no longer readable"})
            continue
        if int(benchmark.data_version or 0) != int(version):
            changes.append({"benchmark": benchmark.name, "change": "data_version",
                            "was": int(version), "now": int(benchmark.data_version or 0)})
        if benchmark_id in counts and int(n_now.get(benchmark_id, 0)) != int(counts[benchmark_id]):
            changes.append({"benchmark": benchmark.name, "change": "n_items",
                            "was": int(counts[benchmark_id]), "now": int(n_now.get(benchmark_id, 0))})
    return bool(changes), changes


def publish(session: Session, coreset: Coreset) -> Coreset:
    """Freeze a ready version (idempotent for a published one)."""
    require_own(session, coreset, f"coreset {coreset.id}")
    if coreset.published_at is not None:
        return coreset
    if coreset.status != "ready":
        raise Conflict(f"coreset {coreset.id} is {coreset.status}: only a ready coreset can be published",
                       [{"field": "status", "detail": coreset.status}])
    caller = caller_of(session)
    coreset.published_at, coreset.published_by = utcnow(), caller.actor if caller else "local"
    record(session, "publish", "coreset", coreset.id, name=coreset.name, version=coreset.version)
    session.flush()
    return coreset


def deprecate(session: Session, coreset: Coreset, message: str) -> Coreset:
    require_own(session, coreset, f"coreset {coreset.id}")
    if coreset.published_at is None:
        raise Conflict(f"coreset {coreset.id} is not published: delete it instead of deprecating it",
                       [{"field": "published_at", "detail": "null"}])
    coreset.deprecated_at, coreset.deprecation_message = utcnow(), message
    record(session, "deprecate", "coreset", coreset.id, name=coreset.name, version=coreset.version, message=message)
    session.flush()
    return coreset


def delete_coreset(session: Session, coreset: Coreset) -> None:
    require_own(session, coreset, f"coreset {coreset.id}")
    if coreset.published_at is not None:
        raise Conflict(f"coreset {coreset.id} is published: a published version is never deleted (deprecate it)",
                       [{"field": "published_at", "detail": "published versions are frozen"}])
    record(session, "delete", "coreset", coreset.id, name=coreset.name, version=coreset.version)
    session.execute(delete(CoresetItem).where(CoresetItem.coreset_id == coreset.id))
    session.delete(coreset)
    session.flush()


def set_visibility(session: Session, coreset: Coreset, visibility: str) -> Coreset:
    require_own(session, coreset, f"coreset {coreset.id}")
    if visibility != coreset.visibility:
        record(session, "visibility", "coreset", coreset.id, was=coreset.visibility, now=visibility)
        coreset.visibility = visibility
    session.flush()
    return coreset


def item_keys(session: Session, coreset: Coreset) -> list[tuple[str, str]]:
    """(benchmark name, item id) of the coreset's items, in rank order."""
    return [(b, i) for b, i in session.execute(
        select(Benchmark.name, Item.item_id).select_from(CoresetItem).join(Item, Item.pk == CoresetItem.item_pk)
        .join(Benchmark, Benchmark.id == CoresetItem.benchmark_id)
        .where(CoresetItem.coreset_id == coreset.id).order_by(CoresetItem.rank)).all()]


def diff(session: Session, coreset: Coreset, against: Coreset) -> dict[str, Any]:
    """Items in ``coreset`` and not in ``against`` (added) and the reverse (removed), also per benchmark."""
    if coreset.status != "ready" or against.status != "ready":
        raise Conflict("both coresets must be ready to diff",
                       [{"parameter": "against" if coreset.status == "ready" else "coreset",
                         "detail": f"status {against.status if coreset.status == 'ready' else coreset.status}"}])
    mine, theirs = item_keys(session, coreset), item_keys(session, against)  # (benchmark, item) in rank order
    added = [k for k in mine if k not in set(theirs)]
    removed = [k for k in theirs if k not in set(mine)]
    per: dict[str, dict[str, list[str]]] = {}
    for key, bucket in [(k, "added") for k in added] + [(k, "removed") for k in removed]:
        per.setdefault(key[0], {"added": [], "removed": []})[bucket].append(key[1])
    return {"coreset": coreset.id, "against": against.id,
            "added": [{"benchmark": b, "item": i} for b, i in added],
            "removed": [{"benchmark": b, "item": i} for b, i in removed],
            "n_common": len(set(mine) & set(theirs)), "benchmarks": per}


def check_name(name: str | None) -> None:
    if name is not None and ("@" in name or "/" in name):
        raise InvalidInput("a coreset name may not contain '@' or '/' (they separate version and team)",
                           [{"field": "name", "detail": name}])




def published_dependents(session: Session, *, benchmark_id: str | None = None,
                         model: Model | None = None) -> list[str]:
    """Published coresets (of any team: counted, never shown) built on the benchmark, or using the model as
    a reference (by name, or through ``"all"`` when it has scores on one of their benchmarks)."""
    with unscoped(session):
        rows = list(session.execute(select(Coreset.id, Coreset.benchmark_ids, Coreset.reference_models)
                                    .where(Coreset.published_at.isnot(None))).all())
        scored_on: set[str] = set()
        if model is not None:
            scored_on = set(session.scalars(select(BenchmarkModel.benchmark_id)
                                            .where(BenchmarkModel.model_id == model.id)))
    found = []
    for coreset_id, benchmark_ids, references in rows:
        ids = set(benchmark_ids or [])
        if benchmark_id is not None and benchmark_id in ids:
            found.append(coreset_id)
        elif model is not None and ids & scored_on and (
                references == "all" or (isinstance(references, list) and model.name in references)):
            found.append(coreset_id)
    return found
