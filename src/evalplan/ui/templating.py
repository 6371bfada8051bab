"""Jinja2 templates for the pages: one environment, a few formatting filters, one render call."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from evalplan import __version__

UI_DIR = Path(__file__).parent
TEMPLATES_DIR = UI_DIR / "templates"
STATIC_DIR = UI_DIR / "static"
STATIC_PREFIX = "/ui/static"


def format_number(value: Any, digits: int = 3) -> str:
    """A score or statistic for a table cell: ``digits`` significant decimals, '-' when missing."""
    if value is None or isinstance(value, bool):
        return "-" if value is None else str(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(number):
        return "-"
    if number == int(number) and abs(number) < 1e15 and isinstance(value, int):
        return f"{int(number):,}"
    return f"{number:.{digits}f}"


def format_percent(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{100 * float(value):.{digits}f}%"


def format_when(value: Any) -> str:
    """A timestamp as ``YYYY-MM-DD HH:MM UTC`` (ISO strings and datetimes alike)."""
    if value is None:
        return "-"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    return f"{value:%Y-%m-%d %H:%M} UTC" if isinstance(value, datetime) else str(value)


templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
templates.env.filters.update(number=format_number, percent=format_percent, when=format_when)
templates.env.globals.update(version=__version__)


def root_path(request: Request) -> str:
    """The mount prefix behind a proxy ('' when served at the root)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def render(request: Request, template: str, *, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render ``template`` with the request, its root path and the static prefix in the context."""
    root = root_path(request)
    return templates.TemplateResponse(
        request, template, {"root": root, "static": f"{root}{STATIC_PREFIX}", **context},
        status_code=status_code, headers={"Cache-Control": "no-store"})
