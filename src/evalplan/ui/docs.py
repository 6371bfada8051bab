"""Swagger UI and ReDoc served from a PyPI package, so ``/docs`` and ``/redoc`` work offline.

FastAPI's defaults load both from a CDN: on an air-gapped cluster ``/docs`` is a blank page.
The assets come from the ``fastapi-offline`` wheel (Swagger UI 5, which renders the OpenAPI 3.1
that FastAPI emits, and the ReDoc standalone bundle); ``swagger-ui-bundle`` was rejected because
it ships Swagger UI 4, which cannot render OpenAPI 3.1. See docs/DECISIONS.md.

The ReDoc bundle hard-codes one remote image (the "API docs by Redocly" logo); it is served
with that URL replaced by an empty inline SVG, so the page makes no request off the machine.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from evalplan.ui.templating import STATIC_PREFIX, root_path

ASSETS_PREFIX = "/ui/vendor/api-docs"
SWAGGER_UI_PARAMETERS = {
    "validatorUrl": None,  # the default asks validator.swagger.io for a badge: no network at run time
    "deepLinking": True,
    "displayRequestDuration": True,
    "tryItOutEnabled": True,
}
REDOC_REMOTE_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
EMPTY_SVG = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'/%3E"


def assets_dir() -> Path:
    """The folder of swagger-ui-bundle.js, swagger-ui.css and redoc.standalone.js in the wheel."""
    return Path(str(files("fastapi_offline") / "static"))


@lru_cache(maxsize=1)
def redoc_bundle() -> bytes:
    """redoc.standalone.js with its one remote URL (the footer logo) replaced by an inline SVG."""
    return (assets_dir() / "redoc.standalone.js").read_text(encoding="utf-8").replace(
        REDOC_REMOTE_LOGO, EMPTY_SVG).encode()


def install_offline_docs(app: FastAPI, *, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Mount the assets and add the two docs pages (build the app with docs_url=redoc_url=None)."""
    @app.get(f"{ASSETS_PREFIX}/redoc.standalone.js", include_in_schema=False)
    async def redoc_script() -> Response:  # before the mount, which would serve the file as shipped
        return Response(redoc_bundle(), media_type="text/javascript",
                        headers={"Cache-Control": "public, max-age=86400"})

    app.mount(ASSETS_PREFIX, StaticFiles(directory=assets_dir()), name="api-docs-assets")
    oauth2_redirect_url = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = root_path(request)
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{oauth2_redirect_url}",
            swagger_js_url=f"{root}{ASSETS_PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{root}{STATIC_PREFIX}/favicon.svg",
            swagger_ui_parameters=SWAGGER_UI_PARAMETERS)

    @app.get(oauth2_redirect_url, include_in_schema=False)
    async def swagger_ui_oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(redoc_url, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = root_path(request)
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_PREFIX}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{STATIC_PREFIX}/favicon.svg", with_google_fonts=False)
