"""The cross-team walk (issue 12): every route of the OpenAPI (and every page with a resource in its
path), called with team beta's token against team alpha's private resources, answers 404, and every
list leaves them out. The route list comes from ``app.openapi()``: a new route that takes a resource
must have its path parameters and body listed here (else this test fails naming it) and then
answers 404 unless it forgot the team scoping. Routes that are not resource-scoped are in ``NOT_SCOPED``
with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from evalplan.main import create_app
from evalplan.workers.dispatch import InProcessDispatcher
from support.helpers import settings_for, upload_matrix, wait_for_job
from support.teams import ADMIN_TOKEN, Teams, make_teams

NOT_SCOPED = {
    ("GET", "/health"): "liveness, no data",
    ("GET", "/health/ready"): "readiness, no data",
    ("GET", "/metrics"): "needs the metrics token (401 to every team token; tests/kit/test_metrics_token.py)",
    ("POST", "/v1/benchmarks"): "creates in the caller's team",
    ("POST", "/v1/models"): "creates in the caller's team",
    ("POST", "/v1/imports/lm-eval"): "creates in the caller's team (benchmarks named by the log's task)",
    ("POST", "/v1/imports/inspect"): "get-or-creates the named benchmark in the caller's team",
    ("POST", "/v1/imports/helm"): "get-or-creates the named benchmark in the caller's team",
    ("POST", "/v1/imports/lighteval"): "get-or-creates the named benchmark in the caller's team",
    ("POST", "/v1/teams"): "bootstrap admin only (403 for team tokens)",
    ("GET", "/v1/teams"): "lists the caller's own team",
    ("GET", "/v1/audit"): "the caller's own team's log",
}


@pytest.fixture
def walk_app(committed_session_factory: sessionmaker[Session], database_urls: dict[str, str],
             backend: str) -> Iterator[FastAPI]:
    dispatcher = InProcessDispatcher(committed_session_factory, threads=2)
    yield create_app(settings_for(database_urls[backend], auth="required", admin_token=ADMIN_TOKEN),
                     session_factory=committed_session_factory, dispatcher=dispatcher)
    dispatcher.shutdown()


def alpha_resources(teams: Teams) -> dict[str, str]:
    """Team alpha's private benchmark (items, scores), model, coreset, session, job, selection and plan."""
    a = teams.a
    rng = np.random.default_rng(0)
    values = (rng.random((12, 30)) < rng.uniform(0.2, 0.8, (12, 1))).astype(float)
    models, items = [f"alpha-m{i}" for i in range(12)], [f"q{j}" for j in range(30)]
    upload_matrix(a, "alpha-bench", values, models, items)
    upload_matrix(a, "alpha-bench-2", values[:, ::-1], models, items)
    bench = a.get("/v1/benchmarks/alpha-bench").json()["id"]
    bench2 = a.get("/v1/benchmarks/alpha-bench-2").json()["id"]
    model = a.get("/v1/models/alpha-m0").json()["id"]
    r = a.post("/v1/coresets", json={"name": "alpha-core", "method": "anchor_points", "benchmarks": [bench],
                                     "budget": 5, "reference_models": models[:10]})
    assert r.status_code == 202, r.text
    job = r.json()["job"]["id"]
    assert wait_for_job(a, job, timeout=120)["status"] == "succeeded"
    coreset = r.json()["coreset"]["id"]
    s = a.post("/v1/sessions", json={"benchmark": bench, "target": models[11], "reference_models": models[:10]})
    assert s.status_code == 201, s.text
    s2 = a.post("/v1/sessions", json={"benchmark": bench, "target": models[10], "reference_models": models[:10]})
    assert s2.status_code == 201, s2.text
    sel = a.post("/v1/benchmark-selections", json={"benchmarks": ["alpha-bench", "alpha-bench-2"], "k": 1})
    assert sel.status_code == 201, sel.text
    p = a.post("/v1/plans", json={"benchmarks": bench, "half_width": 0.2, "level": 0.9,
                                   "methods": ["random"], "seeds": 1})
    assert p.status_code == 202, p.text
    plan = p.json()["job"]["id"]
    assert wait_for_job(a, plan, timeout=120)["status"] == "succeeded"
    return {"benchmark": bench, "model": model, "coreset_id": coreset, "session_id": s.json()["id"], "job_id": job,
            "plan_id": plan, "selection_id": sel.json()["id"], "team": "alpha", "token_id": teams.a_token["id"], "fmt": "svg",
            "model_name": models[0], "benchmark_name": "alpha-bench", "benchmark_pair": f"{bench},{bench2}",
            "session_pair": f"{s.json()['id']},{s2.json()['id']}", "item_id": items[0]}


def bodies(r: dict[str, str]) -> dict[tuple[str, str], dict[str, Any]]:
    """A valid request of each route with a body, naming alpha's resources."""
    return {
        ("POST", "/v1/benchmarks/{benchmark}/items"): {"content": b'{"id": "new", "prompt": "p"}\n',
                                                       "headers": {"content-type": "application/x-ndjson"}},
        ("POST", "/v1/benchmarks/{benchmark}/scores"): {"json": [{"model": "x", "item": "q0", "score": 1}]},
        ("POST", "/v1/benchmarks/{benchmark}/hidden-states"): {"files": {"file": ("h.npy", b"\x93NUMPY")},
                                                               "data": {"model": "x"}},
        ("PATCH", "/v1/benchmarks/{benchmark}"): {"json": {"visibility": "public"}},
        ("PATCH", "/v1/models/{model}"): {"json": {"visibility": "public"}},
        ("PATCH", "/v1/coresets/{coreset_id}"): {"json": {"visibility": "public"}},
        ("PATCH", "/v1/sessions/{session_id}"): {"json": {"visibility": "public"}},
        ("PATCH", "/v1/jobs/{job_id}"): {"json": {"visibility": "public"}},
        ("PATCH", "/v1/benchmark-selections/{selection_id}"): {"json": {"visibility": "public"}},
        ("POST", "/v1/coresets/{coreset_id}/deprecate"): {"json": {"message": "no"}},
        ("POST", "/v1/coresets/{coreset_id}/predict"): {"json": {"model": r["model_name"]}},
        ("POST", "/v1/sessions/{session_id}/observations"): {"json": {"item": "q0", "score": 1}},
        ("POST", "/v1/benchmark-selections/{selection_id}/predict"): {"json": {"scores": {"alpha-bench": 0.5}}},
        ("POST", "/v1/teams/{team}/tokens"): {"json": {"name": "stolen", "scopes": ["read"]}},
        ("POST", "/v1/sessions"): {"json": {"benchmark": r["benchmark"], "target": r["model_name"]}},
        ("POST", "/v1/coresets"): {"json": {"method": "anchor_points", "benchmarks": [r["benchmark"]], "budget": 3,
                                            "reference_models": "all"}},
        ("POST", "/v1/embeddings"): {"json": {"benchmarks": [r["benchmark"]]}},
        ("POST", "/v1/backtests"): {"json": {"benchmarks": r["benchmark"], "methods": ["random"]}},
        ("POST", "/v1/plans"): {"json": {"benchmarks": r["benchmark"], "half_width": 0.05}},
        ("POST", "/v1/benchmark-selections"): {"json": {"benchmarks": [r["benchmark"], "alpha-bench-2"], "k": 1}},
        ("POST", "/v1/comparisons"): {"json": {"sessions": r["session_pair"].split(",")}},
    }


QUERY = {"against": "coreset_id", "benchmarks": "benchmark_pair", "sessions": "session_pair"}
OPTIONAL_RESOURCE_QUERY = {"benchmark": "benchmark"}  # list filters that name a resource: must 404 too


def operations(app: FastAPI) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in app.openapi()["paths"].items():
        for method, op in item.items():
            yield method.upper(), path, op


@pytest.mark.slow
def test_every_route_hides_another_teams_private_resources(walk_app: FastAPI) -> None:
    teams = make_teams(walk_app)
    try:
        r = alpha_resources(teams)
        table = bodies(r)
        secrets = [r[k] for k in ("benchmark", "model", "coreset_id", "session_id", "job_id", "selection_id",
                                  "plan_id")]
        walked, problems = 0, []
        for method, path, op in operations(walk_app):
            if (method, path) in NOT_SCOPED:
                continue
            url, params = fill(method, path, op, r)
            has_body = "requestBody" in op
            if has_body:
                assert (method, path) in table, f"{method} {path}: add a request body to this walk"
            request = table.get((method, path), {})
            resp = teams.b.request(method, url, params=params, **request)
            walked += 1
            if "{" in path or has_body or params:
                if resp.status_code != 404:
                    problems.append(f"{method} {url} -> {resp.status_code} {resp.text[:200]}")
                for secret in secrets:
                    if secret in resp.text and secret not in url + str(request) + str(params):
                        problems.append(f"{method} {url} leaks {secret}")
            else:  # a list: 200 without alpha's resources
                if resp.status_code != 200 or any(s in resp.text for s in secrets):
                    problems.append(f"{method} {url} -> {resp.status_code}: lists alpha's resources")
                for p in op.get("parameters", []):
                    if p["in"] == "query" and p["name"] in OPTIONAL_RESOURCE_QUERY:
                        filtered = teams.b.get(url, params={p["name"]: r[OPTIONAL_RESOURCE_QUERY[p["name"]]]})
                        walked += 1
                        if filtered.status_code != 404:
                            problems.append(f"GET {url}?{p['name']}=<alpha's> -> {filtered.status_code}")
        # the pages with a resource in their path
        for route in walk_app.routes:
            path = getattr(route, "path", "")
            if not path.startswith("/ui/") or "{" not in path or "{path:path}" in path:
                continue
            names = re.findall(r"{([^}:]+)(?::[^}]*)?}", path)
            key = {"benchmark": "benchmark", "session_id": "session_id", "coreset_id": "coreset_id",
                   "job_id": "job_id", "plan_id": "plan_id"}
            assert all(n in key for n in names), f"page {path}: add its parameters to this walk"
            url = path
            for n in names:
                url = re.sub(r"{" + n + r"(?::[^}]*)?}", r[key[n]], url)
            resp = teams.b.get(url)
            walked += 1
            if resp.status_code != 404:
                problems.append(f"page {url} -> {resp.status_code}")
        assert not problems, "\n".join(problems)
        assert walked >= 40
        # nothing of alpha's changed
        assert teams.a.get(f"/v1/benchmarks/{r['benchmark']}").json()["visibility"] == "private"
        assert teams.a.get(f"/v1/coresets/{r['coreset_id']}").json()["visibility"] == "private"
        assert teams.a.get(f"/v1/sessions/{r['session_id']}").json()["n_observed"] == 0
        assert teams.a.get(f"/v1/jobs/{r['job_id']}").json()["status"] == "succeeded"
        assert [t["name"] for t in teams.a.get("/v1/teams/alpha/tokens").json()["items"]] == ["alpha-ci",
                                                                                                "alpha-reader"]
    finally:
        teams.close()


def fill(method: str, path: str, op: dict[str, Any], r: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The route's URL with alpha's resources in its path, and its required query parameters."""
    names = re.findall(r"{([^}:]+)(?::[^}]*)?}", path)
    unknown = [n for n in names if n not in r]
    assert not unknown, f"{method} {path}: add a value for path parameter(s) {unknown} to this walk"
    url = path
    for n in names:
        url = re.sub(r"{" + n + r"(?::[^}]*)?}", r[n], url)
    params = {}
    for p in op.get("parameters", []):
        if p["in"] == "query" and p.get("required"):
            assert p["name"] in QUERY, f"{method} {path}: add required query {p['name']!r} to this walk"
            params[p["name"]] = r[QUERY[p["name"]]]
    return url, params


PUBLIC_PATCHES = ["/v1/benchmarks/{benchmark}", "/v1/benchmarks/alpha-bench-2", "/v1/models/{model}",
                  "/v1/coresets/{coreset_id}", "/v1/sessions/{session_id}", "/v1/jobs/{job_id}", "/v1/jobs/{plan_id}",
                  "/v1/benchmark-selections/{selection_id}"]


@pytest.mark.slow
def test_every_write_to_another_teams_public_resources_is_403(walk_app: FastAPI) -> None:
    """Alpha makes every resource public (benchmark, model, coreset, session, job, selection: each with
    an audited PATCH); beta then reads every one of them and every write route answers 403. A new write
    route that forgets the owner check fails here, naming it."""
    teams = make_teams(walk_app)
    try:
        r = alpha_resources(teams)
        for path in PUBLIC_PATCHES:
            url = re.sub(r"{(\w+)}", lambda m: r[m.group(1)], path)
            resp = teams.a.patch(url, json={"visibility": "public"})
            assert resp.status_code == 200 and resp.json()["visibility"] == "public", (url, resp.text)
        audited = {(e["resource_type"], e["resource_id"]) for e in teams.a.get("/v1/audit").json()["items"]
                   if e["action"] == "visibility"}
        assert {"benchmark", "model", "coreset", "session", "job", "benchmark_selection"} <= {t for t, _ in audited}
        table = bodies(r)
        walked, problems = 0, []
        for method, path, op in operations(walk_app):
            if (method, path) in NOT_SCOPED or path.startswith("/v1/teams/") or "{" not in path:
                continue  # teams and tokens are not shareable; lists and creates act in beta's own team
            url, params = fill(method, path, op, r)
            if "requestBody" in op:
                assert (method, path) in table, f"{method} {path}: add a request body to this walk"
            scope = op.get("x-evalplan-scope") or ("read" if method in ("GET", "HEAD") else "write")
            resp = teams.b.request(method, url, params=params, **table.get((method, path), {}))
            walked += 1
            if scope == "read" and resp.status_code in (401, 403, 404):
                problems.append(f"read {method} {url} -> {resp.status_code} {resp.text[:200]}")
            if scope != "read" and resp.status_code != 403:
                problems.append(f"write {method} {url} -> {resp.status_code} {resp.text[:200]}")
        assert not problems, "\n".join(problems)
        assert walked >= 30
        # beta sees them in its lists too, with alpha as the owner
        assert teams.b.get(f"/v1/sessions/{r['session_id']}").json()["team"] == "alpha"
        assert teams.b.get(f"/v1/jobs/{r['job_id']}").json()["team"] == "alpha"
        assert r["session_id"] in teams.b.get("/v1/sessions").text and r["job_id"] in teams.b.get("/v1/jobs").text
        # nothing of alpha's changed
        assert teams.a.get(f"/v1/sessions/{r['session_id']}").json()["n_observed"] == 0
        assert teams.a.get(f"/v1/jobs/{r['job_id']}").json()["status"] == "succeeded"
        assert teams.a.get(f"/v1/coresets/{r['coreset_id']}").json()["published_at"] is None
        for path in PUBLIC_PATCHES:
            url = re.sub(r"{(\w+)}", lambda m: r[m.group(1)], path)
            assert teams.a.get(url).json()["visibility"] == "public", url
    finally:
        teams.close()
