"""The upload formats of hidden states: a ``.npy`` array (N x d, float16/float32, C order) with the
item ids given apart, or an ``.npz`` with arrays ``ids`` and ``states``.

Parsed with ``numpy.lib.format`` from a file object and streamed in row chunks, so a large matrix is
never read whole; every problem is an ``InvalidInput`` naming what is wrong (docs/HIDDEN_STATES.md).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from typing import IO, Any

import numpy as np
from numpy.lib import format as npformat

from evalplan.kit import input_guard
from evalplan.kit.errors import InvalidInput, PayloadTooLarge

DTYPES = {np.dtype("<f2"): "float16", np.dtype("<f4"): "float32"}
NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
MAX_NAMED = 20
MAX_ROWS = 1 << 24  # items in one upload
MAX_WIDTH = 1 << 17  # hidden-state width (largest LLMs are ~16k)  # unknown / missing item ids listed in an error


def bad_file(detail: str, field: str = "file", **extra: Any) -> InvalidInput:
    return InvalidInput(detail, [{"field": field, "detail": detail, **extra}])


def read_header(fp: IO[bytes], what: str) -> tuple[int, int, np.dtype]:
    """Read a .npy header; returns (rows, width, dtype) of a 2-D, C-order float16/float32 array."""
    try:
        version = npformat.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = npformat.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, fortran, dtype = npformat.read_array_header_2_0(fp)
        else:
            shape, fortran, dtype = npformat._read_array_header(fp, version)  # type: ignore[attr-defined]  # 3.0
    except Exception as exc:  # noqa: BLE001 - any failure here is a malformed file
        raise bad_file(f"malformed {what}: not a readable .npy array ({exc})") from None
    if dtype.hasobject or dtype.kind != "f" or dtype.itemsize not in (2, 4):
        raise bad_file(f"unsupported dtype {dtype.str!r} in {what}; hidden states must be float16 or float32",
                   dtype=dtype.str)
    if len(shape) != 2:
        raise bad_file(f"{what} has shape {tuple(shape)}; hidden states must be a 2-D array (items x width)",
                   shape=list(shape))
    if fortran:
        raise bad_file(f"{what} is stored in Fortran order; save it in C order (np.ascontiguousarray)")
    n, d = int(shape[0]), int(shape[1])
    if n <= 0 or d <= 0:
        raise bad_file(f"{what} has shape ({n}, {d}); it needs at least one row and one column", shape=[n, d])
    if n > MAX_ROWS or d > MAX_WIDTH:
        raise bad_file(f"{what} has shape ({n}, {d}); at most {MAX_ROWS} rows and {MAX_WIDTH} columns",
                       shape=[n, d])
    remaining = _remaining_bytes(fp)
    if remaining is not None and n * d * dtype.itemsize > remaining:
        raise bad_file(f"malformed {what}: it announces shape ({n}, {d}) = {n * d * dtype.itemsize} bytes of data, "
                       f"but only {remaining} bytes follow the header", shape=[n, d])
    return n, d, dtype


def _remaining_bytes(fp: IO[bytes]) -> int | None:
    """Bytes left after the current position of a seekable file (None when it cannot seek)."""
    try:
        if not fp.seekable():
            return None
        here = fp.tell()
        end = fp.seek(0, 2)
        fp.seek(here)
        return int(end - here)
    except (OSError, ValueError, AttributeError):
        return None


def _read_exact(fp: IO[bytes], size: int) -> bytes:
    parts, got = [], 0
    while got < size:
        part = fp.read(size - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def stream_rows(fp: IO[bytes], n: int, d: int, dtype: np.dtype, chunk_bytes: int,
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
            raise bad_file(f"malformed file: the header announces {n} rows of {d} values but the data ends at row "
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


def parse_items_field(items: str | None, n: int) -> list[str]:
    if items is None or not items.strip():
        raise bad_file("a .npy upload needs the `items` field: the item ids as a JSON list, in row order",
                   field="items")
    try:
        ids = input_guard.loads(items, where="form")
    except json.JSONDecodeError as exc:
        raise bad_file(f"`items` is not valid JSON: {exc}", field="items") from None
    except input_guard.InputRejected as exc:
        raise bad_file(f"`items`: {exc.errors[0]['detail']}", field="items") from None
    if not isinstance(ids, list) or not all(isinstance(i, (str, int)) and not isinstance(i, bool) for i in ids):
        raise bad_file("`items` must be a JSON list of item ids (strings)", field="items")
    ids = [str(i) for i in ids]
    if len(ids) != n:
        raise bad_file(f"the file has {n} rows but `items` lists {len(ids)} item ids; they must match one to one",
                   field="items", rows=n, items=len(ids))
    return ids


#: the most bytes the ``ids`` member of an .npz may inflate to (it is loaded whole; ``states`` is streamed)
MAX_IDS_BYTES = 64 << 20


def npz_ids(zf: zipfile.ZipFile) -> list[str]:
    """The ``ids`` array of an .npz, 413 when its member would inflate past ``MAX_IDS_BYTES`` (zipfile reads a
    member no further than its declared size, so the declared size bounds the memory; issue 32 item 2)."""
    declared = zf.getinfo("ids.npy").file_size
    if declared > MAX_IDS_BYTES:
        raise PayloadTooLarge(f"`ids` in the .npz inflates to {declared} bytes; at most {MAX_IDS_BYTES}",
                              [{"field": "file", "member": "ids.npy", "detail": f"more than {MAX_IDS_BYTES} bytes"}])
    try:
        with zf.open("ids.npy") as member:
            ids = np.load(member, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001
        raise bad_file(f"malformed .npz: `ids` is not a readable array ({exc}); save ids as strings") from None
    if ids.ndim != 1 or ids.dtype.kind not in "USiu":
        raise bad_file(f"`ids` in the .npz must be a 1-D array of strings or integers, got {ids.dtype.str} "
                   f"with shape {ids.shape}")
    if ids.dtype.kind == "S":
        return [x.decode() for x in ids.tolist()]
    return [str(x) for x in ids.tolist()]
