"""Fixtures' helpers for the teams tests: an app with ``EVALPLAN_AUTH=required`` and one client per token.

``make_teams(app)``: the bootstrap admin creates teams ``alpha`` and ``beta`` and, for each, a
``write``+``admin`` token and a ``read`` token; every client sends its token on every request.
``no_jobs_teams``: the ``teams`` fixture of that app on the test's backend, jobs never dispatched (import it into
a test module that needs it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from evalplan.main import create_app
from support.helpers import NoJobsDispatcher, settings_for

ADMIN_TOKEN = "bootstrap-admin-token-for-tests-0123456789abcdef"


@dataclass
class Teams:
    admin: TestClient
    anonymous: TestClient
    a: TestClient
    b: TestClient
    a_read: TestClient
    a_token: dict[str, Any]
    b_token: dict[str, Any]
    a_read_token: dict[str, Any]

    def close(self) -> None:
        self.admin.__exit__(None, None, None)  # the one client that ran the app's lifespan


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def client_with(app: FastAPI, token: str | None, *, enter: bool = False) -> TestClient:
    c = TestClient(app, raise_server_exceptions=False, headers=bearer(token) if token else None)
    if enter:
        c.__enter__()
    return c


def make_token(admin: TestClient, team: str, scopes: list[str], name: str | None = None,
               **fields: Any) -> dict[str, Any]:
    r = admin.post(f"/v1/teams/{team}/tokens", json={"name": name or f"{team}-{'-'.join(scopes)}", "scopes": scopes,
                                                     **fields})
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


def make_teams(app: FastAPI) -> Teams:
    admin = client_with(app, ADMIN_TOKEN, enter=True)
    for name in ("alpha", "beta"):
        r = admin.post("/v1/teams", json={"name": name})
        assert r.status_code == 201, r.text
    a_token = make_token(admin, "alpha", ["write", "admin"], "alpha-ci")
    b_token = make_token(admin, "beta", ["write", "admin"], "beta-ci")
    a_read = make_token(admin, "alpha", ["read"], "alpha-reader")
    return Teams(admin=admin, anonymous=client_with(app, None), a=client_with(app, a_token["token"]),
                 b=client_with(app, b_token["token"]), a_read=client_with(app, a_read["token"]), a_token=a_token,
                 b_token=b_token, a_read_token=a_read)


@pytest.fixture(name="teams")
def no_jobs_teams(db_session_factory: sessionmaker[Session], database_urls: dict[str, str],
                  backend: str) -> Iterator[Teams]:
    """Two teams on an ``EVALPLAN_AUTH=required`` app of the test's backend whose jobs are never dispatched."""
    app = create_app(settings_for(database_urls[backend], auth="required", admin_token=ADMIN_TOKEN),
                     session_factory=db_session_factory, dispatcher=NoJobsDispatcher())
    made = make_teams(app)
    yield made
    made.close()
