"""Embedding storage: item texts of a benchmark, the ``(text hash, model)`` cache, bulk loads.

Writes are ``INSERT .. ON CONFLICT DO NOTHING`` on the cache key, so two jobs may race on the same
texts; :func:`load_embeddings` reads what :func:`evalplan.embeddings.service.ensure_embeddings` stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import insert, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from evalplan.benchmarks.service import get_benchmark
from evalplan.core.embedding.embedding_text import item_text, text_hash
from evalplan.db.models import Benchmark, Embedding, Item
from evalplan.kit.errors import InvalidInput

QUERY_CHUNK = 500  # hashes per IN (...) lookup
VECTOR_DTYPE = np.dtype("<f4")


@dataclass
class BenchmarkTexts:
    """The texts of one benchmark's items that have text, in item-pk order."""

    benchmark_id: str
    name: str
    item_pks: list[int] = field(default_factory=list)
    item_ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)
    n_without_text: int = 0


def resolve_benchmarks(session: Session, refs: Sequence[str]) -> list[Benchmark]:
    """Benchmarks by id or name, in the given order, each once."""
    seen: dict[str, Benchmark] = {}
    for ref in refs:
        benchmark = get_benchmark(session, ref)
        seen.setdefault(benchmark.id, benchmark)
    return list(seen.values())


def benchmark_texts(session: Session, benchmark: Benchmark) -> BenchmarkTexts:
    """Build (and hash) the embedding text of every item of ``benchmark`` that has a prompt."""
    out = BenchmarkTexts(benchmark.id, benchmark.name)
    fields_config = list(benchmark.embedding_fields or [])
    rows = session.execute(
        select(Item.pk, Item.item_id, Item.prompt, Item.target, Item.fields)
        .where(Item.benchmark_id == benchmark.id).order_by(Item.pk)
    )
    for pk, item_id, prompt, target, fields in rows:
        if prompt is None:  # a score-only item
            out.n_without_text += 1
            continue
        text = item_text(prompt, target, fields, fields_config)
        out.item_pks.append(pk)
        out.item_ids.append(item_id)
        out.texts.append(text)
        out.hashes.append(text_hash(text))
    return out


def no_text_error(name: str, n_without_text: int) -> InvalidInput:
    return InvalidInput(
        f"benchmark {name!r} has no item text to embed ({n_without_text} score-only items); "
        "upload items with a prompt first",
        [{"benchmark": name, "detail": "no item has a prompt"}])


def cached_embeddings(session: Session, hashes: Sequence[str], model: str) -> dict[str, tuple[int, bool, int | None]]:
    """``{text_hash: (dim, truncated, n_tokens)}`` of the hashes already embedded with ``model``."""
    found: dict[str, tuple[int, bool, int | None]] = {}
    unique = list(dict.fromkeys(hashes))
    for start in range(0, len(unique), QUERY_CHUNK):
        rows = session.execute(
            select(Embedding.text_hash, Embedding.dim, Embedding.truncated, Embedding.n_tokens)
            .where(Embedding.model == model, Embedding.text_hash.in_(unique[start:start + QUERY_CHUNK]))
        )
        found.update((h, (int(d), bool(t), n)) for h, d, t, n in rows)
    return found


def insert_ignoring_conflicts(session: Session, rows: list[dict[str, Any]]) -> None:
    """Bulk insert; a row whose (text_hash, model) exists already (another job won) is skipped."""
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    if dialect in ("postgresql", "sqlite"):
        dialect_insert = postgresql_insert if dialect == "postgresql" else sqlite_insert
        stmt = dialect_insert(Embedding).on_conflict_do_nothing(index_elements=["text_hash", "model"])
        session.execute(stmt, rows)
        return
    present = set(cached_embeddings(session, [r["text_hash"] for r in rows], rows[0]["model"]))
    fresh = [r for r in rows if r["text_hash"] not in present]
    if fresh:
        session.execute(insert(Embedding), fresh)


class EmbeddingMatrix(NamedTuple):
    """Embeddings of every item with text: row ``r`` is item ``item_pks[r]`` of benchmark
    ``benchmark_index[r]`` (an index into the requested benchmarks)."""

    item_pks: np.ndarray  # int64, (n,)
    benchmark_index: np.ndarray  # int32, (n,)
    vectors: np.ndarray  # float32, (n, dim), L2-normalized


def load_embeddings(session: Session, benchmark_ids: Sequence[str], model_name: str) -> EmbeddingMatrix:
    """The cached embeddings of all items with text, benchmark by benchmark (in the given order),
    items by pk. Raises ``InvalidInput`` naming the benchmark when it has no item text or when
    some of its texts are not embedded with ``model_name`` yet (run :func:`ensure_embeddings`)."""
    per_benchmark = [benchmark_texts(session, b) for b in resolve_benchmarks(session, benchmark_ids)]
    vectors: dict[str, np.ndarray] = {}
    for bt in per_benchmark:
        if not bt.texts:
            raise no_text_error(bt.name, bt.n_without_text)
        unique = [h for h in dict.fromkeys(bt.hashes) if h not in vectors]
        for start in range(0, len(unique), QUERY_CHUNK):
            rows = session.execute(
                select(Embedding.text_hash, Embedding.dim, Embedding.vector)
                .where(Embedding.model == model_name, Embedding.text_hash.in_(unique[start:start + QUERY_CHUNK]))
            )
            for h, dim, blob in rows:
                vectors[h] = np.frombuffer(blob, dtype=VECTOR_DTYPE, count=dim)
        n_missing = sum(1 for h in bt.hashes if h not in vectors)
        if n_missing:
            raise InvalidInput(
                f"benchmark {bt.name!r}: {n_missing} of {len(bt.hashes)} item texts have no embedding "
                f"with model {model_name!r}; run POST /v1/embeddings first",
                [{"benchmark": bt.name, "detail": f"{n_missing} items not embedded with {model_name!r}"}])
    dims = {v.shape[0] for v in vectors.values()}
    if len(dims) > 1:
        raise InvalidInput(f"embeddings of model {model_name!r} have mixed dimensions {sorted(dims)}",
                           [{"field": "model", "detail": "mixed embedding dimensions"}])
    item_pks = np.array([pk for bt in per_benchmark for pk in bt.item_pks], dtype=np.int64)
    index = np.concatenate([np.full(len(bt.item_pks), b, dtype=np.int32) for b, bt in enumerate(per_benchmark)])
    matrix = np.stack([vectors[h] for bt in per_benchmark for h in bt.hashes]).astype(np.float32, copy=False)
    return EmbeddingMatrix(item_pks, index, matrix)
