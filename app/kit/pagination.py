"""Keyset pagination: an opaque cursor holding the last sort key of the previous page."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from app.kit.errors import InvalidInput

T = TypeVar("T")


@dataclass
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None


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
        return json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, json.JSONDecodeError):
        raise InvalidInput(
            "invalid pagination cursor",
            [{"parameter": "cursor", "detail": "not a cursor returned by this API"}],
        ) from None


def keyset_page(session: Any, stmt: Any, key: Any, *, limit: int, cursor: str | None, what: str,
                descending: bool = False) -> Page[Any]:
    """One page of ``stmt`` ordered by the string id column ``key`` (ascending or descending)."""
    after = decode_cursor(cursor)
    if after is not None and not isinstance(after, str):
        raise invalid_cursor(f"not a {what} cursor")
    stmt = stmt.order_by(key.desc() if descending else key).limit(limit + 1)
    if after is not None:
        stmt = stmt.where(key < after if descending else key > after)
    rows = list(session.scalars(stmt))
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, encode_cursor(getattr(rows[-1], key.key)) if more else None)
