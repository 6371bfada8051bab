"""The leaderboard pages: ``/ui/leaderboard?benchmarks=a,b`` (a suite) and the section of the
benchmark page; both are ``evalplan.leaderboard.service`` (what ``GET /v1/leaderboard`` returns)."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from evalplan.auth.deps import DbSession
from evalplan.benchmarks import service as benchmark_service
from evalplan.leaderboard import service
from evalplan.ui.pages.home import Cursor
from evalplan.ui.routing import page_router
from evalplan.ui.templating import render, root_path

router = page_router()
ROWS_PER_PAGE = 50


def leaderboard_context(request: Request, session: Session, benchmarks: list[str], *, sort: str | None,
                        order: str, cursor: str | None, page_path: str, extra: dict[str, str] | None = None,
                        rows_per_page: int = ROWS_PER_PAGE) -> dict[str, Any]:
    """The table's rows (one page), its sort links and its CSV/JSON links."""
    board = service.build(session, benchmarks, sort=sort, order=order)
    rows, next_cursor = service.page(board, limit=rows_per_page, cursor=cursor)
    root = root_path(request)
    names = ",".join(b["name"] for b in board.benchmarks)
    base = {**(extra or {}), "sort": board.sort, "order": board.order}

    def link(**changes: str) -> str:
        return f"{root}{page_path}?{urlencode({**base, **changes})}"

    def sort_link(column: str) -> str:
        flipped = "asc" if board.sort == column and board.order == "desc" else "desc"
        return link(sort=column, order=flipped if board.sort == column else ("asc" if column == "model" else "desc"))

    api = f"{root}/v1/leaderboard?{urlencode({'benchmarks': names, 'sort': board.sort, 'order': board.order})}"
    offset = service.decode_offset(cursor)
    return {"board": board, "rows": rows, "next_cursor": next_cursor, "cursor": cursor, "offset": offset,
            "sort_links": {c: sort_link(c) for c in ["model", "mean", *[b["name"] for b in board.benchmarks]]},
            "page_base": link(), "csv_href": api + "&format=csv", "json_href": api,
            "csv_name": f"leaderboard-{names.replace(',', '-')}.csv",
            "full_href": f"{root}/ui/leaderboard?{urlencode({'benchmarks': names})}"}


PICKER_LIMIT = 200


@router.get("/ui/leaderboard")
def leaderboard_page(request: Request, session: DbSession,
                     benchmarks: Annotated[list[str] | None, Query(description="Benchmark names, comma-separated "
                                                                               "or repeated; none: a picker")] = None,
                     sort: Annotated[str | None, Query()] = None,
                     order: Annotated[Literal["desc", "asc"], Query()] = "desc", cursor: Cursor = None) -> Response:
    """The leaderboard of the named benchmarks; without any (the navigation's link), a form to pick them."""
    if not any(b.strip() for b in benchmarks or []):
        page = benchmark_service.list_benchmarks(session, limit=PICKER_LIMIT, cursor=None)
        return render(request, "leaderboard.html", nav="leaderboard", board=None, candidates=page.items,
                      more=page.next_cursor is not None)
    names = service.parse_benchmarks(",".join(benchmarks or []))
    context = leaderboard_context(request, session, names, sort=sort, order=order, cursor=cursor,
                                  page_path="/ui/leaderboard", extra={"benchmarks": ",".join(names)})
    return render(request, "leaderboard.html", nav="leaderboard", **context)
