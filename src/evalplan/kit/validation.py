"""Checks and conversions every domain shares: finite numbers for JSON, and method parameters.

``ParamSpec`` (declared in ``evalplan.core.selection.base``, because the selectors carry their ``PARAMS``)
is the one parameter-spec type; :func:`check_params` is the one checker of user-given parameters
against it, used by every coreset family and by backtests.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from evalplan.core.selection.base import DEFAULT_INT_MAXIMUM, ParamSpec
from evalplan.kit import input_guard
from evalplan.kit.errors import ErrorCollector, InvalidInput

__all__ = ["ParamSpec", "check_params", "finite_or_none", "json_safe", "load_json"]


def load_json(data: bytes) -> Any:
    """The parsed JSON body (strict: :func:`evalplan.kit.input_guard.loads`); 422 ``malformed JSON`` (at no row or
    column) when it is not JSON."""
    try:
        return input_guard.loads(data)
    except input_guard.InputRejected as exc:
        parts = exc.parts
        row = parts[0] if parts and isinstance(parts[0], int) else None
        column = ".".join(str(p) for p in parts[1 if row is not None else 0:]) or None
        raise InvalidInput(exc.detail, [{"row": row, "column": column, "detail": exc.errors[0]["detail"]}]) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"malformed JSON: {exc}", [{"row": None, "column": None, "detail": str(exc)}]) from None


def finite_or_none(value: Any) -> float | None:
    """``float(value)``, or None for None, NaN and infinities (JSON has no such numbers)."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def json_safe(value: Any) -> Any:
    """``value`` with numpy scalars made plain and every non-finite float replaced by None, recursively."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return finite_or_none(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def _type_names(types: tuple[type, ...]) -> str:
    return "/".join(t.__name__ for t in types)


def value_problem(spec: ParamSpec, value: Any) -> str | None:
    """Why ``value`` does not fit ``spec`` (type, then choices and minimum), or None when it does.

    ``bool`` is never accepted for a numeric parameter; an ``int`` is accepted for a ``float`` one."""
    if value is None:
        return None if spec.nullable else "must not be null"
    types = spec.type if isinstance(spec.type, tuple) else (spec.type,)
    fits = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not fits and float in types and isinstance(value, int) and not isinstance(value, bool):
        fits = True
    if not fits:
        return f"must be of type {_type_names(types)}"
    if spec.choices and value not in spec.choices:
        return f"must be one of {list(spec.choices)}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            return "must be finite"
        if spec.minimum is not None:
            if spec.exclusive_minimum and not value > spec.minimum:
                return f"must be > {spec.minimum:g}"
            if not spec.exclusive_minimum and value < spec.minimum:
                return f"must be >= {spec.minimum:g}"
        maximum = spec.maximum if spec.maximum is not None else (
            DEFAULT_INT_MAXIMUM if isinstance(value, int) else None)
        if maximum is not None and value > maximum:
            return f"must be <= {maximum:g}"
    return None


def check_params(specs: Mapping[str, ParamSpec], params: Mapping[str, Any], *, method: str,
                 field: str = "params") -> dict[str, Any]:
    """422 unless every parameter is one of ``specs`` and fits it (errors located at ``field.<name>``).

    Returns the parameters as given; value rules a spec cannot express (e.g. a selector's
    ``validate_params``) are the caller's."""
    unknown = sorted(set(params) - set(specs))
    if unknown:
        raise InvalidInput(
            f"unknown parameter(s) {unknown} for method {method!r}; valid parameters: {sorted(specs) or 'none'}",
            [{"field": f"{field}.{p}", "detail": f"valid: {sorted(specs)}"} for p in unknown])
    errors = ErrorCollector()
    for name, value in params.items():
        problem = value_problem(specs[name], value)
        if problem is not None:
            errors.add(f"{name} {problem} (got {value!r}); {specs[name].description}", field=f"{field}.{name}")
    errors.raise_if_any(f"invalid parameters for {method!r}")
    return dict(params)


def check_selector_params(cls: Any, params: Mapping[str, Any], seed: int, *, method: str,
                          field: str = "params") -> dict[str, Any]:
    """:func:`check_params` against ``cls.PARAMS``, then the selector's own ``validate_params``
    (constructed with ``k=1``): the checks of a coreset request and of a backtest alike."""
    checked = check_params(getattr(cls, "PARAMS", {}), params, method=method, field=field)
    try:
        cls(k=1, seed=seed, **checked).validate_params()
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"invalid parameters for {method!r}: {exc}", [{"field": field,
                                                                          "detail": str(exc)}]) from None
    return checked
