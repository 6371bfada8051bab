"""``GET /v1/leaderboard?benchmarks=a,b``: models x benchmarks, measured or marked estimates."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response

from evalplan.auth.deps import DbSession
from evalplan.kit.deps import Pagination
from evalplan.leaderboard import service
from evalplan.leaderboard.schemas import LeaderboardPage

router = APIRouter(prefix="/v1/leaderboard", tags=["leaderboard"])


@router.get("", response_model=LeaderboardPage, response_model_exclude_unset=True,
            responses={200: {"content": {"application/json": {}, "text/csv": {"schema": {"type": "string"}}},
                             "description": "The table (JSON page) or the whole table as CSV."}})
def leaderboard(request: Request, session: DbSession, page: Pagination,
                benchmarks: Annotated[str, Query(description="Comma-separated benchmark names or ids.")],
                level: Annotated[float | None, Query(gt=0, lt=1, description="Level of coreset intervals "
                                                                             "(default 0.95).")] = None,
                sort: Annotated[str | None, Query(description="A benchmark's name, `mean` or `model` (default: the "
                                                              "only benchmark, else `mean`).")] = None,
                order: Annotated[Literal["desc", "asc"], Query()] = "desc",
                format: Annotated[Literal["json", "csv"] | None, Query(
                    description="`csv`: the whole table as CSV (as `Accept: text/csv`).")] = None
                ) -> LeaderboardPage | Response:
    """A row per model readable by the caller, a cell per benchmark: `kind: measured` (the mean of the
    model's scores on every item), `session` (its newest session's estimate and interval) or `coreset`
    (the prediction of a ready coreset whose items the model has scores on), each with its `level`.
    `Accept: text/csv` (or `format=csv`) returns every row as CSV; JSON pages with `limit` / `cursor`."""
    board = service.build(session, service.parse_benchmarks(benchmarks), level=level, sort=sort, order=order)
    accept = request.headers.get("accept", "")
    if format == "csv" or (format is None and "text/csv" in accept and "application/json" not in accept):
        names = "-".join(b["name"] for b in board.benchmarks)[:120] or "leaderboard"
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in names)
        return Response(service.to_csv(board), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="leaderboard-{safe}.csv"'})
    rows, next_cursor = service.page(board, limit=page.limit, cursor=page.cursor)
    return LeaderboardPage.model_validate({
        "benchmarks": board.benchmarks, "level": board.level, "sort": board.sort, "order": board.order,
        "n_models": len(board.rows), "items": rows, "next_cursor": next_cursor})
