"""``/ui/compare?sessions=a,b``: sessions side by side (estimates and intervals vs n) and, for each
later session against the first, "is B better than A?" (``evalplan.comparisons.service``, what
``POST /v1/comparisons`` returns)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Query, Request
from fastapi.responses import Response

from evalplan import charts
from evalplan.auth.deps import DbSession
from evalplan.benchmarks.repository import benchmark_by_id
from evalplan.comparisons import service
from evalplan.sessions.service import get_eval_session
from evalplan.sessions.validation import score_range
from evalplan.ui.routing import page_router
from evalplan.ui.templating import render

router = page_router()


@router.get("/ui/compare")
def compare_page(request: Request, session: DbSession,
                 sessions: Annotated[list[str], Query(description="Session ids (repeated or comma-separated); "
                                                                  "the first is A")],
                 level: Annotated[float | None, Query(gt=0, lt=1)] = None,
                 baseline: Annotated[Literal["first", "oldest"], Query(
                     description="A is the first listed session, or the oldest one")] = "first") -> Response:
    ids = [s.strip() for given in sessions for s in given.split(",") if s.strip()]
    if baseline == "oldest" and len(set(ids)) == len(ids):
        ids.sort(key=lambda sid: (get_eval_session(session, sid).created_at, sid))
    result = service.compare_sessions(session, ids, level)
    bench = benchmark_by_id(session, get_eval_session(session, ids[0]).benchmark_id)
    lo, hi = score_range(bench) if bench is not None else (None, None)
    bounded = (lo, hi) if lo is not None and hi is not None and abs(lo) != float("inf") and abs(hi) != float("inf") \
        else None
    labels = {s["id"]: f"{s['target']} ({s['id'][-6:]})" for s in result["sessions"]}
    rows = [{"session": labels[s["id"]], **point} for s in result["sessions"] for point in s["trajectory"]]
    side = charts.sessions_side_by_side(rows, level=result["level"], score_range=bounded)
    pair_charts: list[dict[str, Any]] = []
    for pair in result["pairs"]:
        anytime, paired = pair.get("anytime"), pair.get("paired")
        if anytime and anytime["sequence"]:
            fixed = tuple(paired["interval"]) if paired and None not in paired["interval"] else None
            chart = charts.paired_difference(anytime["sequence"], level=result["level"], fixed=fixed,
                                             difference=paired["mean_difference"] if paired else None,
                                             title=f"{pair['b_target']} - {pair['a_target']} on common items")
            pair_charts.append({"pair": pair, "svg": charts.to_inline_svg(
                chart, label=f"Paired difference {pair['b']} minus {pair['a']}", prefix=f"pair-{pair['b']}")})
        else:
            pair_charts.append({"pair": pair, "svg": None})
    return render(request, "compare.html", result=result, labels=labels, pairs=pair_charts,
                  side_svg=charts.to_inline_svg(side, label="Estimates of the compared sessions", prefix="side"),
                  api_href=f"{request.scope.get('root_path', '')}/v1/comparisons?sessions={','.join(ids)}")
