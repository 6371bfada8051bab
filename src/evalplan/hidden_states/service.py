"""Hidden states of models on benchmark items (RepCore, papers/003 §2.2): upload, list, delete, load.

Storage: chunked in the database (``hidden_states`` + ``hidden_state_chunks``, docs/DECISIONS.md).
An upload is parsed from the request's spooled file with ``numpy.lib.format`` and streamed chunk by
chunk (about ``hidden_state_chunk_bytes`` each) into the request's transaction, so a 100 MB matrix
is never held whole in the API process. Every check (header, item ids, finiteness of every chunk)
runs before the commit: any problem raises ``InvalidInput`` and the caller rolls everything back.
"""

from __future__ import annotations

import zipfile
from typing import IO, Any

import numpy as np
from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from evalplan.benchmarks.repository import pks_of_item_ids
from evalplan.benchmarks.service import get_benchmark
from evalplan.db.ids import looks_like_id
from evalplan.db.models import Benchmark, HiddenState, HiddenStateChunk, Model
from evalplan.hidden_states.npy_format import (
    DTYPES,
    MAX_NAMED,
    NPY_MAGIC,
    ZIP_MAGIC,
    bad_file,
    npz_ids,
    parse_items_field,
    read_header,
    stream_rows,
)
from evalplan.hidden_states.repository import hidden_state_listing
from evalplan.kit.errors import InvalidInput, NotFound
from evalplan.models.repository import model_named, model_one
from evalplan.models.service import ensure_models, get_model


def _resolve_items(session: Session, benchmark: Benchmark, ids: list[str]) -> np.ndarray:
    """Item ids -> items.pk (int64, row order); unknown or repeated ids are a 422."""
    seen: set[str] = set()
    repeated = [i for i in ids if i in seen or seen.add(i)]  # type: ignore[func-returns-value]
    if repeated:
        raise InvalidInput(f"item id {repeated[0]!r} appears more than once ({len(repeated)} repeats)",
                           [{"field": "items", "item": i, "detail": "repeated"} for i in repeated[:MAX_NAMED]])
    found: dict[str, int] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        found.update(pks_of_item_ids(session, benchmark.id, chunk))
    unknown = [i for i in ids if i not in found]
    if unknown:
        shown = ", ".join(repr(u) for u in unknown[:MAX_NAMED])
        raise InvalidInput(
            f"{len(unknown)} item id(s) are not items of benchmark {benchmark.name!r}: {shown}"
            + (" ..." if len(unknown) > MAX_NAMED else "") + " (upload items first)",
            [{"field": "items", "item": u, "detail": "unknown item"} for u in unknown[:MAX_NAMED]])
    return np.array([found[i] for i in ids], dtype="<i8")


def _model_for_upload(session: Session, ref: str) -> Model:
    model = model_named(session, ref)  # the caller's own name first (evalplan.auth.naming)
    if model is not None:
        return model
    if looks_like_id(ref):
        return get_model(session, ref)  # 404: an id that names no model
    return model_one(session, ensure_models(session, [ref])[ref])


def store_hidden_states(session: Session, benchmark_ref: str, model_ref: str, fp: IO[bytes],
                        items: str | None, *, chunk_bytes: int) -> dict[str, Any]:
    """Validate and stream one upload into the session's transaction (the caller commits)."""
    benchmark = get_benchmark(session, benchmark_ref, for_update=True)
    fp.seek(0)
    magic = fp.read(6)
    fp.seek(0)
    zf: zipfile.ZipFile | None = None
    if magic == NPY_MAGIC:
        stream, what = fp, "the .npy file"
        n, d, dtype = read_header(stream, what)
        ids = parse_items_field(items, n)
    elif magic[:4] == ZIP_MAGIC:
        if items is not None:
            raise bad_file("`items` is for .npy uploads; an .npz carries its own `ids` array", field="items")
        try:
            zf = zipfile.ZipFile(fp)
            names = set(zf.namelist())
        except (zipfile.BadZipFile, OSError) as exc:
            raise bad_file(f"malformed .npz file: {exc}") from None
        missing = [m for m in ("ids.npy", "states.npy") if m not in names]
        if missing:
            raise bad_file(f"the .npz must hold arrays `ids` and `states`; missing: "
                       f"{', '.join(m[:-4] for m in missing)}")
        ids = npz_ids(zf)
        stream, what = zf.open("states.npy"), "`states` in the .npz"
        n, d, dtype = read_header(stream, what)
        if len(ids) != n:
            raise bad_file(f"`states` has {n} rows but `ids` has {len(ids)} item ids; they must match one to one",
                       rows=n, items=len(ids))
    else:
        raise bad_file("malformed file: expected a .npy array (N x d) or an .npz with arrays `ids` and `states`")
    try:
        pks = _resolve_items(session, benchmark, ids)
        model = _model_for_upload(session, model_ref)
        old = session.scalars(select(HiddenState.id).where(
            HiddenState.benchmark_id == benchmark.id, HiddenState.model_id == model.id)).first()
        if old is not None:  # re-upload replaces
            session.execute(delete(HiddenStateChunk).where(HiddenStateChunk.hidden_state_id == old))
            session.execute(delete(HiddenState).where(HiddenState.id == old))
        state = HiddenState(benchmark_id=benchmark.id, model_id=model.id, n_items=n, dim=d,
                            dtype=DTYPES[dtype.newbyteorder("<")], item_pks=pks.tobytes())
        session.add(state)
        session.flush()

        def sink(seq: int, start: int, rows: int, data: bytes) -> None:
            session.execute(insert(HiddenStateChunk), [{"hidden_state_id": state.id, "seq": seq, "row_start": start,
                                                        "n_rows": rows, "data": data}])

        stream_rows(stream, n, d, dtype, chunk_bytes, sink)
    except (zipfile.BadZipFile, EOFError, OSError) as exc:  # a broken compressed member, read mid-stream
        raise bad_file(f"malformed .npz file: {exc}") from None
    finally:
        if zf is not None:
            zf.close()
    return {"benchmark": benchmark.name, "model": model.name, "id": state.id, "n_items": n, "dim": d,
            "dtype": state.dtype}


def list_hidden_states(session: Session, benchmark_ref: str) -> list[dict[str, Any]]:
    benchmark = get_benchmark(session, benchmark_ref)
    rows = hidden_state_listing(session, benchmark.id)
    return [{"id": hs.id, "benchmark": benchmark.name, "model": name, "n_items": hs.n_items, "dim": hs.dim,
             "dtype": hs.dtype, "bytes": int(size),
             "created_at": hs.created_at} for hs, name, size in rows]


def delete_hidden_states(session: Session, benchmark_ref: str, model_ref: str) -> None:
    benchmark = get_benchmark(session, benchmark_ref, for_update=True)
    model = get_model(session, model_ref)
    state_id = session.scalars(select(HiddenState.id).where(
        HiddenState.benchmark_id == benchmark.id, HiddenState.model_id == model.id)).first()
    if state_id is None:
        raise NotFound(f"model {model.name!r} has no hidden states on benchmark {benchmark.name!r}",
                       [{"parameter": "model", "detail": "no hidden states stored"}])
    session.execute(delete(HiddenStateChunk).where(HiddenStateChunk.hidden_state_id == state_id))
    session.execute(delete(HiddenState).where(HiddenState.id == state_id))
