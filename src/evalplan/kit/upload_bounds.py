"""The one bound on what reading an upload may cost (issue 32 item 2; docs/RELIABILITY.md "Upload bounds").

Every import path (inspect ``.eval``/``.json``, HELM JSON, lighteval parquet + results JSON, lm-eval JSONL
lines) calls this module before a harness reader or ``json.loads`` builds anything, so a small upload
cannot make a large parse:

* **archives**: whatever a file's name or leading bytes (``zipfile`` finds an archive behind any prefix:
  ``printf '\\0\\0junk'; cat bomb.zip`` is still opened by the readers), a file that opens as a zip has its
  members inflated in 1 MB chunks that are counted and dropped: more than ``max_decompressed_bytes`` in
  all is 413 (setting ``EVALPLAN_MAX_DECOMPRESSED_BYTES``);
* **JSON** (a ``.json`` file, a ``.json`` archive member, one JSONL line): its values (objects, arrays,
  strings, numbers, literals) are counted while it streams through ``ijson`` (C backend), without building
  it: more than :data:`MAX_JSON_VALUES` in one upload (one JSONL line, which is parsed and dropped alone)
  is 413. A cheap upper bound (commas + brackets + 1) skips the streamed count for small documents;
* **parquet**: the footer's row groups give the uncompressed size and the number of leaf values, bounded
  the same way before pyarrow decodes a page.

Why a value count: a parsed JSON value costs a Python object (56-64 bytes for an empty list or dict, more
in the harness readers' pydantic models), so 98 KB of zip holding 100 MB of ``{},`` took a worker to
2.9 GB. 2,000,000 values is ~200 MB parsed; real logs are far below (docs/RELIABILITY.md).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import sys
import zipfile
import zlib
from collections.abc import Iterable
from typing import IO, Any

from evalplan.kit.errors import InvalidInput, NotInstalled, PayloadTooLarge

#: the most JSON values one upload (or one JSONL line) may hold
MAX_JSON_VALUES = 2_000_000
#: the longest JSONL line read (a line is parsed whole)
MAX_LINE_BYTES = 32 << 20
CHUNK = 1 << 20
ZIP_ZSTANDARD = 93  # the ZIP compression method id of zstd (APPNOTE 4.4.5)
_VALUE_EVENTS = frozenset({"start_map", "start_array", "string", "number", "boolean", "null"})


def enable_zstd_members() -> None:
    """inspect_ai (0.3.28x) writes ``.eval`` members with zstd (ZIP method 93). The standard library reads it
    from Python 3.14; before, ``zipfile_zstd`` (installed with inspect-ai) adds it to ``zipfile``, as
    inspect_ai itself does when imported. Without it a zstd member is answered 501 naming the [inspect] extra."""
    if sys.version_info < (3, 14):
        with contextlib.suppress(ImportError):
            importlib.import_module("zipfile_zstd")


class UploadBudget:
    """What the rest of one upload may still cost: decompressed bytes and JSON values."""

    def __init__(self, max_decompressed_bytes: int, max_json_values: int | None = None) -> None:
        self.max_bytes = max_decompressed_bytes
        self.max_values = MAX_JSON_VALUES if max_json_values is None else max_json_values
        self.bytes_used = self.values_used = 0

    def take_bytes(self, n: int, file: str, member: str | None) -> None:
        self.bytes_used += n
        if self.bytes_used > self.max_bytes:
            where = f" (member {member!r})" if member else ""
            raise PayloadTooLarge(
                f"{file!r} decompresses to more than {self.max_bytes} bytes{where}; "
                "setting EVALPLAN_MAX_DECOMPRESSED_BYTES",
                [{"file": file, "member": member, "detail": f"more than {self.max_bytes} bytes decompressed"}])

    def take_values(self, n: int, file: str, member: str | None) -> None:
        self.values_used += n
        if self.values_used > self.max_values:
            where = f" (member {member!r})" if member else ""
            raise PayloadTooLarge(
                f"{file!r}{where} holds more than {self.max_values} JSON values; an import may hold at most "
                f"{self.max_values}: split it",
                [{"file": file, "member": member, "detail": f"more than {self.max_values} JSON values"}])


class _Counted(io.RawIOBase):
    """A read-only stream that charges every byte read from ``raw`` to the budget."""

    def __init__(self, raw: IO[bytes], budget: UploadBudget, file: str, member: str | None) -> None:
        self.raw, self.budget, self.file, self.member = raw, budget, file, member

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        chunk = self.raw.read(CHUNK if n is None or n < 0 else min(n, CHUNK))
        self.budget.take_bytes(len(chunk), self.file, self.member)
        return chunk

    def readinto(self, buffer: Any) -> int:
        chunk = self.read(len(buffer))
        buffer[:len(chunk)] = chunk
        return len(chunk)


def values_upper_bound(data: bytes) -> int:
    """At least the number of values of the JSON text ``data``: every value but the first follows a ``,``
    or opens a container (``[``, ``{``)."""
    return data.count(b",") + data.count(b"[") + data.count(b"{") + 1


def count_values(stream: IO[bytes] | bytes, budget: UploadBudget, file: str, member: str | None = None) -> None:
    """Charge the values of the JSON document in ``stream`` to ``budget`` as they stream past (ijson), never
    building it. Past a token ijson refuses (``NaN``, or malformed JSON, which the reader then answers with its
    own 422) the rest is bounded by :func:`values_upper_bound`."""
    import ijson  # noqa: PLC0415 - only uploads need it

    source = io.BytesIO(stream) if isinstance(stream, bytes) else stream
    pending = 0
    try:
        for event, _ in ijson.basic_parse(source, buf_size=CHUNK):
            if event in _VALUE_EVENTS:
                pending += 1
                if pending >= 65536:
                    budget.take_values(pending, file, member)
                    pending = 0
    except ijson.JSONError:
        # NaN/Infinity (Python's json writes them; the readers accept them) or malformed: the rest is counted
        # by its structure (commas and brackets, an upper bound), so no prefix can stop the count
        while chunk := source.read(CHUNK):
            pending += values_upper_bound(chunk)
            if pending >= 65536:
                budget.take_values(pending, file, member)
                pending = 0
    budget.take_values(pending, file, member)


def check_json(data: bytes, budget: UploadBudget, file: str, member: str | None = None) -> None:
    """Charge one JSON document held in memory (a ``.json`` upload, one JSONL line)."""
    bound = values_upper_bound(data)
    if budget.values_used + bound <= budget.max_values:
        budget.take_values(bound, file, member)
    else:
        count_values(data, budget, file, member)


def _zip_error(file: str, content: bytes, exc: Exception) -> Exception:
    if isinstance(exc, NotImplementedError) and ZIP_ZSTANDARD in _compress_types(content):
        return NotInstalled(
            f"{file!r} is an inspect log compressed with zstd, which this server cannot read without the "
            "zipfile-zstd package of the [inspect] extra: pip install 'evalplan[inspect]'",
            [{"file": file, "detail": "zstd-compressed members (ZIP method 93) need the [inspect] extra"}])
    return InvalidInput(f"{file!r} is not a readable zip archive: {exc}"[:300],
                        [{"file": file, "detail": str(exc)[:200]}])


def _compress_types(content: bytes) -> set[int]:
    with contextlib.suppress(zipfile.BadZipFile, OSError), zipfile.ZipFile(io.BytesIO(content)) as archive:
        return {info.compress_type for info in archive.infolist()}
    return set()


def is_archive(content: bytes) -> bool:
    """Whether a zip reader would open ``content``: it starts with ``PK`` or has a zip end record anywhere
    (a prefix of any bytes does not hide an archive)."""
    return content.startswith(b"PK") or zipfile.is_zipfile(io.BytesIO(content))


def check_archive(file: str, content: bytes, budget: UploadBudget) -> None:
    """Inflate every member in counted chunks; ``.json`` members are also value-counted as they stream."""
    enable_zstd_members()
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            for info in archive.infolist():
                with archive.open(info) as member:
                    counted = _Counted(member, budget, file, info.filename)
                    if info.filename.lower().endswith(".json"):
                        count_values(io.BufferedReader(counted, CHUNK), budget, file, info.filename)
                    while counted.read(CHUNK):
                        pass
    except (NotImplementedError, zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
        raise _zip_error(file, content, exc) from None


def check_parquet(file: str, content: bytes, budget: UploadBudget) -> None:
    """Bound a parquet file by its footer: uncompressed bytes and leaf values of every row group."""
    try:
        import pyarrow.parquet as pq  # noqa: PLC0415
    except ImportError:  # the lighteval reader answers the 501
        return
    try:
        metadata = pq.ParquetFile(io.BytesIO(content)).metadata
    except Exception:  # noqa: BLE001 - not parquet: the reader answers its 422
        return
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        budget.take_bytes(max(0, group.total_byte_size), file, f"row group {g}")
        budget.take_values(sum(max(0, group.column(c).num_values) for c in range(group.num_columns)),
                           file, f"row group {g}")


def check_upload(files: Iterable[tuple[str, bytes]], max_decompressed_bytes: int,
                 max_json_values: int | None = None) -> None:
    """413 (or the archive's 422/501) unless reading every file of one upload stays within the bounds."""
    budget = UploadBudget(max_decompressed_bytes, max_json_values)
    for file, content in files:
        lower = file.lower()
        if is_archive(content):
            check_archive(file, content, budget)
        elif lower.endswith(".parquet"):
            check_parquet(file, content, budget)
        elif lower.endswith(".json") or content[:64].lstrip()[:1] in (b"{", b"["):
            check_json(content, budget, file)


def check_line(line: bytes | str, row: int, max_json_values: int | None = None) -> None:
    """One JSONL line (parsed whole, then dropped): at most ``MAX_LINE_BYTES`` and ``max_json_values`` values."""
    data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else bytes(line)
    if len(data) > MAX_LINE_BYTES:
        raise PayloadTooLarge(f"line {row} is {len(data)} bytes; a line may be at most {MAX_LINE_BYTES}",
                              [{"row": row, "column": None, "detail": f"more than {MAX_LINE_BYTES} bytes"}])
    check_json(data, UploadBudget(sys.maxsize, max_json_values), f"line {row}")


__all__ = ["MAX_JSON_VALUES", "UploadBudget", "check_archive", "check_json", "check_line", "check_parquet",
           "check_upload", "count_values", "enable_zstd_members", "is_archive", "values_upper_bound"]
