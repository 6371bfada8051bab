"""Benchmark-level selection over HTTP (paper 000 §4.4): the stored selection and imputation model equal
``evalplan.core.benchmarks.benchmark_selection`` run directly; the score-derived matrix equals per-benchmark model
means; every bad input is a problem+json 422/404 that stores nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sqlalchemy import func, select

from evalplan.core.benchmarks.benchmark_selection import METHODS, BenchmarkSelector, GaussianImputer, test_r2
from evalplan.db.models import BenchmarkSelection
from support.helpers import assert_problem, create_benchmark, upload_scores_csv

CSV = {"content-type": "text/csv"}
URL = "/v1/benchmark-selections"




def n_selections(factory) -> int:
    with factory() as session:
        return session.scalar(select(func.count()).select_from(BenchmarkSelection))


def low_rank(n_models: int = 40, n_bench: int = 8, rank: int = 2, seed: int = 7, missing: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(n_models, rank)) @ rng.normal(size=(rank, n_bench)) + 0.3 * rng.normal(size=(n_models, n_bench))
    S = 0.5 + 0.1 * S
    for _ in range(missing):
        S[rng.integers(n_models), rng.integers(n_bench)] = np.nan
    return S


def matrix_body(S: np.ndarray) -> dict:
    return {"models": [f"m{i}" for i in range(S.shape[0])], "benchmarks": [f"b{j}" for j in range(S.shape[1])],
            "values": [[None if np.isnan(v) else float(v) for v in row] for row in S]}


@pytest.mark.parametrize("method", METHODS)
def test_matrix_selection_and_predict_equal_the_core(client, method: str) -> None:
    S = low_rank(missing=5)
    r = client.post(URL, json={"matrix": matrix_body(S), "k": 3, "method": method, "seed": 1})
    assert r.status_code == 201, r.text
    body = r.json()
    assert r.headers["location"] == f"{URL}/{body['id']}" and body["id"].startswith("bs_")
    core = BenchmarkSelector(3, method=method, seed=1).fit(S)
    names = [f"b{j}" for j in range(8)]
    assert body["benchmarks"] == names and body["method"] == method and body["k"] == 3
    assert [s["benchmark"] for s in body["selected"]] == [names[j] for j in core.ranking_]
    assert [s["rank"] for s in body["selected"]] == [0, 1, 2]
    np.testing.assert_allclose([s["gain"] for s in body["selected"]], core.gains_, rtol=1e-12)
    assert body["residual_variance"] == pytest.approx(core.residual_variance_fraction(), rel=1e-12)
    assert body["test_r2"] is None and body["n_models"] == 40 and body["source"] == "matrix"
    np.testing.assert_allclose(body["imputation"]["mean"], core.mean_, rtol=1e-12)
    np.testing.assert_allclose(body["imputation"]["scale"], core.scale_, rtol=1e-12)
    np.testing.assert_allclose(body["imputation"]["cov"], core.cov_, rtol=1e-12, atol=1e-15)
    assert client.get(f"{URL}/{body['id']}").json() == body

    x = np.array([0.55, 0.41, 0.6])
    scores = {names[j]: float(v) for j, v in zip(core.ranking_, x)}
    p = client.post(f"{URL}/{body['id']}/predict", json={"scores": scores})
    assert p.status_code == 200, p.text
    out = p.json()["benchmarks"]
    expected = core.predict(x)[0]
    # eq. 8 in raw units with the raw covariance D Σ̂ D gives the same numbers
    D = np.diag(core.scale_)
    raw = GaussianImputer(core.mean_, D @ core.cov_ @ D, core.ranking_).predict(x)[0]
    assert list(out) == names
    for j, name in enumerate(names):
        assert out[name]["observed"] == (j in core.ranking_)
        assert out[name]["estimate"] == pytest.approx(expected[j], rel=1e-10, abs=1e-12)
        assert out[name]["estimate"] == pytest.approx(raw[j], rel=1e-8, abs=1e-10)


def test_test_split_reports_eq9_on_held_out_models(client) -> None:
    S = low_rank(n_models=50)
    r = client.post(URL, json={"matrix": matrix_body(S), "k": 2, "test_fraction": 0.3, "seed": 3})
    assert r.status_code == 201, r.text
    body = r.json()
    perm = np.random.default_rng(3).permutation(50)
    test, train = np.sort(perm[:15]), np.sort(perm[15:])
    core = BenchmarkSelector(2, seed=3).fit(S[train])
    assert [s["benchmark"] for s in body["selected"]] == [f"b{j}" for j in core.ranking_]
    expected = test_r2(S[test], core.predict(S[test][:, core.ranking_]), core.mean_, core.ranking_, core.scale_)
    assert body["test_r2"] == pytest.approx(expected, rel=1e-12)
    assert 0.3 < body["test_r2"] <= 1  # correlated benchmarks are predictable
    assert body["n_models"] == 35 and body["diagnostics"]["n_test"] == 15
    assert body["diagnostics"]["test_models"] == [f"m{i}" for i in test]
    assert body["residual_variance"] == pytest.approx(core.residual_variance_fraction(), rel=1e-12)
    assert len(body["diagnostics"]["residual_variance_by_k"]) == 2


def upload(client, bench: str, text: str) -> None:
    create_benchmark(client, bench)
    upload_scores_csv(client, bench, text)


def test_benchmarks_input_uses_per_benchmark_model_means(client) -> None:
    upload(client, "ba", "model,i1,i2,i3\nm1,1,0,1\nm2,0,0,1\nm3,1,1,1\nm4,0,0,0\n")
    upload(client, "bb", "model,j1,j2\nm1,0.5,0.25\nm2,0.75,\nm3,1,1\nm4,0,0.5\n")
    upload(client, "bc", "model,k1,k2,k3,k4\nm2,1,1,0,0\nm3,1,1,1,0\nm1,0,0,0,1\nm5,1,1,1,1\n")
    upload(client, "bd", "model,l1\nm4,0.2\nm1,0.9\nm3,0.4\nm2,0.7\n")
    r = client.post(URL, json={"benchmarks": ["ba", "bb", "bc", "bd"], "k": 2, "method": "entropy"})
    assert r.status_code == 201, r.text
    body = r.json()
    nan = np.nan
    # rows: first appearance over the benchmarks in request order (m1..m4 from ba, m5 from bc)
    S = np.array([
        [2 / 3, 0.375, 0.25, 0.9],
        [1 / 3, 0.75, 0.5, 0.7],
        [1.0, 1.0, 0.75, 0.4],
        [0.0, 0.25, nan, 0.2],
        [nan, nan, 1.0, nan],
    ])
    core = BenchmarkSelector(2, method="entropy").fit(S)
    assert body["source"] == "benchmarks" and body["metric"] == "score" and body["n_models"] == 5
    assert body["benchmarks"] == ["ba", "bb", "bc", "bd"]
    assert [s["benchmark"] for s in body["selected"]] == [body["benchmarks"][j] for j in core.ranking_]
    np.testing.assert_allclose(body["imputation"]["mean"], core.mean_, rtol=1e-12)
    np.testing.assert_allclose(body["imputation"]["cov"], core.cov_, rtol=1e-10, atol=1e-12)

    # restricting to models; an unscored model is left out
    assert client.post("/v1/models", json={"name": "m9"}).status_code in (200, 201)
    r = client.post(URL, json={"benchmarks": ["ba", "bb", "bd"], "models": ["m3", "m1", "m2", "m9"], "k": 1})
    assert r.status_code == 201, r.text
    core = BenchmarkSelector(1).fit(S[[2, 0, 1]][:, [0, 1, 3]])
    np.testing.assert_allclose(r.json()["imputation"]["mean"], core.mean_, rtol=1e-12)
    assert r.json()["n_models"] == 3


def test_bad_inputs_are_422_or_404_and_store_nothing(client, db_session_factory) -> None:
    good = matrix_body(low_rank(n_models=6, n_bench=4))
    upload(client, "ba", "model,i1\nm1,1\nm2,0\n")
    cases = [
        ({"matrix": good, "k": 0}, 422),
        ({"matrix": good, "k": 4}, 422),
        ({"matrix": good, "k": 2, "method": "greedy"}, 422),
        ({"matrix": good, "benchmarks": ["ba"], "k": 1}, 422),
        ({"k": 1}, 422),
        ({"matrix": good, "k": 1, "metric": "score"}, 422),
        ({"matrix": {**good, "models": ["a", "b"], "values": good["values"][:2]}, "k": 1}, 422),
        ({"matrix": {**good, "values": [*good["values"][:-1], ["x", 1, 2, 3]]}, "k": 1}, 422),
        ({"matrix": {**good, "values": [*good["values"][:-1], [True, 1, 2, 3]]}, "k": 1}, 422),
        ({"matrix": {**good, "values": [*good["values"][:-1], [1, 2, 3]]}, "k": 1}, 422),
        ({"matrix": {**good, "values": good["values"][:-1]}, "k": 1}, 422),
        ({"matrix": {**good, "benchmarks": ["a", "a", "b", "c"]}, "k": 1}, 422),
        ({"matrix": {**good, "values": [[None, *row[1:]] for row in good["values"]]}, "k": 1}, 422),
        ({"matrix": good, "k": 1, "test_fraction": 0.6}, 422),  # 2 training models
        ({"matrix": good, "k": 1, "test_fraction": 1.0}, 422),
        ({"benchmarks": ["ba", "nope"], "k": 1}, 404),
        ({"benchmarks": ["ba", "ba"], "k": 1}, 422),
        ({"benchmarks": ["ba"], "k": 1}, 422),
        ({"benchmarks": ["ba"], "models": ["ghost"], "k": 1}, 404),
    ]
    for payload, status in cases:
        assert_problem(client.post(URL, json=payload), status)
    upload(client, "bb", "model,j1\nm1,0.5\nm2,0.25\n")
    body = assert_problem(client.post(URL, json={"benchmarks": ["ba", "bb"], "k": 1}), 422)  # 2 models
    assert "3" in body["detail"]
    # NaN / Infinity literals in the JSON body
    raw = '{"matrix": {"models": ["a","b","c"], "benchmarks": ["x","y"], "values": [[1,2],[3,NaN],[4,5]]}, "k": 1}'
    assert_problem(client.post(URL, content=raw, headers={"content-type": "application/json"}), 422)
    assert n_selections(db_session_factory) == 0
    assert_problem(client.get(f"{URL}/bs_000000000000000000000000"), 404)
    assert_problem(client.post(f"{URL}/bs_000000000000000000000000/predict", json={"scores": {}}), 404)


def test_predict_rejects_missing_unknown_and_non_finite_scores(client) -> None:
    S = low_rank(n_models=20, n_bench=5)
    r = client.post(URL, json={"matrix": matrix_body(S), "k": 2})
    assert r.status_code == 201, r.text
    sid, selected = r.json()["id"], [s["benchmark"] for s in r.json()["selected"]]
    other = next(n for n in r.json()["benchmarks"] if n not in selected)
    ok = {selected[0]: 0.5, selected[1]: 0.4}
    assert client.post(f"{URL}/{sid}/predict", json={"scores": ok}).status_code == 200
    body = assert_problem(client.post(f"{URL}/{sid}/predict", json={"scores": {selected[0]: 0.5}}), 422)
    assert selected[1] in body["detail"]
    body = assert_problem(client.post(f"{URL}/{sid}/predict", json={"scores": {**ok, "zzz": 1}}), 422)
    assert "zzz" in body["detail"]
    assert_problem(client.post(f"{URL}/{sid}/predict", json={"scores": {**ok, other: 1}}), 422)
    assert_problem(client.post(f"{URL}/{sid}/predict", json={"scores": {**ok, selected[1]: "0.4"}}), 422)
    assert_problem(client.post(f"{URL}/{sid}/predict", json={"scores": {**ok, selected[1]: None}}), 422)
    for literal in ("NaN", "Infinity", "-Infinity"):
        raw = f'{{"scores": {{"{selected[0]}": 0.5, "{selected[1]}": {literal}}}}}'
        assert_problem(client.post(f"{URL}/{sid}/predict", content=raw,
                                   headers={"content-type": "application/json"}), 422)
    assert math.isfinite(client.post(f"{URL}/{sid}/predict", json={"scores": ok}).json()
                         ["benchmarks"][other]["estimate"])
