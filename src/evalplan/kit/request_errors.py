"""Plain words for FastAPI's request validation errors (issue 34, "Clarity").

* Malformed JSON: the line and column where parsing stopped and the request's Content-Type, instead of
  pydantic's ``body.13: JSON decode error`` (the character offset as if it were a field).
* A body that is not JSON at all on a JSON route (a CSV sent as ``text/csv``): what the route takes and
  what the request's Content-Type said.
* A union field (``max_items``: an integer or ``{"fraction": f}``): one error at the field, the branch
  that matches the value's kind, never pydantic's internal branch tags (``constrained-int``).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

#: pydantic error types that say "the value is not of this branch's kind" (rather than "out of range")
KIND_ERRORS = frozenset({"model_attributes_type", "model_type", "dict_type", "int_type", "float_type", "string_type",
                         "bool_type", "list_type", "int_parsing", "float_parsing", "bool_parsing", "literal_error",
                         "is_instance_of", "none_required", "dataclass_type", "tuple_type", "union_tag_invalid"})
_KIND_WORDS = {"int": "an integer", "constrained-int": "an integer", "float": "a number",
               "constrained-float": "a number", "str": "a string", "constrained-str": "a string", "bool": "a boolean",
               "none": "null"}
_WHERE = {"query": "query parameter", "path": "path parameter", "header": "header", "cookie": "cookie"}


def _unwrap(annotation: Any) -> Any:
    """``Annotated[X, ...]`` -> ``X``; ``X | None`` -> ``X`` (None adds no branch tag)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return annotation


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def union_depth(model: Any, path: Sequence[Any]) -> int | None:
    """The index in ``path`` (a body error's ``loc`` without ``body``) of a union's branch tag, when the
    path runs through a union field of ``model``; else None."""
    annotation = _unwrap(model)
    for depth, part in enumerate(path):
        if _is_union(annotation):
            # a path already past this union's tag goes on into the model member that has the field
            members = [m for m in map(_unwrap, typing.get_args(annotation))
                       if isinstance(m, type) and issubclass(m, BaseModel)
                       and part in {f.alias or n for n, f in m.model_fields.items()}]
            if not members:
                return depth
            annotation = members[0]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            fields = {f.alias or name: f for name, f in annotation.model_fields.items()}
            if part not in fields:
                return None
            annotation = _unwrap(fields[part].annotation)
            continue
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin in (list, tuple, set, frozenset, Sequence) and isinstance(part, int) and args:
            annotation = _unwrap(args[0])
        elif origin is dict and len(args) == 2:
            annotation = _unwrap(args[1])
        else:
            return None
    return len(path) if _is_union(annotation) else None


def field_name(loc: Sequence[Any]) -> str | None:
    """``["body", "stop", "level"]`` -> ``"stop.level"``; None for the whole body."""
    return ".".join(str(p) for p in loc[1:]) or None


def where_of(loc: Sequence[Any]) -> str:
    """Where an error is, in words: the body field's dotted path, or ``query parameter limit``."""
    if not loc:
        return "request"
    if loc[0] == "body":
        return field_name(loc) or "request body"
    kind = _WHERE.get(str(loc[0]), str(loc[0]))
    return f"{kind} {field_name(loc) or ''}".strip()


def _collapse_unions(errors: list[dict[str, Any]], model: Any) -> list[dict[str, Any]]:
    """One error per union field: the branch that failed on a constraint (the value was of its kind), else
    one error naming the accepted kinds."""
    out: list[dict[str, Any]] = []
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for e in errors:
        loc = tuple(e.get("loc", ()))
        depth = union_depth(model, loc[1:]) if model is not None and loc[:1] == ("body",) else None
        if depth is None or depth + 1 >= len(loc):
            out.append(e)
            continue
        key = loc[:depth + 1]
        if key not in groups:
            groups[key] = []
            out.append({"__union__": key})
        groups[key].append({**e, "loc": key + loc[depth + 2:], "tag": loc[depth + 1]})
    result: list[dict[str, Any]] = []
    for e in out:
        if "__union__" not in e:
            result.append(e)
            continue
        key = e["__union__"]
        branch = groups[key]
        by_tag: dict[Any, list[dict[str, Any]]] = {}
        for b in branch:
            by_tag.setdefault(b["tag"], []).append(b)
        # a branch fits when the value was of its kind: none of its errors is a kind error at the field itself
        fitting = [tag for tag, errs in by_tag.items()
                   if not any(tuple(b["loc"]) == key and b.get("type") in KIND_ERRORS for b in errs)]
        if fitting:
            result.extend({k: v for k, v in b.items() if k != "tag"} for b in by_tag[fitting[0]])
            continue
        kinds = list(dict.fromkeys(_KIND_WORDS.get(str(tag), "an object" if str(tag)[:1].isupper() else str(tag))
                                   for tag in by_tag))
        if "a number" in kinds and "an integer" in kinds:  # StrictFloat | StrictInt: any number
            kinds.remove("an integer")
        result.append({"loc": key, "type": "union_type", "input": branch[0].get("input"),
                       "msg": f"must be {' or '.join(kinds)}"})
    return result


_PHRASES = (("Input should be ", "must be "), ("Field required", "is required"),
            ("Extra inputs are not permitted", "is not a known field"))


def plain_message(error: dict[str, Any]) -> str:
    """pydantic's message in the API's words (``must be``, ``is required``), with the value when it was a scalar
    that failed a constraint (``must be less than or equal to 1000000, got 10000000``)."""
    msg = str(error.get("msg", "invalid"))
    for theirs, ours in _PHRASES:
        msg = msg.replace(theirs, ours)
    value = error.get("input")
    kind = error.get("type")
    if kind not in KIND_ERRORS and kind not in ("missing", "extra_forbidden") \
            and isinstance(value, (int, float)) and not isinstance(value, bool):
        msg += f", got {value!r}"
    return msg


def _line_column(doc: str, pos: int) -> tuple[int, int]:
    line = doc.count("\n", 0, pos) + 1
    return line, pos - (doc.rfind("\n", 0, pos) + 1) + 1


def plain_errors(raw: Sequence[Any], *, body: Any, content_type: str | None,
                 model: Any = None) -> tuple[str, list[dict[str, Any]]]:
    """``(detail, errors)`` for a 422 problem from FastAPI's ``RequestValidationError.errors()``; ``body`` is
    the error's body (the undecoded text for malformed JSON), ``model`` the route's body type, if any."""
    errors = [dict(e) for e in raw]
    for _ in range(4):  # a union inside a union's branch: collapsed on the next pass
        collapsed = _collapse_unions(errors, model)
        if collapsed == errors:
            break
        errors = collapsed
    media = (content_type or "").split(";")[0].strip() or "none"
    out: list[dict[str, Any]] = []
    for e in errors:
        loc = list(e.get("loc", ()))
        kind = e.get("type")
        entry: dict[str, Any] = {"loc": loc, "field": field_name(loc), "type": kind}
        if kind == "json_invalid":
            pos = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0
            doc = body if isinstance(body, str) else ""
            line, column = _line_column(doc, pos)
            reason = str((e.get("ctx") or {}).get("error") or "not valid JSON")
            hint = ("" if doc.lstrip()[:1] in ("{", "[", '"') or not doc.strip()
                    else "; the body does not look like JSON (a CSV or text file needs its own Content-Type, "
                         "such as text/csv, on a route that takes it)")
            entry.update(loc=["body"], field=None, line=line, column=column,
                         detail=f"malformed JSON at line {line}, column {column}: {reason} "
                                f"(Content-Type: {media}){hint}")
        elif loc == ["body"] and kind in KIND_ERRORS and not (media == "application/json" or media.endswith("+json")):
            entry["detail"] = (f"this route takes a JSON body (Content-Type: application/json); the request's "
                               f"Content-Type is {media}")
        elif kind == "missing" and loc == ["body"]:
            entry["detail"] = "a JSON body is required (Content-Type: application/json)"
        else:
            entry["detail"] = plain_message(e)
        out.append(entry)
    if not out:
        return "invalid request", out
    first = out[0]
    where = "request body" if first["type"] == "json_invalid" else where_of(first["loc"])
    return f"{where}: {first['detail']}", out
