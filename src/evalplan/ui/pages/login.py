"""``/ui/login`` and ``/ui/logout``: the pages under ``EVALPLAN_AUTH=required`` (docs/SECURITY.md).

The token entered once is checked like a Bearer header and kept in the ``evalplan_token`` cookie
(HttpOnly, SameSite=Strict, Secure over HTTPS); ``evalplan.auth.caller`` reads it when a request has no
``Authorization`` header. A page answered 401 redirects here (``evalplan.ui.routing.PageRoute``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Form, Request
from fastapi.responses import RedirectResponse, Response

from evalplan.auth.caller import TOKEN_COOKIE, Unauthorized, token_caller
from evalplan.ui.routing import page_router
from evalplan.ui.templating import render, root_path

router = page_router()
COOKIE_MAX_AGE = 12 * 3600


def safe_next(value: str | None) -> str:
    """Only a local page path (no open redirect to another site)."""
    if value and value.startswith("/ui/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/ui/"


@router.get("/ui/login")
def login_form(request: Request, next: str | None = None) -> Response:  # noqa: A002 - the query name
    required = request.app.state.settings.auth == "required"
    return render(request, "login.html", required=required, next=safe_next(next), error=None)


@router.post("/ui/login")
def login(request: Request, token: Annotated[str, Form()], next: Annotated[str, Form()] = "/ui/") -> Response:  # noqa: A002
    try:
        token_caller(request, token.strip())
    except Unauthorized:
        return render(request, "login.html", status_code=401, required=True, next=safe_next(next),
                      error="This token is unknown, revoked or expired.")
    response = RedirectResponse(f"{root_path(request)}{safe_next(next)}", status_code=303)
    response.set_cookie(TOKEN_COOKIE, token.strip(), max_age=COOKIE_MAX_AGE, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/")
    return response


@router.get("/ui/logout")
def logout(request: Request) -> Response:
    response = RedirectResponse(f"{root_path(request)}/ui/login", status_code=303)
    response.delete_cookie(TOKEN_COOKIE, path="/")
    return response
