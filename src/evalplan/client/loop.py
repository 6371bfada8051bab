"""``run_session``: drive a sequential session to its stopping rule with a scoring callback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalplan.client.client import EvalplanClient


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
