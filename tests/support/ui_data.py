"""Small synthetic data for the page tests, created through the public HTTP API (API.md) only.

Scores follow a 2PL item-response model, so score-based coresets, sessions and backtests have
real structure to find; prompts are short distinct sentences, so text coresets and the
benchmark-similarity job have something to embed.
"""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np

import support.helpers as helpers

TOPICS = ["arithmetic", "geometry", "history", "biology", "chemistry", "poetry", "law", "music", "physics",
          "economics", "geography", "medicine"]


def score_matrix(n_models: int, n_items: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ability = rng.normal(0, 1.2, n_models)
    difficulty = rng.normal(0, 1.0, n_items)
    discrimination = rng.uniform(0.6, 2.0, n_items)
    p = 1 / (1 + np.exp(-discrimination * (ability[:, None] - difficulty[None, :])))
    return (rng.random((n_models, n_items)) < p).astype(int)


def model_names(n_models: int) -> list[str]:
    return [f"model-{i:02d}" for i in range(n_models)]


def create_benchmark(http: httpx.Client, name: str, *, capability: str, n_models: int = 24, n_items: int = 60,
                     seed: int = 0, text: bool = True, numeric_ids: bool = True) -> dict[str, Any]:
    """A binary benchmark with scores (and prompts when ``text``); returns its matrix and names.
    Numeric item ids double as lm-eval doc indices (so the lm-eval export works)."""
    helpers.create_benchmark(http, name, capability=capability, score_kind="binary")
    items = [str(j) if numeric_ids else f"{name}-{j:03d}" for j in range(n_items)]
    if text:
        helpers.upload_items(http, name, [
            {"id": item, "prompt": f"Question {j} about {TOPICS[(j + seed) % len(TOPICS)]} ({capability}): "
                                   f"explain case {j * 7 + seed} of {name}.", "target": str(j)}
            for j, item in enumerate(items)])
    scores = score_matrix(n_models, n_items, seed)
    models = model_names(n_models)
    helpers.upload_scores_csv(http, name, helpers.wide_csv(scores.astype(float), models, items))
    return {"name": name, "items": items, "models": models, "scores": scores}


def wait_for_job(http: httpx.Client, job_id: str, timeout: float = 240.0) -> dict[str, Any]:
    """The finished job, which must have succeeded."""
    job = helpers.wait_for_job(http, job_id, timeout)
    assert job["status"] == "succeeded", job
    return job


def create_coreset(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    r = http.post("/v1/coresets", json=body)
    assert r.status_code == 202, r.text
    wait_for_job(http, r.json()["job"]["id"])
    return http.get(f"/v1/coresets/{r.json()['coreset']['id']}").json()


def run_session(http: httpx.Client, data: dict[str, Any], target_index: int, *, n: int,
                **fields: Any) -> dict[str, Any]:
    """A session on ``data`` for one of its models, fed that model's real scores ``n`` times."""
    target = data["models"][target_index]
    references = [m for m in data["models"] if m != target]
    r = http.post("/v1/sessions", json={"benchmark": data["name"], "target": target,
                                        "reference_models": references, **fields})
    assert r.status_code == 201, r.text
    session = r.json()
    for _ in range(n):
        if session["status"] != "active":
            break
        session = observe_next(http, data, session, target_index)
    return session


def observe_next(http: httpx.Client, data: dict[str, Any], session: dict[str, Any], target_index: int
                 ) -> dict[str, Any]:
    """Post the true score of the session's first proposed item."""
    item = session["next_items"][0]
    score = int(data["scores"][target_index, data["items"].index(item)])
    r = http.post(f"/v1/sessions/{session['id']}/observations", json={"item": item, "score": score})
    assert r.status_code == 200, r.text
    return r.json()
