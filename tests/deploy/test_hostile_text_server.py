"""Issue 32 item 1: one GET must never take the API process down.

vl-convert aborts its whole process ("non-unwinding panic") on a C0 control character in a chart's text.
A session target ``evil\\u001ctarget`` was accepted and its ``plot.svg`` (or page) then killed the server.
This runs a real ``evalplan serve`` process (a crash of it cannot take pytest with it):

* the API refuses the name with a located 422 (``target``), nothing stored;
* a row stored before the fix (written straight into the database) still renders: the text passed to the
  chart is escaped, and the render itself runs in a worker process, so the server answers and stays up.
"""

from __future__ import annotations

import sqlite3

import httpx

from support.helpers import embedded_server

EVIL = "evil\u001ctarget"


def _seed(http: httpx.Client) -> None:
    assert http.post("/v1/benchmarks", json={"name": "b", "score_kind": "binary"}).status_code == 201
    rows = ["model," + ",".join(f"q{j}" for j in range(12))]
    rows += [f"m{i}," + ",".join(str((i * j + i + j) % 2) for j in range(12)) for i in range(6)]
    r = http.post("/v1/benchmarks/b/scores", content="\n".join(rows) + "\n", headers={"content-type": "text/csv"})
    assert r.status_code in (200, 201), r.text


def test_control_character_target_cannot_kill_the_server(tmp_path):
    with embedded_server(tmp_path) as api, httpx.Client(base_url=api.base_url, timeout=60) as http:
        _seed(http)
        r = http.post("/v1/sessions", json={"benchmark": "b", "target": EVIL, "method": "random"})
        assert r.status_code == 422, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert any(e.get("field") == "target" for e in r.json()["errors"]), r.json()
        assert "U+001C" in r.json()["detail"]
        for evil in ("a\u0000b", "x\u0007", "\u202eevil"):
            r = http.post("/v1/sessions", json={"benchmark": "b", "target": evil, "method": "random"})
            assert r.status_code == 422, (evil, r.text)
        assert http.get("/v1/sessions").json()["items"] == []

        # a row stored before the rule: rendering it must answer, and the server must stay up
        r = http.post("/v1/sessions", json={"benchmark": "b", "target": "placeholder", "method": "random"})
        assert r.status_code == 201, r.text
        session_id = r.json()["id"]
        with sqlite3.connect(tmp_path / "evalplan.db") as db:
            db.execute("UPDATE eval_sessions SET target = ? WHERE id = ?", (EVIL, session_id))
        for path in (f"/v1/sessions/{session_id}/plot.svg", f"/v1/sessions/{session_id}/plot.png",
                     f"/ui/sessions/{session_id}"):
            r = http.get(path)
            assert r.status_code == 200, (path, r.status_code, r.text[:300])
            if path.endswith(".svg"):
                assert "\u001c" not in r.text and "evil\u241ctarget" in r.text  # shown as the control picture
        assert http.get("/health").json() == {"status": "ok"}
