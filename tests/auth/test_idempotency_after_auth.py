"""Issue 24 item 2: ``Idempotency-Key`` is looked at only after the credential is: a bad or revoked
token's keyed POST is 401 (never a replay) and stores no idempotency record; keys are scoped to the
caller (team and token), so another token's same key is another request."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import IdempotencyRecord
from evalplan.main import create_app
from support.helpers import NoJobsDispatcher, assert_problem, count_rows, settings_for
from support.teams import ADMIN_TOKEN, bearer, client_with, make_teams, make_token


@pytest.fixture
def auth_app(committed_session_factory: sessionmaker[Session], database_urls: dict[str, str],
             backend: str) -> Iterator[FastAPI]:
    yield create_app(settings_for(database_urls[backend], auth="required", admin_token=ADMIN_TOKEN,
                                  auth_failures_per_minute=1000),
                     session_factory=committed_session_factory, dispatcher=NoJobsDispatcher())


def test_bad_tokens_store_no_keys_and_a_revoked_token_is_never_replayed(
        auth_app: FastAPI, committed_session_factory: sessionmaker[Session]) -> None:
    teams = make_teams(auth_app)
    try:
        before = count_rows(committed_session_factory, IdempotencyRecord)
        for i in range(50):
            r = teams.anonymous.post("/v1/benchmarks", json={"name": f"b{i}"},
                                     headers={**bearer("nope"), "Idempotency-Key": f"k{i}"})
            assert_problem(r, 401)
        assert count_rows(committed_session_factory, IdempotencyRecord) == before  # before: 50 rows

        token = make_token(teams.admin, "alpha", ["write"], "short-lived")
        c = client_with(auth_app, token["token"])
        first = c.post("/v1/benchmarks", json={"name": "keyed"}, headers={"Idempotency-Key": "same"})
        assert first.status_code == 201, first.text
        again = c.post("/v1/benchmarks", json={"name": "keyed"}, headers={"Idempotency-Key": "same"})
        assert again.status_code == 201 and again.headers.get("idempotent-replayed") == "true"
        assert teams.admin.delete(f"/v1/teams/alpha/tokens/{token['id']}").status_code == 204
        revoked = c.post("/v1/benchmarks", json={"name": "keyed"}, headers={"Idempotency-Key": "same"})
        assert_problem(revoked, 401)  # before: 201, replayed
        # another token of the same team: its own key space
        other = teams.a.post("/v1/benchmarks", json={"name": "keyed"}, headers={"Idempotency-Key": "same"})
        assert other.status_code == 409 and "idempotent-replayed" not in other.headers, other.text
    finally:
        teams.close()
