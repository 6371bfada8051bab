"""Deleting a team (``DELETE /v1/teams/{team}``, docs/SECURITY.md): the bootstrap admin only, all or
nothing, refused with 409 while a published coreset, another team's work or a running job depends on
it, audited. SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import (
    ApiToken,
    Benchmark,
    BenchmarkModel,
    BenchmarkSelection,
    Coreset,
    CoresetItem,
    EvalSession,
    Item,
    Job,
    Model,
    Score,
    Team,
)
from evalplan.main import create_app
from evalplan.workers.dispatch import InProcessDispatcher
from support.helpers import assert_problem, settings_for, upload_matrix, wait_for_job
from support.teams import ADMIN_TOKEN, Teams, client_with, make_teams, make_token

OWNED = (Benchmark, Model, Coreset, EvalSession, Job, BenchmarkSelection)


@pytest.fixture
def jobs_app(committed_session_factory: sessionmaker[Session], database_urls: dict[str, str],
             backend: str) -> Iterator[FastAPI]:
    dispatcher = InProcessDispatcher(committed_session_factory, threads=2)
    yield create_app(settings_for(database_urls[backend], auth="required", admin_token=ADMIN_TOKEN),
                     session_factory=committed_session_factory, dispatcher=dispatcher)
    dispatcher.shutdown()


@pytest.fixture
def teams(jobs_app: FastAPI) -> Iterator[Teams]:
    made = make_teams(jobs_app)
    yield made
    made.close()


def team_rows(factory: sessionmaker[Session], team_id: str) -> dict[str, int]:
    with factory() as s:
        out = {cls.__name__: int(s.scalar(select(func.count()).select_from(cls).where(cls.team_id == team_id)) or 0)
               for cls in OWNED}
        out["ApiToken"] = int(s.scalar(select(func.count()).select_from(ApiToken)
                                       .where(ApiToken.team_id == team_id)) or 0)
        out["Team"] = int(s.scalar(select(func.count()).select_from(Team).where(Team.id == team_id)) or 0)
        return out


def all_rows(factory: sessionmaker[Session]) -> tuple[int, ...]:
    with factory() as s:
        return tuple(int(s.scalar(select(func.count()).select_from(cls)) or 0)
                     for cls in (*OWNED, Item, Score, BenchmarkModel, CoresetItem, ApiToken, Team))


def build(client, name: str, *, public: bool = False) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """A benchmark with scores, a ready coreset, a session and a benchmark selection of the client's team."""
    rng = np.random.default_rng(1)
    values = (rng.random((12, 24)) < rng.uniform(0.2, 0.8, (12, 1))).astype(float)
    models, items = [f"{name}-m{i}" for i in range(12)], [f"q{j}" for j in range(24)]
    upload_matrix(client, f"{name}-bench", values, models, items)
    upload_matrix(client, f"{name}-bench-2", values[:, ::-1], models, items)
    if public:
        assert client.patch(f"/v1/benchmarks/{name}-bench", json={"visibility": "public"}).status_code == 200
    r = client.post("/v1/coresets", json={"name": f"{name}-core", "method": "anchor_points",
                                          "benchmarks": [f"{name}-bench"], "budget": 4,
                                          "reference_models": models[:10]})
    assert r.status_code == 202, r.text
    assert wait_for_job(client, r.json()["job"]["id"], timeout=120)["status"] == "succeeded"
    s = client.post("/v1/sessions", json={"benchmark": f"{name}-bench", "target": models[11],
                                          "reference_models": models[:10]})
    assert s.status_code == 201, s.text
    sel = client.post("/v1/benchmark-selections", json={"benchmarks": [f"{name}-bench", f"{name}-bench-2"], "k": 1})
    assert sel.status_code == 201, sel.text
    return {"coreset": r.json()["coreset"]["id"], "session": s.json()["id"], "models": ",".join(models)}


def test_only_the_bootstrap_admin_deletes_and_local_stays(teams: Teams) -> None:
    assert_problem(teams.b.delete("/v1/teams/alpha"), 404)  # another team: as if it did not exist
    body = assert_problem(teams.a.delete("/v1/teams/alpha"), 403)  # its own admin token
    assert "bootstrap" in body["detail"]
    assert_problem(teams.a_read.delete("/v1/teams/alpha"), 403)  # scope
    assert_problem(teams.admin.delete("/v1/teams/nope"), 404)
    assert_problem(teams.admin.delete("/v1/teams/local"), 409)
    assert teams.a.get("/v1/benchmarks").status_code == 200


@pytest.mark.slow
def test_delete_team_removes_everything_it_owns(teams: Teams, committed_session_factory: sessionmaker[Session]
                                                ) -> None:
    build(teams.a, "alpha")
    beta = build(teams.b, "beta")
    alpha_id = next(t["id"] for t in teams.admin.get("/v1/teams").json()["items"] if t["name"] == "alpha")
    before = team_rows(committed_session_factory, alpha_id)
    assert all(before[k] >= 1 for k in before), before
    beta_before = all_rows(committed_session_factory)
    r = teams.admin.delete("/v1/teams/alpha")
    assert r.status_code == 204, r.text
    assert set(team_rows(committed_session_factory, alpha_id).values()) == {0}
    assert_problem(teams.a.get("/v1/benchmarks"), 401)  # its tokens are gone
    assert_problem(teams.admin.get("/v1/audit", params={"team": "alpha"}), 404)
    entry = teams.admin.get("/v1/audit").json()["items"][0]
    assert (entry["action"], entry["resource_type"], entry["resource_id"]) == ("delete", "team", alpha_id)
    assert entry["detail"]["name"] == "alpha" and entry["detail"]["benchmarks"] == 2
    assert entry["detail"]["coresets"] == 1 and entry["detail"]["sessions"] == 1
    # beta's data is untouched and works
    after = all_rows(committed_session_factory)
    assert after[OWNED.index(Benchmark)] == beta_before[OWNED.index(Benchmark)] - 2
    assert teams.b.get(f"/v1/coresets/{beta['coreset']}").json()["status"] == "ready"
    assert teams.b.get(f"/v1/sessions/{beta['session']}").status_code == 200
    # the name is free again
    assert teams.admin.post("/v1/teams", json={"name": "alpha"}).status_code == 201


@pytest.mark.slow
def test_delete_team_is_409_while_others_depend_and_nothing_is_deleted(
        teams: Teams, committed_session_factory: sessionmaker[Session]) -> None:
    alpha = build(teams.a, "alpha", public=True)
    models = alpha["models"].split(",")
    # beta builds a session on alpha's public benchmark
    s = teams.b.post("/v1/sessions", json={"benchmark": "alpha/alpha-bench", "target": models[11],
                                           "reference_models": models[:10]})
    assert s.status_code == 201, s.text
    before = all_rows(committed_session_factory)
    body = assert_problem(teams.admin.delete("/v1/teams/alpha"), 409)
    assert any(e.get("benchmark") == "alpha-bench" for e in body["errors"])
    assert all_rows(committed_session_factory) == before
    assert teams.b.delete(f"/v1/sessions/{s.json()['id']}").status_code == 204
    # a published coreset of the team: never deleted, so neither is the team
    assert teams.a.post(f"/v1/coresets/{alpha['coreset']}/publish").status_code == 200
    before = all_rows(committed_session_factory)
    body = assert_problem(teams.admin.delete("/v1/teams/alpha"), 409)
    assert body["errors"][0]["coresets"] == [alpha["coreset"]]
    assert all_rows(committed_session_factory) == before
    assert teams.a.get("/v1/benchmarks/alpha-bench").status_code == 200


def test_delete_team_is_409_while_its_job_is_active(teams: Teams,
                                                    committed_session_factory: sessionmaker[Session]) -> None:
    gamma = teams.admin.post("/v1/teams", json={"name": "gamma"}).json()
    token = make_token(teams.admin, "gamma", ["write"])
    with committed_session_factory() as s:
        s.add(Job(kind="backtest", queue="cpu", status="running", payload={}, team_id=gamma["id"]))
        s.commit()
    body = assert_problem(teams.admin.delete("/v1/teams/gamma"), 409)
    assert "cancel" in body["errors"][0]["detail"]
    assert client_with(teams.admin.app, token["token"]).get("/v1/benchmarks").status_code == 200
    with committed_session_factory() as s:
        job = s.scalars(select(Job).where(Job.team_id == gamma["id"])).one()
        job.status = "cancelled"
        s.commit()
    assert teams.admin.delete("/v1/teams/gamma").status_code == 204
    assert_problem(client_with(teams.admin.app, token["token"]).get("/v1/benchmarks"), 401)
