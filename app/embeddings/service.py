"""Item-text embeddings: compute the missing ones (the ``embed`` job, ``gpu`` queue) and load them.

Embeddings are cached in the ``embeddings`` table by ``(sha256 of the item text, model name)``
(``app.core.embedding_text``): re-embedding unchanged text computes nothing, identical texts are
embedded once, and a rename or re-upload never re-embeds. Writes are ``INSERT .. ON CONFLICT DO
NOTHING`` on that key, committed chunk by chunk, so two jobs may race on the same texts and a
cancelled or crashed job keeps what it finished.

Coreset jobs that need embeddings call :func:`ensure_embeddings` first, inside their own job, then
:func:`load_embeddings`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session, sessionmaker

from app.core.embedding_text import item_text, text_hash
from app.db.models import Benchmark, Embedding, Item, Job
from app.kit.errors import InvalidInput
from app.kit.jobs import JobContext, create_job, register
from app.benchmarks.service import get_benchmark

KIND = "embed"
BATCH_SIZE = 64
STORE_CHUNK = 1024  # texts encoded, then committed, at a time (a cancelled job keeps finished chunks)
QUERY_CHUNK = 500  # hashes per IN (...) lookup
MAX_REPORTED_TRUNCATED = 20
VECTOR_DTYPE = np.dtype("<f4")

FractionProgress = Callable[[float], None]


# ----------------------------------------------------------------------------- item texts

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


def _resolve_benchmarks(session: Session, refs: Sequence[str]) -> list[Benchmark]:
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


def _no_text_error(name: str, n_without_text: int) -> InvalidInput:
    return InvalidInput(
        f"benchmark {name!r} has no item text to embed ({n_without_text} score-only items); "
        "upload items with a prompt first",
        [{"benchmark": name, "detail": "no item has a prompt"}])


def _cached(session: Session, hashes: Sequence[str], model: str) -> dict[str, tuple[int, bool, int | None]]:
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


def _insert_ignoring_conflicts(session: Session, rows: list[dict[str, Any]]) -> None:
    """Bulk insert; a row whose (text_hash, model) exists already (another job won) is skipped."""
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    if dialect in ("postgresql", "sqlite"):
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        else:
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        stmt = dialect_insert(Embedding).on_conflict_do_nothing(index_elements=["text_hash", "model"])
        session.execute(stmt, rows)
        return
    present = set(_cached(session, [r["text_hash"] for r in rows], rows[0]["model"]))
    fresh = [r for r in rows if r["text_hash"] not in present]
    if fresh:
        session.execute(insert(Embedding), fresh)


# ----------------------------------------------------------------------------- compute missing

def ensure_embeddings(
    session_factory: sessionmaker[Session],
    benchmark_ids: Sequence[str],
    model_name: str,
    progress: FractionProgress | None = None,
    *,
    batch_size: int = BATCH_SIZE,
    device: str | None = None,
) -> dict[str, Any]:
    """Embed, with ``model_name``, every item text of the benchmarks that is not cached yet.

    Returns a summary: ``model``, ``dim``, ``device`` (null when nothing needed the model),
    ``benchmarks`` (names), ``n_items`` (all items), ``n_without_text`` (score-only items,
    skipped), ``n_texts`` (items with text), ``n_unique_texts``, ``n_cached`` (items whose
    embedding existed already), ``n_embedded`` (distinct texts computed now), ``n_truncated``
    (items whose text is longer than the model's ``max_seq_length`` tokens and so was cut),
    ``truncated_items`` (the first few, ``{benchmark, item, n_tokens}``), ``max_seq_length``
    (null when the model was not loaded in this process), ``seconds``.

    ``progress(fraction)`` is called as batches finish (it may raise to cancel; finished chunks
    stay stored). Raises ``InvalidInput`` for a benchmark without any item text or a model
    that cannot be loaded; ``NotFound`` for an unknown benchmark.
    """
    from app.core.embedder import EmbedderLoadError, load_embedder, loaded_embedder

    started = time.perf_counter()
    with session_factory() as session:
        per_benchmark = [benchmark_texts(session, b) for b in _resolve_benchmarks(session, benchmark_ids)]
        for bt in per_benchmark:
            if not bt.texts:
                raise _no_text_error(bt.name, bt.n_without_text)
        all_hashes = [h for bt in per_benchmark for h in bt.hashes]
        cached = _cached(session, all_hashes, model_name)

    text_of: dict[str, str] = {}
    for bt in per_benchmark:
        for h, text in zip(bt.hashes, bt.texts):
            text_of.setdefault(h, text)
    missing = [h for h in text_of if h not in cached]
    n_cached = sum(1 for h in all_hashes if h in cached)

    def report(fraction: float) -> None:
        if progress is not None:
            progress(fraction)

    report(0.02)
    embedder = None
    computed: dict[str, tuple[int, bool, int | None]] = {}  # hash -> (dim, truncated, n_tokens)
    if missing:
        try:
            embedder = load_embedder(model_name, device)
        except EmbedderLoadError as exc:
            raise InvalidInput(str(exc), [{"field": "model", "detail": str(exc)}]) from None
        texts = [text_of[h] for h in missing]
        counts = embedder.token_counts(texts)
        cut = embedder.truncated(counts)
        order = np.argsort(-np.minimum(counts, embedder.max_seq_length or counts.max()), kind="stable")
        total, done_before, last = len(missing), 0, [0.02]

        def on_batch(done: int, _chunk_total: int) -> None:
            fraction = 0.02 + 0.96 * (done_before + done) / total
            if fraction - last[0] >= 0.01 or done_before + done == total:
                last[0] = fraction
                report(fraction)

        for start in range(0, total, STORE_CHUNK):
            idx = order[start:start + STORE_CHUNK]
            vectors = embedder.encode([texts[i] for i in idx], batch_size=batch_size, progress=on_batch,
                                      lengths=counts[idx])
            rows = [{"text_hash": missing[i], "model": model_name, "dim": embedder.dim,
                     "vector": np.asarray(vectors[j], dtype=VECTOR_DTYPE).tobytes(),
                     "n_tokens": int(counts[i]), "truncated": bool(cut[i])}
                    for j, i in enumerate(idx)]
            with session_factory() as session:
                _insert_ignoring_conflicts(session, rows)
                session.commit()
            done_before += len(idx)
            for i in idx:
                computed[missing[i]] = (embedder.dim, bool(cut[i]), int(counts[i]))

    truncated_items: list[dict[str, Any]] = []
    n_truncated = 0
    for bt in per_benchmark:
        for item_id, h in zip(bt.item_ids, bt.hashes):
            _, is_cut, n_tokens = computed[h] if h in computed else cached[h]
            if is_cut:
                n_truncated += 1
                if len(truncated_items) < MAX_REPORTED_TRUNCATED:
                    truncated_items.append({"benchmark": bt.name, "item": item_id, "n_tokens": n_tokens})
    known = embedder or loaded_embedder(model_name, device)
    dims = {d for d, _, _ in cached.values()} | {d for d, _, _ in computed.values()}
    dim = known.dim if known is not None else (dims.pop() if len(dims) == 1 else None)
    n_texts = len(all_hashes)
    return {
        "model": model_name,
        "dim": dim,
        "device": embedder.device if embedder is not None else None,
        "benchmarks": [bt.name for bt in per_benchmark],
        "n_items": n_texts + sum(bt.n_without_text for bt in per_benchmark),
        "n_without_text": sum(bt.n_without_text for bt in per_benchmark),
        "n_texts": n_texts,
        "n_unique_texts": len(text_of),
        "n_cached": n_cached,
        "n_embedded": len(computed),
        "n_truncated": n_truncated,
        "truncated_items": truncated_items,
        "max_seq_length": known.max_seq_length if known is not None else None,
        "seconds": round(time.perf_counter() - started, 4),
    }


# ----------------------------------------------------------------------------- load

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
    per_benchmark = [benchmark_texts(session, b) for b in _resolve_benchmarks(session, benchmark_ids)]
    vectors: dict[str, np.ndarray] = {}
    for bt in per_benchmark:
        if not bt.texts:
            raise _no_text_error(bt.name, bt.n_without_text)
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


# ----------------------------------------------------------------------------- job

def start_embedding_job(session: Session, benchmark_refs: Sequence[str], model_name: str) -> Job:
    """Validate the request (benchmarks exist and have text) and add a queued ``embed`` job."""
    benchmarks = _resolve_benchmarks(session, benchmark_refs)
    with_text = dict(session.execute(
        select(Item.benchmark_id, func.count()).where(Item.benchmark_id.in_([b.id for b in benchmarks]),
                                                      Item.prompt.is_not(None))
        .group_by(Item.benchmark_id)
    ).all())
    for benchmark in benchmarks:
        if not with_text.get(benchmark.id):
            n_items = session.scalar(select(func.count()).select_from(Item).where(Item.benchmark_id == benchmark.id))
            raise _no_text_error(benchmark.name, int(n_items or 0))
    return create_job(session, KIND, {"benchmark_ids": [b.id for b in benchmarks], "model": model_name},
                      benchmark_id=benchmarks[0].id if len(benchmarks) == 1 else None)


@register(KIND, queue="gpu")
def run_embed(ctx: JobContext) -> dict[str, Any]:
    """Embed the missing item texts of ``payload.benchmark_ids`` with ``payload.model``."""
    from app.kit.settings import get_settings

    model_name = ctx.payload.get("model") or get_settings().embedding_model
    return ensure_embeddings(ctx.session_factory, ctx.payload["benchmark_ids"], model_name, progress=ctx.progress)
