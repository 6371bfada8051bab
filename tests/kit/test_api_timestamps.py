"""Every timestamp the API returns is UTC ISO 8601 with a ``Z`` suffix, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime

import numpy as np

from support.helpers import upload_matrix, wait_for_job

ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
KEYS = ("created_at", "updated_at", "started_at", "finished_at")


def timestamps(body: object) -> list[str]:
    """Every value under a timestamp key, anywhere in the body."""
    found: list[str] = []
    if isinstance(body, dict):
        for key, value in body.items():
            if key in KEYS and value is not None:
                found.append(value)
            else:
                found += timestamps(value)
    elif isinstance(body, list):
        for value in body:
            found += timestamps(value)
    return found


def assert_utc_z(*bodies: object) -> int:
    n = 0
    for body in bodies:
        for value in timestamps(body):
            assert isinstance(value, str) and ISO_Z.match(value), value
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            assert parsed.tzinfo == UTC
            assert abs((datetime.now(UTC) - parsed).total_seconds()) < 3600
            n += 1
    return n


def test_every_resource_has_utc_z_timestamps(committed_client) -> None:
    client = committed_client
    rng = np.random.default_rng(0)
    Y = (rng.random((8, 30)) < 0.5).astype(float)
    items = [f"i{j}" for j in range(30)]
    upload_matrix(client, "ts", Y, [f"m{m}" for m in range(8)], items)
    bodies = [client.get("/v1/benchmarks/ts").json(), client.get("/v1/benchmarks").json(),
              client.get("/v1/models/m0").json(), client.get("/v1/models").json()]

    session = client.post("/v1/sessions", json={"benchmark": "ts", "target": "new"}).json()
    session = client.post(f"/v1/sessions/{session['id']}/observations",
                          json={"item": session["next_items"][0], "score": 1}).json()
    bodies += [session, client.get(f"/v1/sessions/{session['id']}").json(), client.get("/v1/sessions").json()]

    created = client.post("/v1/coresets", json={"method": "pbsc", "benchmarks": ["ts"], "budget": 5,
                                                "reference_models": "all"}).json()
    job = wait_for_job(client, created["job"]["id"])
    assert job["status"] == "succeeded", job
    bodies += [job, client.get("/v1/jobs").json(), client.get(f"/v1/coresets/{created['coreset']['id']}").json(),
               client.get("/v1/coresets").json()]

    buf = io.BytesIO()
    np.savez(buf, ids=np.array(items), states=rng.normal(size=(30, 4)).astype(np.float32))
    assert client.post("/v1/benchmarks/ts/hidden-states", data={"model": "m0"},
                       files={"file": ("s.npz", buf.getvalue())}).status_code == 201
    bodies.append(client.get("/v1/benchmarks/ts/hidden-states").json())

    selection = client.post("/v1/benchmark-selections", json={
        "matrix": {"models": ["a", "b", "c", "d"], "benchmarks": ["x", "y", "z"],
                   "values": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.7], [0.9, 0.8, 0.6], [0.2, 0.4, 0.5]]}, "k": 1})
    assert selection.status_code == 201, selection.text
    bodies += [selection.json(), client.get(f"/v1/benchmark-selections/{selection.json()['id']}").json()]

    # every kind of resource carries at least one timestamp, all of them UTC with Z
    assert assert_utc_z(*bodies) >= 20
    assert all(timestamps(b) for b in bodies)
