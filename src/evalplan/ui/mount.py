"""Attach the pages, their static files and the offline API docs to the app."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from evalplan.ui.docs import install_offline_docs
from evalplan.ui.pages import benchmarks, compare, coresets, home, jobs, leaderboard, login, plans, sessions, similarity
from evalplan.ui.routing import unknown_page_router
from evalplan.ui.templating import STATIC_DIR, STATIC_PREFIX


def install_ui(app: FastAPI) -> None:
    """Static assets, /docs + /redoc, the page routers and, last, the HTML 404 for other /ui paths."""
    app.mount(STATIC_PREFIX, StaticFiles(directory=STATIC_DIR), name="ui-static")
    install_offline_docs(app)
    for pages in (login, home, leaderboard, compare, benchmarks, sessions, coresets, jobs, plans, similarity):
        app.include_router(pages.router)
    app.include_router(unknown_page_router())
