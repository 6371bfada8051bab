"""Issue 24 item 5: ``/metrics`` shows every team's job counts, so with ``EVALPLAN_AUTH=required`` it
needs ``Authorization: Bearer <EVALPLAN_METRICS_TOKEN>`` (or the bootstrap admin token); a team's
token, none, or a wrong one is 401 problem+json. The metrics token opens nothing else."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from evalplan.main import create_app
from support.helpers import NoJobsDispatcher, assert_problem, settings_for
from support.teams import ADMIN_TOKEN, bearer, make_teams

METRICS_TOKEN = "metrics-scraper-token-0123456789abcdef"


@pytest.fixture
def auth_app(db_session_factory: sessionmaker[Session], database_urls: dict[str, str], backend: str) -> Iterator[FastAPI]:
    yield create_app(settings_for(database_urls[backend], auth="required", admin_token=ADMIN_TOKEN,
                                  metrics_token=METRICS_TOKEN),
                     session_factory=db_session_factory, dispatcher=NoJobsDispatcher())


def test_metrics_need_the_metrics_token_when_auth_is_required(auth_app: FastAPI) -> None:
    teams = make_teams(auth_app)
    try:
        for client, headers in ((teams.anonymous, {}), (teams.a, {}), (teams.anonymous, bearer("nope")),
                                (teams.anonymous, {"Authorization": "Basic eDp5"})):
            r = client.get("/metrics", headers=headers)
            body = assert_problem(r, 401)
            assert "EVALPLAN_METRICS_TOKEN" in body["detail"]
            assert r.headers["www-authenticate"].startswith("Bearer")
            assert "evalplan_jobs" not in r.text
        for token in (METRICS_TOKEN, ADMIN_TOKEN):
            r = teams.anonymous.get("/metrics", headers=bearer(token))
            assert r.status_code == 200 and "evalplan_http_requests_total" in r.text
        # the metrics token is not an API token
        assert_problem(teams.anonymous.get("/v1/benchmarks", headers=bearer(METRICS_TOKEN)), 401)
    finally:
        teams.close()


def test_without_a_metrics_token_only_the_admin_token_reads_metrics(
        db_session_factory: sessionmaker[Session], database_urls: dict[str, str], backend: str) -> None:
    app = create_app(settings_for(database_urls[backend], auth="required", admin_token=ADMIN_TOKEN),
                     session_factory=db_session_factory, dispatcher=NoJobsDispatcher())
    with TestClient(app, raise_server_exceptions=False) as c:
        assert_problem(c.get("/metrics"), 401)
        assert c.get("/metrics", headers=bearer(ADMIN_TOKEN)).status_code == 200


def test_metrics_stay_open_with_auth_off(client: TestClient) -> None:
    assert client.get("/metrics").status_code == 200
