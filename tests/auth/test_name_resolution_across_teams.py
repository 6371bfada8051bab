"""Issue 24 items 1 and 3: names across teams.

* item 3: team beta's harness import into ``alpha-public-bench`` (a name alpha publishes) creates or
  uses beta's OWN benchmark of that name (own first, as everywhere), never 403 and never alpha's;
* item 1: a ``team/name`` reference only ever gives that team's resource: a name that reads as
  ``alpha/...`` cannot be created by beta on any path, and alpha's ``alpha%2F...`` reads alpha's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from evalplan.db.models import Benchmark, Model, Team
from evalplan.main import create_app
from support.helpers import NoJobsDispatcher, assert_problem, settings_for, upload_matrix
from support.teams import ADMIN_TOKEN, make_teams

HELM = Path(__file__).parents[1] / "support" / "data" / "helm" / "simple_mcqa"


@pytest.fixture
def auth_app(db_session_factory: sessionmaker[Session], database_urls: dict[str, str], backend: str) -> Iterator[FastAPI]:
    yield create_app(settings_for(database_urls[backend], auth="required", admin_token=ADMIN_TOKEN),
                     session_factory=db_session_factory, dispatcher=NoJobsDispatcher())


def helm_files() -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("files", (p.name, p.read_bytes(), "application/json"))
            for p in (HELM / "per_instance_stats.json", HELM / "scenario_state.json")]


def publish_alpha_bench(teams) -> str:
    values = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    upload_matrix(teams.a, "alpha-public-bench", values, ["alpha-m0", "alpha-m1"], ["q0", "q1", "q2"])
    r = teams.a.patch("/v1/benchmarks/alpha-public-bench", json={"visibility": "public"})
    assert r.status_code == 200, r.text
    return str(r.json()["id"])


def test_a_harness_import_uses_the_callers_own_benchmark_of_that_name(auth_app: FastAPI) -> None:
    teams = make_teams(auth_app)
    try:
        alpha_id = publish_alpha_bench(teams)
        r = teams.b.post("/v1/imports/helm", data={"benchmark": "alpha-public-bench"}, files=helm_files())
        assert r.status_code == 201, r.text  # before: 403 (alpha's public benchmark was picked)
        body = r.json()
        assert body["benchmark_created"] is True and body["benchmark_id"] != alpha_id
        # again: into beta's own, still not alpha's
        r = teams.b.post("/v1/imports/helm", data={"benchmark": "alpha-public-bench", "model": "other"},
                         files=helm_files())
        assert r.status_code == 201 and r.json()["benchmark_id"] == body["benchmark_id"], r.text
        assert teams.a.get("/v1/benchmarks/alpha-public-bench").json()["n_models"] == 2  # alpha's untouched
        assert teams.b.get("/v1/benchmarks/alpha-public-bench").json()["id"] == body["benchmark_id"]  # own first
    finally:
        teams.close()


def test_names_that_read_as_another_teams_reference_cannot_be_created(auth_app: FastAPI) -> None:
    teams = make_teams(auth_app)
    try:
        alpha_id = publish_alpha_bench(teams)
        model_id = teams.a.get("/v1/models/alpha-m0").json()["id"]
        # beta tries to create alpha/<name> on every path
        body = assert_problem(teams.b.post("/v1/imports/helm", data={"benchmark": "alpha/alpha-public-bench"},
                                           files=helm_files()), 422)
        assert body["errors"][0]["field"] == "benchmark" and "team/name" in body["detail"]
        assert_problem(teams.b.post("/v1/models", json={"name": "alpha/alpha-m0"}), 422)
        teams.b.post("/v1/benchmarks", json={"name": "beta-b"})
        assert_problem(teams.b.post("/v1/benchmarks/beta-b/scores",
                                    json=[{"model": "alpha/alpha-m0", "item": "x", "score": 1}]), 422)
        assert_problem(teams.b.post("/v1/imports/inspect", data={"model": "local/x"}, files=helm_files()), 422)
        # alpha's own reference, and everyone's, resolves to alpha's resource
        for client in (teams.a, teams.b, teams.admin):
            assert client.get("/v1/benchmarks/alpha%2Falpha-public-bench").json()["id"] == alpha_id
            assert client.get("/v1/models/alpha%2Falpha-m0").json()["id"] == model_id
        # a name with '/' whose first part is no team is an ordinary name (HF ids)
        r = teams.b.post("/v1/models", json={"name": "meta-llama/Llama-3-8B"})
        assert r.status_code == 201, r.text
        assert teams.b.get("/v1/models/meta-llama%2FLlama-3-8B").json()["id"] == r.json()["id"]
        # ...and another team's public one is reached by it too when unambiguous, or as owner/name
        teams.b.patch(f"/v1/models/{r.json()['id']}", json={"visibility": "public"})
        assert teams.a.get("/v1/models/meta-llama%2FLlama-3-8B").json()["id"] == r.json()["id"]
        assert teams.a.get("/v1/models/beta%2Fmeta-llama%2FLlama-3-8B").json()["id"] == r.json()["id"]
    finally:
        teams.close()


def test_a_team_reference_resolves_to_that_team_even_against_a_stored_look_alike(
        auth_app: FastAPI, db_session_factory: sessionmaker[Session]) -> None:
    """A row stored before names were checked (or by a direct write) named ``alpha/alpha-public-bench`` in
    beta's team, public: ``alpha/alpha-public-bench`` still resolves to alpha's own, for every caller."""
    teams = make_teams(auth_app)
    try:
        alpha_id = publish_alpha_bench(teams)
        alpha_model = teams.a.get("/v1/models/alpha-m0").json()["id"]
        with db_session_factory() as session:
            beta_id = session.scalar(select(Team.id).where(Team.name == "beta"))
            session.add(Benchmark(name="alpha/alpha-public-bench", team_id=beta_id, visibility="public",
                                  embedding_fields=[], score_kind="binary", default_metric="score", data_version=0))
            session.add(Model(name="alpha/alpha-m0", team_id=beta_id, visibility="public", meta={}))
            session.commit()
        for client in (teams.a, teams.b, teams.admin):
            assert client.get("/v1/benchmarks/alpha%2Falpha-public-bench").json()["id"] == alpha_id
            assert client.get("/v1/models/alpha%2Falpha-m0").json()["id"] == alpha_model
        # the look-alike stays reachable by its owner-qualified name
        assert teams.a.get("/v1/benchmarks/beta%2Falpha%2Falpha-public-bench").json()["team"] == "beta"
    finally:
        teams.close()


def test_a_team_cannot_be_named_like_the_prefix_of_existing_names(auth_app: FastAPI) -> None:
    teams = make_teams(auth_app)
    try:
        assert teams.b.post("/v1/models", json={"name": "meta-llama/Llama-3-8B"}).status_code == 201
        teams.b.post("/v1/imports/helm", data={"benchmark": "inspect_evals/mcqa"}, files=helm_files())
        for name, existing in (("meta-llama", "meta-llama/Llama-3-8B"), ("inspect_evals", "inspect_evals/mcqa")):
            body = assert_problem(teams.admin.post("/v1/teams", json={"name": name}), 409)
            assert existing in body["detail"] and body["errors"][0]["field"] == "name"
        assert teams.admin.post("/v1/teams", json={"name": "meta"}).status_code == 201
    finally:
        teams.close()
