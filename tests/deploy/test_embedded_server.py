"""The newcomer's journey over real HTTP on the embedded server (SQLite file, in-process jobs):
upload a benchmark with text, request a facility-location coreset, export it, post the model's
coreset scores and read estimates with intervals."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from support.helpers import embedded_server


@pytest.mark.slow
def test_embedded_server_coreset_journey(tmp_path):
    with embedded_server(tmp_path) as api, httpx.Client(base_url=api.base_url, timeout=60) as http:
        assert http.get("/docs").status_code == 200

        assert http.post("/v1/benchmarks", json={"name": "quiz", "capability": "knowledge",
                                                  "score_kind": "binary"}).status_code == 201
        items = [{"id": str(i), "prompt": f"Question {i}: what is {i} squared?", "target": str(i * i)}
                 for i in range(30)]
        r = http.post("/v1/benchmarks/quiz/items", content="\n".join(json.dumps(x) for x in items),
                      headers={"content-type": "application/x-ndjson"})
        assert r.json()["created"] == 30

        r = http.post("/v1/coresets", json={"method": "facility_location", "benchmarks": ["quiz"], "budget": 5})
        assert r.status_code == 202, r.text
        job_id, coreset_id = r.json()["job"]["id"], r.json()["coreset"]["id"]
        deadline = time.monotonic() + 180
        while (job := http.get(f"/v1/jobs/{job_id}").json())["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
        assert job["status"] == "succeeded", job

        coreset = http.get(f"/v1/coresets/{coreset_id}").json()
        assert len(coreset["items"]) == 5
        exported = http.get(f"/v1/coresets/{coreset_id}/export", params={"format": "lm-eval"}).json()
        assert exported == {"quiz": sorted(int(i["item"]) for i in coreset["items"])}

        scores = [{"benchmark": "quiz", "item": i["item"], "score": int(i["item"]) % 2} for i in coreset["items"]]
        prediction = http.post(f"/v1/coresets/{coreset_id}/predict", json={"scores": scores}).json()
        estimate = prediction["benchmarks"]["quiz"]
        assert abs(estimate["estimate"] - sum(s["score"] for s in scores) / 5) < 1e-12
        assert estimate["interval"][0] <= estimate["estimate"] <= estimate["interval"][1]
        assert prediction["overall"]["estimate"] == estimate["estimate"]
    assert (tmp_path / "evalplan.db").exists()
