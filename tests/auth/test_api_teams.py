"""Teams and tokens (API.md "Teams and tokens"): authentication, scopes, ownership and visibility,
names per team, the audit log. Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import ApiToken
from evalplan.main import create_app
from support.helpers import NoJobsDispatcher, assert_problem, settings_for, upload_matrix
from support.teams import ADMIN_TOKEN, Teams, bearer, client_with, make_teams, make_token


@pytest.fixture
def auth_app(db_session_factory: sessionmaker[Session], database_urls: dict[str, str], backend: str) -> FastAPI:
    return create_app(settings_for(database_urls[backend], auth="required", admin_token=ADMIN_TOKEN,
                                   auth_failures_per_minute=5),
                      session_factory=db_session_factory, dispatcher=NoJobsDispatcher())


@pytest.fixture
def teams(auth_app: FastAPI) -> Iterator[Teams]:
    made = make_teams(auth_app)
    yield made
    made.close()


def small_matrix(seed: int = 0) -> tuple[np.ndarray, list[str], list[str]]:
    rng = np.random.default_rng(seed)
    return (rng.random((6, 12)) < 0.5).astype(float), [f"m{i}" for i in range(6)], [f"q{j}" for j in range(12)]


# --------------------------------------------------------------------------- authentication


def test_health_needs_no_token_and_v1_does(teams: Teams) -> None:
    assert teams.anonymous.get("/health").status_code == 200
    r = teams.anonymous.get("/v1/benchmarks")
    body = assert_problem(r, 401)
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert "token" in body["detail"]


@pytest.mark.parametrize("header", ["Bearer evp_not-a-real-token", "Basic dXNlcjpwYXNz", "Bearer "])
def test_unknown_or_malformed_token_is_401(auth_app: FastAPI, teams: Teams, header: str) -> None:
    r = client_with(auth_app, None).get("/v1/benchmarks", headers={"Authorization": header})
    assert_problem(r, 401)
    assert "www-authenticate" in r.headers


def test_token_is_shown_once_stored_as_hash_and_256_bits(teams: Teams, db_session_factory: sessionmaker[Session]
                                                         ) -> None:
    secret = teams.a_token["token"]
    assert secret.startswith("evp_") and len(secret) >= 4 + 43  # token_urlsafe(32): 256 bits
    listed = teams.a.get("/v1/teams/alpha/tokens").json()["items"]
    assert {t["name"] for t in listed} == {"alpha-ci", "alpha-reader"}
    assert all("token" not in t for t in listed)
    with db_session_factory() as session:
        stored = session.scalars(select(ApiToken).where(ApiToken.id == teams.a_token["id"])).one()
        assert stored.token_hash != secret and len(stored.token_hash) == 64 and secret not in str(stored.__dict__)


def test_revoked_and_expired_tokens_are_401(auth_app: FastAPI, teams: Teams) -> None:
    extra = make_token(teams.admin, "alpha", ["read"], "short-lived")
    c = client_with(auth_app, extra["token"])
    assert c.get("/v1/benchmarks").status_code == 200
    assert teams.a.delete(f"/v1/teams/alpha/tokens/{extra['id']}").status_code == 204
    assert_problem(c.get("/v1/benchmarks"), 401)

    soon = make_token(teams.admin, "alpha", ["read"], "expiring",
                      expires_at=(datetime.now(UTC) + timedelta(seconds=1)).isoformat())
    c = client_with(auth_app, soon["token"])
    assert c.get("/v1/benchmarks").status_code == 200
    import time
    time.sleep(1.2)
    assert_problem(c.get("/v1/benchmarks"), 401)
    past = teams.admin.post("/v1/teams/alpha/tokens", json={"name": "x", "scopes": ["read"],
                                                            "expires_at": "2020-01-01T00:00:00Z"})
    assert_problem(past, 422)


def test_missing_scope_is_403(teams: Teams) -> None:
    body = assert_problem(teams.a_read.post("/v1/benchmarks", json={"name": "nope"}), 403)
    assert "write" in body["detail"]
    assert teams.a_read.get("/v1/benchmarks").status_code == 200
    assert_problem(teams.a_read.get("/v1/audit"), 403)  # admin scope
    assert_problem(teams.a_read.post("/v1/teams/alpha/tokens", json={"name": "x", "scopes": ["read"]}), 403)


def test_team_tokens_cannot_create_teams_or_manage_other_teams(teams: Teams) -> None:
    assert_problem(teams.a.post("/v1/teams", json={"name": "gamma"}), 403)
    assert_problem(teams.a.post("/v1/teams/beta/tokens", json={"name": "x", "scopes": ["read"]}), 404)
    assert_problem(teams.a.delete(f"/v1/teams/beta/tokens/{teams.b_token['id']}"), 404)
    assert_problem(teams.a.delete(f"/v1/teams/alpha/tokens/{teams.b_token['id']}"), 404)
    assert [t["name"] for t in teams.a.get("/v1/teams").json()["items"]] == ["alpha"]
    assert {t["name"] for t in teams.admin.get("/v1/teams").json()["items"]} >= {"alpha", "beta", "local"}
    assert_problem(teams.admin.post("/v1/teams", json={"name": "alpha"}), 409)


def test_failed_attempts_are_rate_limited_per_address(auth_app: FastAPI, teams: Teams) -> None:
    bad = client_with(auth_app, "evp_wrong")
    for _ in range(5):
        assert_problem(bad.get("/v1/benchmarks"), 401)
    r = bad.get("/v1/benchmarks")
    assert_problem(r, 429)
    assert int(r.headers["retry-after"]) >= 1
    # the limit is per client address: even a good token from that address waits
    assert_problem(teams.a.get("/v1/benchmarks"), 429)


def test_failed_attempts_are_limited_across_processes_through_redis(
        db_session_factory: sessionmaker[Session], database_urls: dict[str, str], backend: str, redis_db: str) -> None:
    """Two API processes (two apps, each with its own limiter object) sharing one Redis: failures at
    either count towards the one per-address limit; without Redis each process counts alone."""
    def app_with(redis_url: str | None) -> FastAPI:
        return create_app(settings_for(database_urls[backend], auth="required", admin_token=ADMIN_TOKEN,
                                       auth_failures_per_minute=4, redis_url=redis_url),
                          session_factory=db_session_factory, dispatcher=NoJobsDispatcher())

    first, second = app_with(redis_db), app_with(redis_db)
    bad1, bad2 = client_with(first, "evp_wrong-1"), client_with(second, "evp_wrong-2")
    for client in (bad1, bad2, bad1, bad2):
        assert_problem(client.get("/v1/benchmarks"), 401)
    for client in (bad1, bad2):  # 4 failures in all: both processes now refuse the address
        r = client.get("/v1/benchmarks")
        assert_problem(r, 429)
        assert 1 <= int(r.headers["retry-after"]) <= 61
    admin = client_with(second, ADMIN_TOKEN)
    assert_problem(admin.get("/v1/teams"), 429)  # per address: even a good token waits
    import redis

    keys = redis.Redis.from_url(redis_db).keys("evalplan:auth-failures/*")  # limits' moving-window key
    assert [k.decode().split("/")[1] for k in keys] == ["testclient"]
    # the embedded default (no Redis): each process keeps its own count
    local1, local2 = app_with(None), app_with(None)
    l1, l2 = client_with(local1, "evp_wrong"), client_with(local2, "evp_wrong")
    for _ in range(4):
        assert_problem(l1.get("/v1/benchmarks"), 401)
    assert_problem(l1.get("/v1/benchmarks"), 429)
    assert_problem(l2.get("/v1/benchmarks"), 401)


def test_limiter_falls_back_to_the_process_count_when_redis_is_down(
        db_session_factory: sessionmaker[Session], database_urls: dict[str, str], backend: str) -> None:
    app = create_app(settings_for(database_urls[backend], auth="required", admin_token=ADMIN_TOKEN,
                                  auth_failures_per_minute=3, redis_url="redis://127.0.0.1:1/0"),
                     session_factory=db_session_factory, dispatcher=NoJobsDispatcher())
    bad = client_with(app, "evp_wrong")
    for _ in range(3):
        assert_problem(bad.get("/v1/benchmarks"), 401)
    assert_problem(bad.get("/v1/benchmarks"), 429)


def test_auth_off_needs_no_token(client: TestClient) -> None:
    r = client.post("/v1/benchmarks", json={"name": "embedded"})
    assert r.status_code == 201 and r.json()["team"] == "local" and r.json()["visibility"] == "private"


# --------------------------------------------------------------------------- ownership and visibility


def test_private_is_404_and_absent_from_lists(teams: Teams) -> None:
    values, models, items = small_matrix()
    upload_matrix(teams.a, "secret-bench", values, models, items)
    a_bench = teams.a.get("/v1/benchmarks/secret-bench").json()
    assert a_bench["team"] == "alpha" and a_bench["visibility"] == "private"
    for path in ("/v1/benchmarks/secret-bench", f"/v1/benchmarks/{a_bench['id']}", "/v1/benchmarks/alpha%2Fsecret-bench",
                 "/v1/benchmarks/secret-bench/items", "/v1/benchmarks/secret-bench/scores", "/v1/models/m0"):
        body = assert_problem(teams.b.get(path), 404)
        assert "alpha" not in body["detail"] or "alpha" in path  # never names the owner
    assert teams.b.get("/v1/benchmarks").json()["items"] == []
    assert teams.b.get("/v1/models").json()["items"] == []
    assert teams.a_read.get("/v1/benchmarks/secret-bench").status_code == 200


def test_public_is_readable_and_not_writable(teams: Teams) -> None:
    values, models, items = small_matrix()
    upload_matrix(teams.a, "shared", values, models, items)
    r = teams.a.patch("/v1/benchmarks/shared", json={"visibility": "public"})
    assert r.status_code == 200 and r.json()["visibility"] == "public"
    assert teams.b.get("/v1/benchmarks/shared").json()["team"] == "alpha"
    assert [b["name"] for b in teams.b.get("/v1/benchmarks").json()["items"]] == ["shared"]
    assert teams.b.get("/v1/benchmarks/shared/scores").status_code == 200
    assert_problem(teams.b.post("/v1/benchmarks/shared/items", content=b'{"id": "x", "prompt": "p"}\n',
                                headers={"content-type": "application/x-ndjson"}), 403)
    assert_problem(teams.b.post("/v1/benchmarks/shared/scores", json=[{"model": "m0", "item": "q0", "score": 1}]),
                   403)
    assert_problem(teams.b.patch("/v1/benchmarks/shared", json={"visibility": "private"}), 403)
    # the models that label a public benchmark's scores are readable (they can be reference models)
    assert teams.b.get("/v1/models/m0").json()["team"] == "alpha"
    assert_problem(teams.b.patch("/v1/models/m0", json={"visibility": "public"}), 403)
    # a session of beta on alpha's public benchmark is beta's own
    s = teams.b.post("/v1/sessions", json={"benchmark": "shared", "target": "m5",
                                           "reference_models": ["m0", "m1", "m2", "m3", "m4"]})
    assert s.status_code == 201, s.text
    assert teams.b.get(f"/v1/sessions/{s.json()['id']}").status_code == 200
    assert_problem(teams.a.get(f"/v1/sessions/{s.json()['id']}"), 404)
    # ... and alpha can no longer make the benchmark private under it
    assert_problem(teams.a.patch("/v1/benchmarks/shared", json={"visibility": "private"}), 409)


def test_names_are_unique_per_team_and_resolve_own_first(teams: Teams) -> None:
    assert teams.a.post("/v1/benchmarks", json={"name": "mmlu", "visibility": "public"}).status_code == 201
    own = teams.b.post("/v1/benchmarks", json={"name": "mmlu"})
    assert own.status_code == 201  # the same name in another team
    assert_problem(teams.b.post("/v1/benchmarks", json={"name": "mmlu"}), 409)
    assert teams.b.get("/v1/benchmarks/mmlu").json()["id"] == own.json()["id"]  # own first
    assert teams.b.get("/v1/benchmarks/alpha%2Fmmlu").json()["team"] == "alpha"  # team/name always works
    assert teams.a.get("/v1/benchmarks/mmlu").json()["team"] == "alpha"


def test_ambiguous_public_name_is_409_with_candidates(teams: Teams) -> None:
    r = teams.admin.post("/v1/teams", json={"name": "gamma"})
    assert r.status_code == 201
    for client in (teams.a, teams.b):
        assert client.post("/v1/benchmarks", json={"name": "arc", "visibility": "public"}).status_code == 201
    gamma = client_with(teams.admin.app, make_token(teams.admin, "gamma", ["write"])["token"])
    body = assert_problem(gamma.get("/v1/benchmarks/arc"), 409)
    assert body["errors"][0]["candidates"] == ["alpha/arc", "beta/arc"]
    assert gamma.get("/v1/benchmarks/beta%2Farc").json()["team"] == "beta"
    # in a body, team/name needs no encoding
    s = gamma.post("/v1/sessions", json={"benchmark": "alpha/arc", "target": "x"})
    assert s.status_code in (404, 422), s.text  # resolved (then rejected for having no scores), not 409


def test_audit_log_records_who_did_what(teams: Teams) -> None:
    teams.a.post("/v1/benchmarks", json={"name": "audited"})
    teams.a.patch("/v1/benchmarks/audited", json={"visibility": "public"})
    entries = teams.a.get("/v1/audit").json()["items"]
    actions = [(e["action"], e["resource_type"], e["actor"]) for e in entries]
    assert ("visibility", "benchmark", "alpha-ci") in actions
    assert ("create", "benchmark", "alpha-ci") in actions
    assert all(e["team"] == "alpha" for e in entries)
    assert teams.b.get("/v1/audit").json()["items"] == [] or all(
        e["team"] == "beta" for e in teams.b.get("/v1/audit").json()["items"])
    assert teams.admin.get("/v1/audit", params={"team": "alpha"}).json()["items"][0]["action"] == "visibility"


def test_audit_log_records_implicit_creates_and_every_visibility_change(teams: Teams) -> None:
    """Benchmarks and models a score upload or an import creates are audited like explicit creates;
    sessions and selections too, and their visibility PATCHes."""
    values, models, items = small_matrix()
    upload_matrix(teams.a, "implicit", values, models, items)
    entries = teams.a.get("/v1/audit", params={"limit": 1000}).json()["items"]
    created = {(e["resource_type"], e["detail"].get("name")) for e in entries if e["action"] == "create"}
    assert ("benchmark", "implicit") in created
    assert {("model", m) for m in models} <= created
    assert all(e["detail"]["via"] == "score upload" for e in entries if e["resource_type"] == "model")
    s = teams.a.post("/v1/sessions", json={"benchmark": "implicit", "target": "m5", "visibility": "public",
                                           "reference_models": ["m0", "m1", "m2", "m3", "m4"]})
    assert s.status_code == 201 and s.json()["visibility"] == "public" and s.json()["team"] == "alpha"
    assert teams.b.get(f"/v1/sessions/{s.json()['id']}").status_code == 200  # public on create
    assert teams.a.patch(f"/v1/sessions/{s.json()['id']}", json={"visibility": "private"}).json()[
        "visibility"] == "private"
    assert_problem(teams.b.get(f"/v1/sessions/{s.json()['id']}"), 404)
    assert_problem(teams.a.patch(f"/v1/sessions/{s.json()['id']}", json={"visibility": "secret"}), 422)
    entries = teams.a.get("/v1/audit").json()["items"]
    assert (entries[0]["action"], entries[0]["resource_type"], entries[0]["detail"]) == (
        "visibility", "session", {"was": "public", "now": "private"})
    assert ("create", "session") in {(e["action"], e["resource_type"]) for e in entries}


def test_idempotency_keys_are_per_credential(teams: Teams) -> None:
    key = {"Idempotency-Key": "same-key"}
    r1 = teams.a.post("/v1/benchmarks", json={"name": "idem"}, headers=key)
    r2 = teams.b.post("/v1/benchmarks", json={"name": "idem"}, headers=key)
    assert r1.status_code == r2.status_code == 201
    assert r1.json()["team"] == "alpha" and r2.json()["team"] == "beta"
    assert teams.a.post("/v1/benchmarks", json={"name": "idem"}, headers=key).headers.get("idempotent-replayed")


def test_bearer_header_wins_over_cookie_and_cookie_alone_works(auth_app: FastAPI, teams: Teams) -> None:
    c = client_with(auth_app, None)
    c.cookies.set("evalplan_token", teams.a_token["token"])
    assert c.get("/v1/benchmarks").status_code == 200
    assert_problem(c.get("/v1/benchmarks", headers=bearer("evp_bad")), 401)


# --------------------------------------------------------------------------- pages under EVALPLAN_AUTH=required


def test_pages_sign_in_with_a_token_kept_in_a_strict_httponly_cookie(auth_app: FastAPI, teams: Teams) -> None:
    values, models, items = small_matrix()
    upload_matrix(teams.a, "paged", values, models, items)
    browser = client_with(auth_app, None)
    r = browser.get("/ui/benchmarks/paged", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login?next=/ui/benchmarks/paged"
    form = browser.get("/ui/login", params={"next": "/ui/benchmarks/paged"})
    assert form.status_code == 200 and 'name="token"' in form.text
    bad = browser.post("/ui/login", data={"token": "evp_wrong", "next": "/ui/"}, follow_redirects=False)
    assert bad.status_code == 401 and "unknown" in bad.text
    ok = browser.post("/ui/login", data={"token": teams.a_token["token"], "next": "https://evil.example/"},
                      follow_redirects=False)
    assert ok.status_code == 303 and ok.headers["location"] == "/ui/"  # no open redirect
    cookie = ok.headers["set-cookie"].lower()
    assert "evalplan_token=" in cookie and "httponly" in cookie and "samesite=strict" in cookie
    page = browser.get("/ui/")
    assert page.status_code == 200 and "paged" in page.text
    assert browser.get("/v1/benchmarks/paged/scores").status_code == 200  # the page's own fetches
    beta = client_with(auth_app, None)
    beta.post("/ui/login", data={"token": teams.b_token["token"], "next": "/ui/"})
    assert beta.get("/ui/benchmarks/paged").status_code == 404
    assert "paged" not in beta.get("/ui/").text
    browser.get("/ui/logout")
    assert browser.get("/ui/", follow_redirects=False).status_code == 303


def test_deletes_follow_ownership(teams: Teams) -> None:
    values, models, items = small_matrix()
    upload_matrix(teams.a, "owned", values, models, items)
    teams.a.patch("/v1/benchmarks/owned", json={"visibility": "public"})
    assert_problem(teams.b.delete("/v1/benchmarks/owned"), 403)
    assert_problem(teams.b.delete("/v1/models/m0"), 403)
    assert_problem(teams.a_read.delete("/v1/benchmarks/owned"), 403)  # scope
    s = teams.b.post("/v1/sessions", json={"benchmark": "owned", "target": "m5",
                                           "reference_models": ["m0", "m1", "m2", "m3", "m4"]})
    assert_problem(teams.a.delete(f"/v1/sessions/{s.json()['id']}"), 404)
    assert_problem(teams.a.delete("/v1/benchmarks/owned"), 409)  # beta's session is built on it
    assert teams.b.delete(f"/v1/sessions/{s.json()['id']}").status_code == 204
    assert teams.a.delete("/v1/benchmarks/owned").status_code == 204
    assert_problem(teams.b.get("/v1/benchmarks/owned"), 404)
