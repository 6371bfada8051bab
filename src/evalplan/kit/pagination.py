"""Keyset pagination: an opaque cursor holding the sort key of the last row of the previous page.

:func:`keyset_page` serves every list of the API: one key column (a string id or an integer row
key; the cursor holds the value) or several (the cursor holds the list of values, compared
lexicographically).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, and_, or_
from sqlalchemy.orm import Session

from evalplan.kit import input_guard
from evalplan.kit.errors import InvalidInput

T = TypeVar("T")


@dataclass
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None


@dataclass
class PageParams:
    limit: int
    cursor: str | None


def encode_cursor(key: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def invalid_cursor(detail: str = "not a cursor returned by this API") -> InvalidInput:
    return InvalidInput("invalid pagination cursor", [{"parameter": "cursor", "detail": detail}])


def is_row_key(value: Any) -> bool:
    """An integer row key that fits a 64-bit column (bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def decode_cursor(cursor: str | None) -> Any:
    if cursor is None or cursor == "":
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return input_guard.loads(base64.urlsafe_b64decode(padded.encode()), where="query")
    except (ValueError, json.JSONDecodeError, input_guard.InputRejected):
        raise invalid_cursor() from None


def _fits(column: ColumnElement[Any], value: Any) -> bool:
    return is_row_key(value) if column.type.python_type is int else isinstance(value, str)


def _after(keys: Sequence[ColumnElement[Any]], values: Sequence[Any], descending: bool) -> ColumnElement[bool]:
    """Rows strictly after ``values`` in the (lexicographic) key order."""
    head, rest = keys[0], keys[1:]
    beyond: ColumnElement[bool] = head < values[0] if descending else head > values[0]
    if not rest:
        return beyond
    return or_(beyond, and_(head == values[0], _after(rest, values[1:], descending)))


def keyset_page(session: Session, stmt: Any, key: Any | Sequence[Any], *,
                limit: int, cursor: str | None, what: str, descending: bool = False,
                entities: bool = True) -> Page[Any]:
    """One page of ``stmt`` ordered by ``key`` (a column, or columns compared lexicographically).

    ``entities``: the statement selects one ORM entity (the page holds entities), else rows."""
    keys: list[Any] = list(key) if isinstance(key, Sequence) else [key]
    after = decode_cursor(cursor)
    if after is not None:
        values = after if len(keys) > 1 else [after]
        if not (isinstance(values, list) and len(values) == len(keys)
                and all(_fits(k, v) for k, v in zip(keys, values))):
            raise invalid_cursor(f"not a {what} cursor")
        stmt = stmt.where(_after(keys, values, descending))
    stmt = stmt.order_by(*(k.desc() if descending else k for k in keys)).limit(limit + 1)
    rows: list[Any] = list(session.scalars(stmt)) if entities else list(session.execute(stmt).all())
    more = len(rows) > limit
    rows = rows[:limit]
    if not more:
        return Page(rows, None)
    last = [getattr(rows[-1], str(k.key)) for k in keys]
    return Page(rows, encode_cursor(last if len(keys) > 1 else last[0]))
