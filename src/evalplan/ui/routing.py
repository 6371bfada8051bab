"""Page routes answer errors with HTML pages, not problem+json: a person is reading them."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from evalplan.kit.errors import EvalplanError
from evalplan.ui.templating import render, root_path


def error_page(request: Request, status: int, detail: str, title: str | None = None) -> Response:
    """The HTML error page (404 for unknown ids and paths, 4xx for bad query parameters)."""
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    return render(request, "error.html", status_code=status, status=status, title=title or phrase, detail=detail)


class PageRoute(APIRoute):
    """An APIRoute whose domain and validation errors become HTML error pages."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except EvalplanError as exc:
                if exc.status == 401:  # EVALPLAN_AUTH=required and no valid token: sign in first
                    target = quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
                    return RedirectResponse(f"{root_path(request)}/ui/login?next={target}", status_code=303)
                return error_page(request, exc.status, exc.detail, exc.title)
            except RequestValidationError as exc:
                first = exc.errors()[0] if exc.errors() else {}
                where = ".".join(str(p) for p in first.get("loc", ())) or "request"
                return error_page(request, 422, f"{where}: {first.get('msg', 'invalid')}", "Invalid request")
            except StarletteHTTPException as exc:
                return error_page(request, exc.status_code, str(exc.detail))

        return page_handler


def page_router() -> APIRouter:
    """A router for pages: HTML errors, and kept out of the OpenAPI schema."""
    return APIRouter(route_class=PageRoute, include_in_schema=False)


def unknown_page_router() -> APIRouter:
    """Registered last: any other ``/ui/...`` path is an HTML 404."""
    router = page_router()

    @router.get("/ui/{path:path}")
    async def unknown_page(request: Request, path: str) -> Response:
        return error_page(request, 404, f"There is no page at /ui/{path}.", "Page not found")

    return router
