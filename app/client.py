"""A small Evalplan client for CI jobs, using only the standard library (no server dependencies).

Copy this file next to a CI script, or ``from app.client import EvalplanClient, run_session``::

    client = EvalplanClient("http://evalplan:8000")
    final = run_session(client, "mmlu", "my-checkpoint-123", lambda item_id: run_my_model(item_id))
    print(final["estimate"], final["ci"])
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

__all__ = ["EvalplanClient", "EvalplanError", "run_session"]


class EvalplanError(Exception):
    """An HTTP error from the server; ``problem`` is its RFC 9457 problem+json body (when it sent one)."""

    def __init__(self, status: int, problem: dict[str, Any] | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.problem = problem or {}


class EvalplanClient:
    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, timeout: float = 60.0,
                 headers: dict[str, str] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.headers = dict(headers or {})

    # ------------------------------------------------------------------ transport
    def request(self, method: str, path: str, body: Any = None, *, params: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> Any:
        url = self.base_url + path
        if params:
            query = {k: v for k, v in params.items() if v is not None}
            if query:
                url += "?" + urllib.parse.urlencode(query)
        data = None
        all_headers = {"Accept": "application/json", **self.headers, **(headers or {})}
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                problem = json.loads(raw)
            except ValueError:
                problem = None
            detail = problem.get("detail") if isinstance(problem, dict) else raw[:500].decode(errors="replace")
            raise EvalplanError(exc.code, problem if isinstance(problem, dict) else None,
                                f"{method} {path} -> {exc.code}: {detail}") from None
        return json.loads(raw) if raw else None

    # ------------------------------------------------------------------ sessions
    def create_session(self, benchmark: str, target: str, *, reference_models: list[str] | str | None = None,
                       method: str | None = None, epsilon1: float | None = None, epsilon2: float | None = None,
                       window: int | None = None, refit_every: int | None = None, max_items: int | None = None,
                       batch_size: int | None = None, hyperparameters: dict[str, float] | None = None,
                       seed: int | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"benchmark": benchmark, "target": target}
        optional = {"reference_models": reference_models, "method": method, "epsilon1": epsilon1,
                    "epsilon2": epsilon2, "window": window, "refit_every": refit_every, "max_items": max_items,
                    "batch_size": batch_size, "hyperparameters": hyperparameters, "seed": seed}
        body.update({k: v for k, v in optional.items() if v is not None})
        return self.request("POST", "/v1/sessions", body)

    def observe(self, session_id: str, item: str, score: float) -> dict[str, Any]:
        """Post one score; returns the updated session."""
        return self.request("POST", f"/v1/sessions/{urllib.parse.quote(session_id, safe='')}/observations",
                            {"item": item, "score": score})

    def observe_many(self, session_id: str, observations: list[tuple[str, float]]) -> dict[str, Any]:
        """Post several scores at once (all-or-nothing); returns the updated session."""
        return self.request("POST", f"/v1/sessions/{urllib.parse.quote(session_id, safe='')}/observations",
                            {"observations": [{"item": i, "score": s} for i, s in observations]})

    def get_session(self, session_id: str) -> dict[str, Any]:
        return self.request("GET", f"/v1/sessions/{urllib.parse.quote(session_id, safe='')}")

    def trajectory(self, session_id: str) -> list[dict[str, Any]]:
        return self.request("GET", f"/v1/sessions/{urllib.parse.quote(session_id, safe='')}/trajectory")


def run_session(client: EvalplanClient, benchmark: str, target: str, score_fn: Callable[[str], float], *,
                max_steps: int | None = None, **create_options: Any) -> dict[str, Any]:
    """Run a sequential session to its stopping rule and return the final session.

    Loop: read ``next_items``, call ``score_fn(item_id) -> score`` for each, post them, until the
    session's ``status`` is ``stopped``. ``create_options`` go to ``create_session`` (e.g.
    ``max_items=200``); ``max_steps`` bounds the number of posts as a safety net.
    """
    session = client.create_session(benchmark, target, **create_options)
    steps = 0
    while session["status"] != "stopped":
        items = session["next_items"]
        if not items:
            session = client.get_session(session["id"])
            if session["status"] == "stopped" or not session["next_items"]:
                break
            continue
        scores = [(item, float(score_fn(item))) for item in items]
        if len(scores) == 1:
            session = client.observe(session["id"], *scores[0])
        else:
            session = client.observe_many(session["id"], scores)
        steps += 1
        if max_steps is not None and steps >= max_steps:
            break
    return session
