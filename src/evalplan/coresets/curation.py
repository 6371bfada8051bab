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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from threading import Lock
from typing import Any

from cachetools import LRUCache
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalplan import __version__
from evalplan.auth.audit import record
from evalplan.auth.naming import normalize_ref, team_id_named
from evalplan.auth.scoping import caller_of, owned_by_caller, require_own, unscoped
from evalplan.coresets import curation_repository as queries
from evalplan.db.models import Benchmark, Coreset, utcnow
from evalplan.kit.errors import Conflict, InvalidInput, NotFound

VERSION_RETRIES = 20


@contextmanager
def published_reads(session: Session, coreset: Coreset) -> Iterator[None]:
    """Issue 24, the sharing rule: publishing a version shares it, with everything a predict or export of it
    needs (its items' ids and content, the names and scales of its benchmarks, its frozen state), whatever
    the visibility of its source benchmarks. Inside this block the reads of a published ``coreset``'s own
    items and benchmarks are not team-scoped; every other read (the caller's models, their scores) is."""
    if coreset.published_at is None:
        yield
        return
    with unscoped(session):
        yield


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
    if version != "latest" and not version.isdigit():
        return None

    if team is not None:
        return queries.series_version(session, name, version, Coreset.team_id == team_id_named(session, team))
    own = queries.series_version(session, name, version, owned_by_caller(session, Coreset))
    if own is not None:
        return own
    # the caller has no series of that name: the one other team's shared (public) series of it
    teams = queries.series_teams(session, name)
    if len(teams) > 1:
        names = queries.team_names(session, teams)
        candidates = sorted(f"{names.get(t, t)}/{name}@{version}" for t in teams)
        raise Conflict(f"coreset {name}@{version} is ambiguous: several teams share a series of that name; "
                       "name it as team/name@version",
                       [{"parameter": "coreset", "detail": "one of " + ", ".join(candidates),
                         "candidates": candidates}])
    return queries.series_version(session, name, version) if teams else None


def get_coreset(session: Session, ref: str, *, write: bool = False, for_update: bool = False) -> Coreset:
    coreset = find_coreset(session, ref)
    if coreset is None:
        raise NotFound(f"coreset {normalize_ref(ref)!r} does not exist",
                       [{"parameter": "coreset", "detail": "no coreset with this id or name@version"}])
    if write:
        require_own(session, coreset, f"coreset {normalize_ref(ref)!r}")
    if for_update:
        locked = queries.lock_coreset(session, coreset.id)
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
        latest = queries.latest_version(session, coreset.name)
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


def base_provenance(session: Session, coreset: Coreset) -> dict[str, Any]:
    """What a new coreset records before its selection runs (data fields follow in :func:`data_provenance`)."""
    caller = caller_of(session)
    return {"method": coreset.method, "params": coreset.params, "seed": coreset.seed,
            "reference_models": coreset.reference_models, "predictor": coreset.predictor,
            "embedding_model": coreset.embedding_model, "service_version": __version__,
            "created_by": caller.actor if caller is not None else "local",
            "team": caller.team if caller is not None else "local"}


def _items_digest(session: Session, benchmark: Benchmark) -> tuple[str, int]:
    """sha256 of a benchmark's items (id, content hash: prompt, target and fields) and their count."""
    digest, n = hashlib.sha256(), 0
    for item_id, content_hash in queries.item_lines(session, benchmark.id):
        digest.update(f"i\t{item_id}\t{content_hash or ''}\n".encode())
        n += 1
    return digest.hexdigest(), n


_HASHES_SIZE = 256
_HASHES: LRUCache[tuple[str, int, str], tuple[str, str]] = LRUCache(maxsize=_HASHES_SIZE)
_HASHES_LOCK = Lock()


def benchmark_data_hash(session: Session, benchmark: Benchmark, items_digest: str | None = None) -> str:
    """sha256 of a benchmark's items (id, content hash) and scores (model, item, metric, value), in a fixed order."""
    return benchmark_hashes(session, benchmark, items_digest)[0]


def benchmark_hashes(session: Session, benchmark: Benchmark, items_digest: str | None = None) -> tuple[str, str]:
    """(``data_hash``: items and scores, ``scores_hash``: the scores alone) of a benchmark, from one scan.

    Every score write bumps the benchmark's ``data_version`` and an item edit changes the items' digest,
    so both are cached per (benchmark, data_version, items digest): the full scan of the scores runs
    once per change, not on every read of a published coreset."""
    items = items_digest if items_digest is not None else _items_digest(session, benchmark)[0]
    key = (benchmark.id, int(benchmark.data_version or 0), items)
    with _HASHES_LOCK:
        if key in _HASHES:
            return _HASHES[key]  # a hit is the most recently used
    digest, scores = hashlib.sha256(), hashlib.sha256()
    for item_id, content_hash in queries.item_lines(session, benchmark.id):
        digest.update(f"i\t{item_id}\t{content_hash or ''}\n".encode())
    for model, item_id, metric, value in queries.score_lines(session, benchmark.id):
        line = f"s\t{model}\t{item_id}\t{metric}\t{float(value)!r}\n".encode()
        digest.update(line)
        scores.update(line)
    result = digest.hexdigest(), scores.hexdigest()
    with _HASHES_LOCK:
        _HASHES[key] = result  # the least recently used leaves beyond _HASHES_SIZE
    return result


def data_provenance(session: Session, coreset: Coreset) -> dict[str, Any]:
    """``data_versions``, ``data_hash`` (items and scores), ``items_hash`` (items alone) and ``n_items``, per
    benchmark id, of the data a selection read."""
    benchmarks = queries.benchmarks_in(session, coreset.benchmark_ids)
    items = {b.id: _items_digest(session, b) for b in benchmarks}
    hashes = {b.id: benchmark_hashes(session, b, items[b.id][0]) for b in benchmarks}
    return {"data_versions": {b.id: int(b.data_version or 0) for b in benchmarks},
            "data_hash": {b.id: hashes[b.id][0] for b in benchmarks},
            "items_hash": {b.id: items[b.id][0] for b in benchmarks},
            "scores_hash": {b.id: hashes[b.id][1] for b in benchmarks},
            "n_items": {b.id: items[b.id][1] for b in benchmarks}}


def staleness(session: Session, coreset: Coreset) -> tuple[bool, list[dict[str, Any]]]:
    """Whether the source data changed since the selection, with what changed, per benchmark.

    The test is the stored content hash of the items and scores (``provenance.data_hash``) against the
    benchmark's now: an item's text edited with no score change is a change, and scores re-uploaded
    with the same values are not. What changed is then named: ``items`` (their digest; ``n_items``
    when their number moved) and ``scores`` (their digest, with the ``data_version`` then and now;
    for a coreset made before ``scores_hash`` was recorded, a moved ``data_version``)."""
    provenance = coreset.provenance or {}
    hashes: dict[str, str] = provenance.get("data_hash") or {}
    versions: dict[str, int] = provenance.get("data_versions") or {}
    if not hashes and not versions:
        return False, []
    item_hashes: dict[str, str] = provenance.get("items_hash") or {}
    score_hashes: dict[str, str] = provenance.get("scores_hash") or {}
    counts: dict[str, int] = provenance.get("n_items") or {}
    ids = list(dict.fromkeys([*versions, *hashes]))
    readable = queries.benchmark_ids_in(session, ids)
    changes: list[dict[str, Any]] = []
    # the comparison reads the source benchmarks whoever looks (another team may read a public coreset
    # built on its owner's private benchmark): only digests and counts leave this block, and a benchmark
    # the caller cannot read is named by its id
    with unscoped(session):
        now = {b.id: b for b in queries.benchmarks_in(session, ids)}
        for benchmark_id in ids:
            benchmark = now.get(benchmark_id)
            if benchmark is None:
                changes.append({"benchmark": benchmark_id, "change": "deleted"})
                continue
            label = benchmark.name if benchmark_id in readable else benchmark_id
            items_now, n_now = _items_digest(session, benchmark)
            version_now = int(benchmark.data_version or 0)
            hash_now, scores_now = benchmark_hashes(session, benchmark, items_now)
            if benchmark_id in hashes:
                if hash_now == hashes[benchmark_id]:
                    continue
                changes.append({"benchmark": label, "change": "data_hash", "was": hashes[benchmark_id],
                                "now": hash_now})
            if benchmark_id in item_hashes and item_hashes[benchmark_id] != items_now:
                changes.append({"benchmark": label, "change": "items", "was": item_hashes[benchmark_id],
                                "now": items_now})
            if benchmark_id in counts and int(counts[benchmark_id]) != n_now:
                changes.append({"benchmark": label, "change": "n_items", "was": int(counts[benchmark_id]),
                                "now": n_now})
            if benchmark_id in score_hashes:
                if score_hashes[benchmark_id] != scores_now:
                    changes.append({"benchmark": label, "change": "scores", "was": score_hashes[benchmark_id],
                                    "now": scores_now, "data_version_was": int(versions.get(benchmark_id, 0)),
                                    "data_version_now": version_now})
            elif benchmark_id in versions and int(versions[benchmark_id]) != version_now:
                changes.append({"benchmark": label, "change": "scores", "data_version_was":
                                int(versions[benchmark_id]), "data_version_now": version_now})
    return bool(changes), changes


def publish(session: Session, coreset: Coreset, freeze: Callable[[Session, Coreset], dict[str, Any]]) -> Coreset:
    """Freeze a ready version (idempotent for a published one); ``freeze`` is its family's
    (``evalplan.coresets.registry.family_of(method).freeze``: the families import this module)."""
    require_own(session, coreset, f"coreset {coreset.id}")
    if coreset.published_at is not None:
        return coreset
    if coreset.status != "ready":
        raise Conflict(f"coreset {coreset.id} is {coreset.status}: only a ready coreset can be published",
                       [{"field": "status", "detail": coreset.status}])
    stale, changes = staleness(session, coreset)
    if stale:
        raise Conflict(f"coreset {coreset.id}'s source data changed since its selection: publishing it would "
                       "freeze a predictor on other data than its provenance records; create a new version",
                       [{"field": "provenance", **change} for change in changes])
    # what predict reads besides the items (reference scores, item counts): frozen with the version,
    # next to the fitted predictor and calibration the selection stored (evalplan.coresets.predict)
    frozen = freeze(session, coreset)
    state = queries.fitted_state(session, coreset.id)
    coreset.fitted_state = {**(state or {}), "frozen": frozen}
    caller = caller_of(session)
    coreset.published_at, coreset.published_by = utcnow(), caller.actor if caller else "local"
    if coreset.visibility != "public":  # publishing shares the version with every team (published_reads)
        record(session, "visibility", "coreset", coreset.id, was=coreset.visibility, now="public", via="publish")
        coreset.visibility = "public"
    record(session, "publish", "coreset", coreset.id, name=coreset.name, version=coreset.version)
    session.flush()
    return coreset


def frozen_state(session: Session, coreset: Coreset) -> dict[str, Any] | None:
    """The state a published version froze at publish (``fitted_state["frozen"]``); None for an
    unpublished one (its predict reads the data now) and for one published before snapshots existed."""
    if coreset.published_at is None:
        return None
    state = queries.fitted_state(session, coreset.id)
    frozen = (state or {}).get("frozen")
    return frozen if isinstance(frozen, dict) else None


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
    queries.delete_items(session, coreset.id)
    session.delete(coreset)
    session.flush()


def set_visibility(session: Session, coreset: Coreset, visibility: str) -> Coreset:
    require_own(session, coreset, f"coreset {coreset.id}")
    if coreset.published_at is not None and visibility != "public":
        raise Conflict(f"coreset {coreset.id} is published: a published version is shared with every team and "
                       "stays public (others may have pinned it); deprecate it instead",
                       [{"field": "visibility", "detail": "published versions are public"}])
    if visibility != coreset.visibility:
        record(session, "visibility", "coreset", coreset.id, was=coreset.visibility, now=visibility)
        coreset.visibility = visibility
    session.flush()
    return coreset


def item_keys(session: Session, coreset: Coreset) -> list[tuple[str, str]]:
    """(benchmark name, item id) of the coreset's items, in rank order."""
    with published_reads(session, coreset):
        return queries.ranked_item_keys(session, coreset.id)


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
