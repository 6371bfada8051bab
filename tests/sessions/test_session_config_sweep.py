"""Every session configuration a caller can name, over HTTP: each public and former method, each value of each
enumerated ``method_params`` field and each interval kind (read from ``GET /v1/sessions/methods``, so a new one
joins on its own), at non-default levels, with a precision stop and an anytime-valid one, on a binary and a
continuous benchmark. Each is created and fed three rounds of the items it proposes: every answer is 201/200 or a
located 4xx problem, never a 5xx (a ``level: 0.9`` session of the default method was a 500 until 3a0326b:
schemathesis's random bodies never named a seeded benchmark together with a non-default level)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from support.helpers import create_benchmark, upload_items, upload_score_cells

N_ITEMS, N_REFS = 40, 8


def upload(client: TestClient, name: str, kind: str) -> dict[str, Any]:
    rng = np.random.default_rng(11)
    ability = np.linspace(-1.5, 1.5, N_REFS + 1)
    p = 1 / (1 + np.exp(-(ability[:, None] - rng.normal(0, 1.2, N_ITEMS))))
    scores = (rng.random(p.shape) < p).astype(float) if kind == "binary" else np.round(p, 3)
    items = [f"q{j:02d}" for j in range(N_ITEMS)]
    names = [f"ref-{i}" for i in range(N_REFS)] + ["tgt"]
    bench: dict[str, Any] = {"score_kind": kind}
    if kind == "continuous":
        bench |= {"score_min": 0.0, "score_max": 1.0}
    create_benchmark(client, name, **bench)
    upload_items(client, name, [{"id": i, "prompt": f"question {i}"} for i in items])
    upload_score_cells(client, name, [{"model": names[i], "item": items[j], "score": float(scores[i, j])}
                                      for i in range(len(names)) for j in range(N_ITEMS)])
    return {"name": name, "truth": dict(zip(items, scores[-1].tolist())), "refs": names[:-1]}


def variants(table: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, request fields) per method, per enumerated parameter value and per interval kind."""
    for spec in table["methods"]:
        name = spec["name"]
        yield name, {"method": name}
        for kind in spec.get("interval_kinds") or []:
            yield f"{name} interval_kind={kind}", {"method": name, "interval_kind": kind}
        for param, schema in (spec.get("method_params_schema") or {}).get("properties", {}).items():
            values = schema.get("enum") or ([not schema.get("default")] if schema.get("type") == "boolean" else [])
            for value in values:
                yield f"{name} {param}={value}", {"method": name, "method_params": {param: value}}
    for former in table["deprecated"]:
        yield former["name"], {"method": former["name"]}


@pytest.mark.slow
def test_no_configuration_is_a_server_error(client: TestClient) -> None:
    data = {kind: upload(client, f"sweep_{kind}", kind) for kind in ("binary", "continuous")}
    table = client.get("/v1/sessions/methods").json()
    failures, created = [], 0
    for label, fields in variants(table):
        for kind, d in data.items():
            for level, stop in ((0.9, {"half_width": 0.1}), (0.99, {"half_width": 0.1, "anytime_valid": True})):
                body = {"benchmark": d["name"], "target": "tgt", "reference_models": d["refs"], "level": level,
                        "batch_size": 3, **fields}
                if stop is not None:
                    body["stop"] = {**stop, "level": level}
                r = client.post("/v1/sessions", json=body)
                where = f"{label} on {kind} at {level} stop={stop}"
                if r.status_code >= 500:
                    failures.append(f"create {where}: {r.status_code} {r.text[:300]}")
                    continue
                if r.status_code != 201:
                    problem = r.json()
                    assert 400 <= r.status_code < 500 and r.headers["content-type"].startswith(
                        "application/problem+json") and problem.get("detail"), (where, r.text)
                    continue
                created += 1
                session = r.json()
                for _ in range(3):
                    if session["status"] != "active" or not session["next_items"]:
                        break
                    obs = [{"item": i, "score": d["truth"][i]} for i in session["next_items"]]
                    r = client.post(f"/v1/sessions/{session['id']}/observations", json={"observations": obs})
                    if r.status_code != 200:
                        failures.append(f"observe {where}: {r.status_code} {r.text[:300]}")
                        break
                    session = r.json()
                    lo, hi = session["ci"]
                    if not (lo <= session["estimate"] <= hi and session["level"] == level):
                        failures.append(f"interval {where}: {session['estimate']} {session['ci']} {session['level']}")
    assert not failures, "\n".join(failures)
    assert created >= 100  # the sweep reached sessions, not only refusals
