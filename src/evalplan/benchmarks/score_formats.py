"""Wide score matrices as CSV (first column ``model``, header = item ids, empty = missing)
and long JSON ``[{model, item, score}]``: parsing with located errors, and writing."""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass

import numpy as np

from evalplan.core.benchmarks.score_scale import ScoreScale, parse_score
from evalplan.kit.csv_cells import neutralise, restore
from evalplan.kit.errors import ErrorCollector, InvalidInput, PayloadTooLarge
from evalplan.kit.validation import load_json

MAX_ITEM_ID = 200  # items.item_id is VARCHAR(200)
MAX_MODEL_NAME = 300  # models.name is VARCHAR(300)


def _name_problem(kind: str, name: str, limit: int) -> str | None:
    """Why ``name`` cannot be stored (PostgreSQL rejects over-long values and NUL), or None."""
    if len(name) > limit:
        return f"{kind} must be at most {limit} characters, got {len(name)}"
    if "\x00" in name:
        return f"{kind} must not contain NUL characters"
    return None


@dataclass
class ScoreUpload:
    """A validated upload: ``values[i, j]`` is model i's score on item j, NaN where absent."""

    model_names: list[str]
    item_ids: list[str]
    values: np.ndarray

    @property
    def n_scores(self) -> int:
        return int((~np.isnan(self.values)).sum())


def too_many_items(n: int, max_items: int | None, *, counted_to: int | None = None) -> None:
    """413 when an upload names more than ``max_items`` items (setting ``EVALPLAN_MAX_ITEMS_PER_UPLOAD``);
    ``counted_to``: the count stopped there (the upload names at least that many)."""
    if max_items is not None and n > max_items:
        named = f"at least {n}" if counted_to is not None and n >= counted_to else str(n)
        raise PayloadTooLarge(f"the upload names {named} items; at most {max_items} per upload "
                              "(setting EVALPLAN_MAX_ITEMS_PER_UPLOAD): split it",
                              [{"row": 1, "column": None, "detail": f"{n} items > {max_items}"}])


#: bytes of CSV the fast parser converts at once (one Arrow record batch)
FAST_BLOCK = 8 << 20


def parse_wide_csv(data: bytes, scale: ScoreScale, max_items: int | None = None) -> ScoreUpload:
    """Parse and fully validate a wide CSV; rows are numbered as lines (header = row 1). More than
    ``max_items`` item columns is 413, before the matrix is allocated.

    A well-formed body is parsed by Arrow's CSV reader (C++, a block of rows at a time into the matrix);
    any doubt (a cell it cannot read as a number, a quote in the header, a bad name or value) sends the whole
    body through the line-by-line parser below, which locates every error. Both give bit-identical values
    (correctly rounded decimal parsing)."""
    fast = _parse_wide_csv_fast(data, scale, max_items)
    if fast is not None:
        return fast
    return _parse_wide_csv_lines(data, scale, max_items)


def _parse_wide_csv_fast(data: bytes, scale: ScoreScale, max_items: int | None = None) -> ScoreUpload | None:
    """The Arrow parse of a body with no problem, or None (then the line parser reports what is wrong)."""
    try:
        import pyarrow as pa  # noqa: PLC0415 - optional speed-up; the line parser is the reference
        import pyarrow.csv as pacsv  # noqa: PLC0415
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return None
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    end = body.find(b"\n")
    first = body if end < 0 else body[:end]
    if end < 0 or b'"' in first or b"\r" in first[:-1]:
        return None
    try:
        header = first.rstrip(b"\r").decode("utf-8").split(",")
    except UnicodeDecodeError:
        return None
    if not header or header[0].strip() != "model":
        return None
    too_many_items(len(header) - 1, max_items)
    item_ids = [restore(h.strip()) for h in header[1:]]
    if (not header or header[0].strip() != "model" or not item_ids or len(set(item_ids)) != len(item_ids)
            or any(not i or _name_problem("item id", i, MAX_ITEM_ID) for i in item_ids)):
        return None
    names = [f"c{j}" for j in range(len(header))]
    types = {n: pa.float64() for n in names[1:]}
    types[names[0]] = pa.string()
    try:
        reader = pacsv.open_csv(
            pa.py_buffer(body[end + 1:]),
            read_options=pacsv.ReadOptions(column_names=names, block_size=FAST_BLOCK, use_threads=False),
            parse_options=pacsv.ParseOptions(newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=False,
                                                 quoted_strings_can_be_null=True, check_utf8=True))
        model_names: list[str] = []
        matrix = np.full((body.count(b"\n") + 1, len(item_ids)), np.nan)
        n_rows = 0
        for batch in reader:
            k = batch.num_rows
            for j in range(1, len(names)):
                column = batch.column(j)
                values = column.to_numpy(zero_copy_only=False)
                if int(np.isnan(values).sum()) != column.null_count:
                    return None  # a cell read as NaN: the line parser says why
                matrix[n_rows:n_rows + k, j - 1] = values
            if not _block_fits(matrix[n_rows:n_rows + k], scale):
                return None
            model_names.extend(batch.column(0).to_pylist())
            n_rows += k
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError, ValueError):
        return None
    names_clean = [restore(str(n).strip()) if n is not None else "" for n in model_names]
    if len(set(names_clean)) != len(names_clean) or any(
            not n or _name_problem("model name", n, MAX_MODEL_NAME) for n in names_clean):
        return None
    return ScoreUpload(names_clean, item_ids, matrix[:n_rows])


def _block_fits(block: np.ndarray, scale: ScoreScale) -> bool:
    """Every present cell of ``block`` is a valid score on ``scale`` (``ScoreScale.problem``, vectorized)."""
    if np.isinf(block).any():
        return False
    with np.errstate(invalid="ignore"):
        if scale.kind == "binary":
            return bool(((block == 0.0) | (block == 1.0) | np.isnan(block)).all())
        if scale.minimum is not None and (block < scale.minimum).any():
            return False
        return not (scale.maximum is not None and (block > scale.maximum).any())


def _parse_wide_csv_lines(data: bytes, scale: ScoreScale, max_items: int | None = None) -> ScoreUpload:
    """The line-by-line parser: every error located by row (line) and column."""
    # Streaming: the body is decoded as it is read and each row goes straight into a preallocated float64
    # matrix (one row per line at most), so the peak is the body + the matrix + one row's Python objects
    # (docs/PERFORMANCE.md "Upload memory"), not a Python float per cell.
    errors = ErrorCollector()
    stream = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline="")
    reader = csv.reader(stream, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise InvalidInput("CSV is empty", [{"row": 1, "column": None, "detail": "no header row"}]) from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"CSV is not UTF-8: {exc}", [{"row": None, "column": None, "detail": str(exc)}]) from None
    except csv.Error as exc:
        raise InvalidInput(f"malformed CSV: {exc}", [{"row": 1, "column": None, "detail": str(exc)}]) from None
    if not header or header[0].strip() != "model":
        raise InvalidInput(
            f"invalid CSV header: at row 1, column {header[0] if header else ''!r}: "
            "the first column of the header must be 'model'",
            [{"row": 1, "column": header[0] if header else None, "detail": "expected 'model'"}],
        )
    too_many_items(len(header) - 1, max_items)
    item_ids = [restore(h.strip()) for h in header[1:]]
    seen_items: dict[str, int] = {}
    for j, item in enumerate(item_ids):
        if not item:
            errors.add("empty item id in header", row=1, column=j + 2)
        elif (reason := _name_problem("item id", item, MAX_ITEM_ID)) is not None:
            errors.add(reason, row=1, column=j + 2)
        elif item in seen_items:
            errors.add(f"item {item!r} appears twice in the header (same cell twice)", row=1, column=item)
        seen_items.setdefault(item, j)
    errors.raise_if_any("invalid CSV header")

    n_cols = len(header)
    model_names: list[str] = []
    seen_models: dict[str, int] = {}
    matrix = np.full((data.count(b"\n") + 1, n_cols - 1), np.nan)
    n_rows = 0
    nan = math.nan
    check = scale.problem
    line = 1
    try:
        for record in reader:
            line = reader.line_num
            if not record or (len(record) == 1 and not record[0].strip()):
                continue
            if len(record) != n_cols:
                # short row: the first missing item column; long row: the 1-based position of the first extra field
                where = item_ids[len(record) - 1] if len(record) < n_cols else n_cols + 1
                errors.add(f"expected {n_cols} fields, found {len(record)}", row=line, column=where)
                continue
            name = restore(record[0].strip())
            if not name:
                errors.add("empty model name", row=line, column="model")
                continue
            if (reason := _name_problem("model name", name, MAX_MODEL_NAME)) is not None:
                errors.add(reason, row=line, column="model")
                continue
            if name in seen_models:
                errors.add(f"model {name!r} appears twice (same cells twice; first at row {seen_models[name]})",
                           row=line, column="model")
                continue
            seen_models[name] = line
            values = [nan] * (n_cols - 1)
            for j, cell in enumerate(record[1:]):
                cell = cell.strip()
                if not cell:
                    continue
                try:
                    value = parse_score(cell)
                except ValueError as exc:
                    errors.add(str(exc), row=line, column=item_ids[j], model=name)
                    continue
                reason = check(value)
                if reason:
                    errors.add(reason, row=line, column=item_ids[j], model=name)
                    continue
                values[j] = value
            model_names.append(name)
            if not errors:
                matrix[n_rows] = values
            n_rows += 1
    except csv.Error as exc:
        errors.add(f"malformed CSV: {exc}", row=reader.line_num, column=None)
    except UnicodeDecodeError as exc:
        errors.add(f"CSV is not UTF-8: {exc}", row=reader.line_num + 1, column=None)
    errors.raise_if_any("invalid score CSV")
    return ScoreUpload(model_names, item_ids, matrix[:n_rows])


#: an ``"item": <string or integer>`` member of a record, read from the raw bytes (a JSON string cannot hold
#: an unescaped quote, so this never matches inside one)
_ITEM_MEMBER = re.compile(rb'"item"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')


def named_items_at_least(data: bytes, stop: int) -> int:
    """How many distinct ``item`` values the records of a long score JSON name, read from the raw bytes by a
    regular expression (no parse), counting no further than ``stop``: a lower bound of the distinct item
    ids (an escaped and a plain spelling of one id count twice only when both are sent)."""
    seen: set[bytes] = set()
    for match in _ITEM_MEMBER.finditer(data):
        seen.add(match.group(1))
        if len(seen) >= stop:
            break
    return len(seen)


def parse_long_json(data: bytes, scale: ScoreScale, max_items: int | None = None) -> ScoreUpload:
    """Parse ``[{model, item, score}]``; a row is the 0-based list index. More than ``max_items`` distinct
    items is 413 before the body is parsed (:func:`named_items_at_least`), as early as the wide CSV's header."""
    if max_items is not None and len(data) > 16 * max_items:  # a record takes > 16 bytes: fewer cannot
        too_many_items(named_items_at_least(data, max_items + 1), max_items, counted_to=max_items + 1)
    records = load_json(data)
    if isinstance(records, dict) and isinstance(records.get("scores"), list):
        records = records["scores"]
    if not isinstance(records, list):
        raise InvalidInput("expected a JSON list of {model, item, score}",
                           [{"row": None, "column": None, "detail": "not a list"}])
    errors = ErrorCollector()
    models: dict[str, int] = {}
    items: dict[str, int] = {}
    cells: dict[tuple[int, int], tuple[float, int]] = {}
    for row, record in enumerate(records):
        if not isinstance(record, dict):
            errors.add("expected an object {model, item, score}", row=row, column=None)
            continue
        bad = False
        for key in ("model", "item"):
            value = record.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                record[key] = str(value)
            elif not isinstance(value, str) or not value.strip():
                errors.add(f"{key!r} must be a non-empty string", row=row, column=key)
                bad = True
                continue
            limit, kind = (MAX_MODEL_NAME, "model name") if key == "model" else (MAX_ITEM_ID, "item id")
            reason = _name_problem(kind, str(record[key]).strip(), limit)
            if reason is not None:
                errors.add(reason, row=row, column=key)
                bad = True
        raw = record.get("score")
        score = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else math.nan
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            if raw is None and "score" not in record:
                errors.add("'score' is required", row=row, column="score")
            else:
                errors.add(f"score must be a number, got {raw!r}", row=row, column="score")
            bad = True
        else:
            reason = scale.problem(score)
            if reason:
                errors.add(reason, row=row, column="score")
                bad = True
        if bad:
            continue
        i = models.setdefault(record["model"].strip(), len(models))
        j = items.setdefault(record["item"].strip(), len(items))
        if (i, j) in cells:
            errors.add(
                f"cell ({record['model']!r}, {record['item']!r}) appears twice (first at row {cells[(i, j)][1]})",
                row=row, column="item",
            )
            continue
        cells[(i, j)] = (score, row)
    errors.raise_if_any("invalid score JSON")
    too_many_items(len(items), max_items)
    matrix = np.full((len(models), len(items)), np.nan)
    for (i, j), (value, _) in cells.items():
        matrix[i, j] = value
    return ScoreUpload(list(models), list(items), matrix)


def format_score(value: float) -> str:
    """Shortest text that round-trips the float; integral values without '.0'."""
    if math.isnan(value):
        return ""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def write_wide_csv(model_names: list[str], item_ids: list[str], values: np.ndarray) -> str:
    """Render the wide CSV layout of ``shared/data/*/scores.csv``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["model", *(neutralise(i) for i in item_ids)])
    cache: dict[float, str] = {}
    for name, row in zip(model_names, values):
        cells = []
        for v in row.tolist():
            if v != v:  # NaN
                cells.append("")
            else:
                text = cache.get(v)
                if text is None:
                    text = cache[v] = format_score(v)
                cells.append(text)
        writer.writerow([neutralise(name), *cells])
    return out.getvalue()
