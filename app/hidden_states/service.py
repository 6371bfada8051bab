"""Hidden states of models on benchmark items (RepCore, papers/003 §2.2): upload, list, delete, load.

Storage: chunked in the database (``hidden_states`` + ``hidden_state_chunks``, docs/DECISIONS.md).
An upload is parsed from the request's spooled file with ``numpy.lib.format`` and streamed chunk by
chunk (about ``hidden_state_chunk_bytes`` each) into the request's transaction, so a 100 MB matrix
is never held whole in the API process. Every check (header, item ids, finiteness of every chunk)
runs before the commit: any problem raises ``InvalidInput`` and the caller rolls everything back.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from typing import IO, Any

import numpy as np
from numpy.lib import format as npformat
from sqlalchemy import delete, func, insert, or_, select
from sqlalchemy.orm import Session

from app.kit.ids import looks_like_id
from app.db.models import Benchmark, HiddenState, HiddenStateChunk, Item, Model
from app.kit.errors import InvalidInput, NotFound
from app.benchmarks.service import get_benchmark
from app.models.service import get_model
from app.models.service import ensure_models

DTYPES = {np.dtype("<f2"): "float16", np.dtype("<f4"): "float32"}
NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
MAX_NAMED = 20  # unknown / missing item ids listed in an error


def _bad(detail: str, field: str = "file", **extra: Any) -> InvalidInput:
    return InvalidInput(detail, [{"field": field, "detail": detail, **extra}])


# --------------------------------------------------------------------------- parsing


def _read_header(fp: IO[bytes], what: str) -> tuple[int, int, np.dtype]:
    """Read a .npy header; returns (rows, width, dtype) of a 2-D, C-order float16/float32 array."""
    try:
        version = npformat.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = npformat.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, fortran, dtype = npformat.read_array_header_2_0(fp)
        else:
            shape, fortran, dtype = npformat._read_array_header(fp, version)  # noqa: SLF001 - format 3.0
    except Exception as exc:  # noqa: BLE001 - any failure here is a malformed file
        raise _bad(f"malformed {what}: not a readable .npy array ({exc})") from None
    if dtype.hasobject or dtype.kind != "f" or dtype.itemsize not in (2, 4):
        raise _bad(f"unsupported dtype {dtype.str!r} in {what}; hidden states must be float16 or float32",
                   dtype=dtype.str)
    if len(shape) != 2:
        raise _bad(f"{what} has shape {tuple(shape)}; hidden states must be a 2-D array (items x width)",
                   shape=list(shape))
    if fortran:
        raise _bad(f"{what} is stored in Fortran order; save it in C order (np.ascontiguousarray)")
    n, d = int(shape[0]), int(shape[1])
    if n == 0 or d == 0:
        raise _bad(f"{what} has shape ({n}, {d}); it needs at least one row and one column", shape=[n, d])
    return n, d, dtype


def _read_exact(fp: IO[bytes], size: int) -> bytes:
    parts, got = [], 0
    while got < size:
        part = fp.read(size - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _stream_rows(fp: IO[bytes], n: int, d: int, dtype: np.dtype, chunk_bytes: int,
                 sink: Callable[[int, int, int, bytes], None]) -> None:
    """Read ``n`` rows in chunks, check finiteness, hand little-endian bytes to ``sink(seq, start, rows, data)``."""
    row_bytes = d * dtype.itemsize
    per_chunk = max(1, chunk_bytes // row_bytes)
    little = dtype.newbyteorder("<")
    seq = start = 0
    while start < n:
        rows = min(per_chunk, n - start)
        data = _read_exact(fp, rows * row_bytes)
        if len(data) != rows * row_bytes:
            raise _bad(f"malformed file: the header announces {n} rows of {d} values but the data ends at row "
                       f"{start + len(data) // row_bytes}")
        block = np.frombuffer(data, dtype=dtype).reshape(rows, d)
        finite = np.isfinite(block).all(axis=1)
        if not finite.all():
            bad = (start + np.flatnonzero(~finite)).tolist()
            raise InvalidInput(
                f"hidden states contain NaN or infinite values (row {bad[0]} first; rows are 0-based)",
                [{"field": "file", "row": r, "detail": "NaN or infinite value"} for r in bad[:MAX_NAMED]])
        if dtype != little:
            data = block.astype(little).tobytes()
        sink(seq, start, rows, data)
        seq += 1
        start += rows


def _parse_items_field(items: str | None, n: int) -> list[str]:
    if items is None or not items.strip():
        raise _bad("a .npy upload needs the `items` field: the item ids as a JSON list, in row order",
                   field="items")
    try:
        ids = json.loads(items)
    except json.JSONDecodeError as exc:
        raise _bad(f"`items` is not valid JSON: {exc}", field="items") from None
    if not isinstance(ids, list) or not all(isinstance(i, (str, int)) and not isinstance(i, bool) for i in ids):
        raise _bad("`items` must be a JSON list of item ids (strings)", field="items")
    ids = [str(i) for i in ids]
    if len(ids) != n:
        raise _bad(f"the file has {n} rows but `items` lists {len(ids)} item ids; they must match one to one",
                   field="items", rows=n, items=len(ids))
    return ids


def _npz_ids(zf: zipfile.ZipFile) -> list[str]:
    try:
        with zf.open("ids.npy") as member:
            ids = np.load(member, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001
        raise _bad(f"malformed .npz: `ids` is not a readable array ({exc}); save ids as strings") from None
    if ids.ndim != 1 or ids.dtype.kind not in "USiu":
        raise _bad(f"`ids` in the .npz must be a 1-D array of strings or integers, got {ids.dtype.str} "
                   f"with shape {ids.shape}")
    if ids.dtype.kind == "S":
        return [x.decode() for x in ids.tolist()]
    return [str(x) for x in ids.tolist()]


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
        found.update(session.execute(
            select(Item.item_id, Item.pk).where(Item.benchmark_id == benchmark.id, Item.item_id.in_(chunk))).all())
    unknown = [i for i in ids if i not in found]
    if unknown:
        shown = ", ".join(repr(u) for u in unknown[:MAX_NAMED])
        raise InvalidInput(
            f"{len(unknown)} item id(s) are not items of benchmark {benchmark.name!r}: {shown}"
            + (" ..." if len(unknown) > MAX_NAMED else "") + " (upload items first)",
            [{"field": "items", "item": u, "detail": "unknown item"} for u in unknown[:MAX_NAMED]])
    return np.array([found[i] for i in ids], dtype="<i8")


# --------------------------------------------------------------------------- store / list / delete


def _model_for_upload(session: Session, ref: str) -> Model:
    model = session.scalars(select(Model).where(or_(Model.id == ref, Model.name == ref))).first()
    if model is not None:
        return model
    if looks_like_id(ref):
        return get_model(session, ref)  # 404: an id that names no model
    return session.get(Model, ensure_models(session, [ref])[ref])


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
        n, d, dtype = _read_header(stream, what)
        ids = _parse_items_field(items, n)
    elif magic[:4] == ZIP_MAGIC:
        if items is not None:
            raise _bad("`items` is for .npy uploads; an .npz carries its own `ids` array", field="items")
        try:
            zf = zipfile.ZipFile(fp)
            names = set(zf.namelist())
        except (zipfile.BadZipFile, OSError) as exc:
            raise _bad(f"malformed .npz file: {exc}") from None
        missing = [m for m in ("ids.npy", "states.npy") if m not in names]
        if missing:
            raise _bad(f"the .npz must hold arrays `ids` and `states`; missing: "
                       f"{', '.join(m[:-4] for m in missing)}")
        ids = _npz_ids(zf)
        stream, what = zf.open("states.npy"), "`states` in the .npz"
        n, d, dtype = _read_header(stream, what)
        if len(ids) != n:
            raise _bad(f"`states` has {n} rows but `ids` has {len(ids)} item ids; they must match one to one",
                       rows=n, items=len(ids))
    else:
        raise _bad("malformed file: expected a .npy array (N x d) or an .npz with arrays `ids` and `states`")
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

        _stream_rows(stream, n, d, dtype, chunk_bytes, sink)
    except (zipfile.BadZipFile, EOFError, OSError) as exc:  # a broken compressed member, read mid-stream
        raise _bad(f"malformed .npz file: {exc}") from None
    finally:
        if zf is not None:
            zf.close()
    return {"benchmark": benchmark.name, "model": model.name, "id": state.id, "n_items": n, "dim": d,
            "dtype": state.dtype}


def list_hidden_states(session: Session, benchmark_ref: str) -> list[dict[str, Any]]:
    benchmark = get_benchmark(session, benchmark_ref)
    rows = session.execute(
        select(HiddenState, Model.name, func.coalesce(func.sum(func.length(HiddenStateChunk.data)), 0))
        .join(Model, Model.id == HiddenState.model_id)
        .outerjoin(HiddenStateChunk, HiddenStateChunk.hidden_state_id == HiddenState.id)
        .where(HiddenState.benchmark_id == benchmark.id)
        .group_by(HiddenState.id, Model.name).order_by(Model.name)
    ).all()
    return [{"id": hs.id, "benchmark": benchmark.name, "model": name, "n_items": hs.n_items, "dim": hs.dim,
             "dtype": hs.dtype, "bytes": int(size),
             "created_at": hs.created_at.isoformat() if hs.created_at else None} for hs, name, size in rows]


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


# --------------------------------------------------------------------------- loading


def hidden_state_row(session: Session, benchmark: Benchmark, model: Model) -> HiddenState | None:
    return session.scalars(select(HiddenState).where(
        HiddenState.benchmark_id == benchmark.id, HiddenState.model_id == model.id)).first()


def load_hidden_states(session: Session, benchmark: Benchmark, model: Model,
                       item_pks: np.ndarray | None = None) -> np.ndarray:
    """The model's hidden states (n x d, stored dtype) aligned to ``item_pks`` (default: every item of
    the benchmark in ``items.pk`` order). Items without a stored row are a 422 naming them."""
    state = hidden_state_row(session, benchmark, model)
    if state is None:
        raise InvalidInput(f"model {model.name!r} has no hidden states on benchmark {benchmark.name!r}",
                           [{"field": "reference_models", "model": model.name, "detail": "no hidden states"}])
    if item_pks is None:
        item_pks = np.array(list(session.scalars(
            select(Item.pk).where(Item.benchmark_id == benchmark.id).order_by(Item.pk))), dtype=np.int64)
    matrix = np.empty((state.n_items, state.dim), dtype=state.dtype)
    stmt = (select(HiddenStateChunk.row_start, HiddenStateChunk.n_rows, HiddenStateChunk.data)
            .where(HiddenStateChunk.hidden_state_id == state.id).order_by(HiddenStateChunk.seq)
            .execution_options(yield_per=8))
    filled = 0
    for row_start, n_rows, data in session.execute(stmt):
        matrix[row_start:row_start + n_rows] = np.frombuffer(data, dtype=np.dtype(state.dtype).newbyteorder("<")
                                                              ).reshape(n_rows, state.dim)
        filled += n_rows
    if filled != state.n_items:
        raise RuntimeError(f"hidden states {state.id} are incomplete ({filled} of {state.n_items} rows)")
    stored = np.frombuffer(state.item_pks, dtype="<i8")
    order = np.argsort(stored, kind="stable")
    wanted = np.asarray(item_pks, dtype=np.int64)
    pos = np.searchsorted(stored, wanted, sorter=order)
    pos = np.minimum(pos, len(stored) - 1)
    rows = order[pos]
    missing = stored[rows] != wanted
    if missing.any():
        missing_pks = wanted[missing].tolist()
        names = dict(session.execute(select(Item.pk, Item.item_id).where(Item.pk.in_(missing_pks[:MAX_NAMED]))).all())
        shown = ", ".join(repr(names.get(pk, pk)) for pk in missing_pks[:MAX_NAMED])
        raise InvalidInput(
            f"model {model.name!r} has no hidden states for {len(missing_pks)} item(s) of benchmark "
            f"{benchmark.name!r}: {shown}" + (" ..." if len(missing_pks) > MAX_NAMED else ""),
            [{"field": "reference_models", "model": model.name, "item": names.get(pk, pk), "detail": "no hidden state"}
             for pk in missing_pks[:MAX_NAMED]])
    return matrix[rows]
