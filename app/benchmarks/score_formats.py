"""Wide score matrices as CSV (first column ``model``, header = item ids, empty = missing)
and long JSON ``[{model, item, score}]``: parsing with located errors, and writing."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass

import numpy as np

from app.core.score_scale import ScoreScale, parse_score
from app.kit.errors import ErrorCollector, InvalidInput
from app.kit.validation import load_json

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


def parse_wide_csv(data: bytes, scale: ScoreScale) -> ScoreUpload:
    """Parse and fully validate a wide CSV; rows are numbered as lines (header = row 1)."""
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
    item_ids = [h.strip() for h in header[1:]]
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
            name = record[0].strip()
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


def parse_long_json(data: bytes, scale: ScoreScale) -> ScoreUpload:
    """Parse ``[{model, item, score}]``; a row is the 0-based list index."""
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
    writer.writerow(["model", *item_ids])
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
        writer.writerow([name, *cells])
    return out.getvalue()
