"""Model responses: what a model answered on an item, as a harness import logged it (issue 26 item 3).

One ``model_responses`` row per (item, model) (docs/DECISIONS.md "Model responses"). The imports write them in
the transaction that writes the scores (:func:`replace_responses`); the API lists an item's responses
(:func:`list_item_responses`) and the pages read them for the items they show (:func:`responses_for`). Rows are
reached through their item's benchmark and joined to their model, so team scoping applies: a caller sees the
responses of the models it may read, on the benchmarks it may read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from evalplan.benchmarks.repository import item_response_page, item_responses, team_of_benchmark
from evalplan.db.models import Benchmark, Item, ModelResponse, utcnow
from evalplan.integrations.harness_records import ParsedResponse
from evalplan.kit.db import analyze_after_commit
from evalplan.kit.errors import NotFound
from evalplan.kit.pagination import Page
from evalplan.kit.upsert import dialect_insert

CHUNK = 500
"""Rows per statement (bound parameters stay under SQLite's limit)."""

def _chunks(values: list[Any], size: int = CHUNK) -> Iterable[list[Any]]:
    for start in range(0, len(values), size):
        yield values[start:start + size]


def replace_responses(session: Session, benchmark: Benchmark, model_id: str, item_pks: dict[str, int],
                      imported: Iterable[str], responses: dict[str, ParsedResponse], source: str) -> int:
    """Make ``responses`` (item id -> response) the model's responses on the ``imported`` items of ``benchmark``
    (``item_pks``: item id -> ``items.pk``): an imported item with a response gets it (replacing the stored one,
    ``created_at`` kept), one without loses any stored response (it belonged to the scores this import
    replaced). In the caller's transaction; returns how many responses were written."""
    with_response = [i for i in dict.fromkeys(imported) if i in responses and i in item_pks]
    without = [item_pks[i] for i in dict.fromkeys(imported) if i not in responses and i in item_pks]
    for chunk in _chunks(without):
        session.execute(delete(ModelResponse).where(ModelResponse.model_id == model_id,
                                                    ModelResponse.item_pk.in_(chunk)))
    if not with_response:
        return 0
    table = ModelResponse.__table__
    factory = dialect_insert(session)
    now = utcnow()
    for chunk in _chunks(with_response):
        rows = [{"item_pk": item_pks[i], "model_id": model_id, "benchmark_id": benchmark.id,
                 "response": responses[i].text, "truncated": responses[i].truncated, "n_chars": responses[i].n_chars,
                 "source": source, "extra": responses[i].extra, "created_at": now, "updated_at": now}
                for i in chunk]
        stmt = factory(table)
        stmt = stmt.on_conflict_do_update(
            index_elements=["item_pk", "model_id"],
            set_={c: stmt.excluded[c] for c in ("response", "truncated", "n_chars", "source", "extra", "updated_at")})
        session.execute(stmt, rows)
    analyze_after_commit(session, len(with_response), "model_responses")
    return len(with_response)


def get_item(session: Session, benchmark: Benchmark, item_id: str) -> Item:
    """The item ``item_id`` of ``benchmark``; 404 otherwise."""
    item = session.scalar(select(Item).where(Item.benchmark_id == benchmark.id, Item.item_id == item_id))
    if item is None:
        raise NotFound(f"item {item_id!r} is not in benchmark {benchmark.name!r}",
                       [{"parameter": "item_id", "detail": "no such item"}])
    return item


def list_item_responses(session: Session, benchmark: Benchmark, item_id: str, *, model_id: str | None = None,
                        limit: int, cursor: str | None) -> Page[Any]:
    """The stored responses on one item, one row per model the caller may read (ordered by model id), as rows
    of :data:`COLUMNS`; only ``model_id``'s with ``model_id``. 404 for an unknown item."""
    item = get_item(session, benchmark, item_id)
    return item_response_page(session, item.pk, model_id=model_id, limit=limit, cursor=cursor)


def response_dict(row: Any) -> dict[str, Any]:
    """A listing row as the API and the pages show it."""
    return {"model": row.model, "model_id": row.model_id, "response": row.response, "truncated": row.truncated,
            "n_chars": row.n_chars, "source": row.source, "extra": row.extra, "created_at": row.created_at,
            "updated_at": row.updated_at}


def responses_for(session: Session, benchmark_id: str, item_ids: Iterable[str], *,
                  models: Iterable[str] | None = None, limit_per_item: int = 50) -> dict[str, list[dict[str, Any]]]:
    """The stored responses on some items of a benchmark, by item id: a list of :func:`response_dict` (with
    ``item``) per item, in model-name order, at most ``limit_per_item`` each. ``models``: only models of these
    names (a session's targets); for a name shared by several readable models, the benchmark's team's model."""
    ids = sorted(set(item_ids))
    names = sorted(set(models)) if models is not None else None
    if not ids or names == []:
        return {}
    found: dict[str, list[dict[str, Any]]] = {}
    first_team = team_of_benchmark(session, benchmark_id)
    for chunk in _chunks(ids):
        # the benchmark's own team's model first, so it wins a name shared with another team's public model
        for row in item_responses(session, benchmark_id, chunk, names, first_team):
            rows = found.setdefault(row.item_id, [])
            if len(rows) < limit_per_item and not any(r["model"] == row.model for r in rows):
                rows.append({**response_dict(row), "item": row.item_id})
    return found

