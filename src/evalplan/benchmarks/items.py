"""Benchmark items: upload (JSONL or JSON list), bulk get-or-create by id, listing."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from evalplan.db.models import Benchmark, Item
from evalplan.kit import input_guard
from evalplan.kit.errors import ErrorCollector, InvalidInput
from evalplan.kit.pagination import Page, keyset_page
from evalplan.kit.validation import load_json


@dataclass
class ItemRecord:
    item_id: str
    prompt: str
    target: str | None
    fields: dict[str, Any] | None
    source_index: int | None = None

    @property
    def content_hash(self) -> str:
        return item_content_hash(self.prompt, self.target, self.fields)


def item_content_hash(prompt: str | None, target: str | None, fields: dict[str, Any] | None) -> str:
    canonical = json.dumps([prompt, target, fields], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def parse_item_records(data: bytes, ndjson: bool) -> list[ItemRecord]:
    """Parse the ``shared/data/*/items.jsonl`` layout (or a JSON list of the same objects).

    Rows are 1-based line numbers for JSONL and 0-based indices for a JSON list.
    """
    errors = ErrorCollector()
    raw: list[tuple[int, Any]] = []
    if ndjson:
        for line_no, line in enumerate(data.split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                raw.append((line_no, input_guard.loads(line, where=f"line {line_no}")))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                errors.add(f"invalid JSON: {exc}", row=line_no, column=None)
            except input_guard.InputRejected as exc:
                errors.add(exc.errors[0]["detail"], row=line_no, column=exc.errors[0]["field"])
    else:
        parsed = load_json(data)
        if isinstance(parsed, dict) and isinstance(parsed.get("items"), list):
            parsed = parsed["items"]
        if not isinstance(parsed, list):
            raise InvalidInput("expected a JSON list of items", [{"row": None, "column": None, "detail": "not a list"}])
        raw = list(enumerate(parsed))
    records: list[ItemRecord] = []
    seen: dict[str, int] = {}
    for row, obj in raw:
        if not isinstance(obj, dict):
            errors.add("expected an object {id, prompt, target?, fields?}", row=row, column=None)
            continue
        item_id = obj.get("id")
        if isinstance(item_id, int) and not isinstance(item_id, bool):
            item_id = str(item_id)
        if not isinstance(item_id, str) or not item_id.strip() or len(item_id) > 200:
            errors.add("'id' must be a non-empty string of at most 200 characters", row=row, column="id")
            continue
        prompt = obj.get("prompt")
        if not isinstance(prompt, str):
            errors.add("'prompt' must be a string", row=row, column="prompt")
            continue
        target = obj.get("target")
        if target is not None and not isinstance(target, str):
            if isinstance(target, (int, float, list, dict)) and not isinstance(target, bool):
                target = (json.dumps(target, separators=(",", ":"), ensure_ascii=False)
                          if isinstance(target, (list, dict)) else str(target))
            else:
                errors.add("'target' must be a string", row=row, column="target")
                continue
        fields = obj.get("fields")
        if fields is not None and not isinstance(fields, dict):
            errors.add("'fields' must be an object", row=row, column="fields")
            continue
        nul = next((k for k, v in (("id", item_id), ("prompt", prompt), ("target", target))
                    if isinstance(v, str) and "\x00" in v), None)
        if nul is not None:  # PostgreSQL text cannot hold NUL; reject on every backend alike
            errors.add(f"'{nul}' must not contain NUL characters", row=row, column=nul)
            continue
        unknown = set(obj) - {"id", "prompt", "target", "fields"}
        if unknown:
            errors.add(f"unknown keys {sorted(unknown)}; put extra data under 'fields'", row=row,
                       column=sorted(unknown)[0])
            continue
        item_id = item_id.strip()
        if item_id in seen:
            errors.add(f"item {item_id!r} appears twice in this upload (first at row {seen[item_id]})", row=row,
                       column="id")
            continue
        seen[item_id] = row
        records.append(ItemRecord(item_id, prompt, target, fields))
    errors.raise_if_any("invalid items")
    if not records:
        raise InvalidInput("no items in the body", [{"row": None, "column": None, "detail": "empty upload"}])
    return records


def next_position(session: Session, benchmark_id: str) -> int:
    """The dense position the benchmark's next new item gets (its cell's index in every packed score row).
    Callers hold the benchmark's row lock (``get_benchmark(for_update=True)``), so two writers never take one
    position; the unique index on (benchmark_id, position) would refuse it anyway."""
    last = session.scalar(select(func.max(Item.position)).where(Item.benchmark_id == benchmark_id))
    return 0 if last is None else int(last) + 1


def upsert_items(session: Session, benchmark: Benchmark, records: list[ItemRecord]) -> dict[str, int]:
    """Create new items, update changed ones; returns ``{created, updated, unchanged}``."""
    existing = {
        item.item_id: item
        for item in session.scalars(
            select(Item).where(Item.benchmark_id == benchmark.id, Item.item_id.in_([r.item_id for r in records]))
        )
    } if len(records) <= 5000 else {
        item.item_id: item for item in session.scalars(select(Item).where(Item.benchmark_id == benchmark.id))
    }
    created, updated, unchanged = [], 0, 0
    for record in records:
        digest = record.content_hash
        item = existing.get(record.item_id)
        if item is None:
            created.append({
                "benchmark_id": benchmark.id, "item_id": record.item_id, "prompt": record.prompt,
                "target": record.target, "fields": record.fields, "content_hash": digest,
                "source_index": record.source_index,
            })
        elif item.content_hash != digest or (record.source_index is not None
                                             and item.source_index != record.source_index):
            item.prompt, item.target, item.fields = record.prompt, record.target, record.fields
            item.content_hash = digest
            if record.source_index is not None:
                item.source_index = record.source_index
            updated += 1
        else:
            unchanged += 1
    if created:
        start = next_position(session, benchmark.id)
        for k, row in enumerate(created):
            row["position"] = start + k
        session.execute(insert(Item), created)
    session.flush()
    return {"created": len(created), "updated": updated, "unchanged": unchanged}


def ensure_items(session: Session, benchmark: Benchmark, item_ids: list[str],
                 created_pks: set[int] | None = None) -> dict[str, int]:
    """Map item ids to row keys, creating score-only items (no text) in the given order; the keys of the items
    this call created are added to ``created_pks`` when given."""
    existing = dict(
        session.execute(select(Item.item_id, Item.pk).where(Item.benchmark_id == benchmark.id)).all()
    )
    missing = [i for i in dict.fromkeys(item_ids) if i not in existing]
    if missing:
        start = next_position(session, benchmark.id)
        session.execute(insert(Item), [{"benchmark_id": benchmark.id, "item_id": i, "position": start + k}
                                       for k, i in enumerate(missing)])
        existing = dict(
            session.execute(select(Item.item_id, Item.pk).where(Item.benchmark_id == benchmark.id)).all()
        )
        if created_pks is not None:
            created_pks.update(existing[i] for i in missing)
    return existing


def list_items(session: Session, benchmark: Benchmark, *, limit: int, cursor: str | None) -> Page[Item]:
    stmt = select(Item).where(Item.benchmark_id == benchmark.id)
    return keyset_page(session, stmt, Item.pk, limit=limit, cursor=cursor, what="item")


def item_samples(session: Session, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The stored text of items, by (benchmark id, item id): ``{prompt, target, fields}`` for the items
    that have any (uploaded JSONL items, or imported from lm-eval, inspect, HELM or lighteval logs)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    by_benchmark: dict[str, set[str]] = {}
    for benchmark_id, item_id in pairs:
        by_benchmark.setdefault(benchmark_id, set()).add(item_id)
    for benchmark_id, ids in by_benchmark.items():
        rows = session.execute(select(Item.item_id, Item.prompt, Item.target, Item.fields)
                               .where(Item.benchmark_id == benchmark_id, Item.item_id.in_(sorted(ids)))).all()
        for item_id, prompt, target, fields in rows:
            if prompt or target or fields:
                found[(benchmark_id, item_id)] = {"prompt": prompt, "target": target, "fields": fields or None}
    return found
