"""The request's database session, scoped to its caller (``Annotated[..., Depends(...)]`` style).

* ``DbSession``: one SQLAlchemy session per request, scoped to the caller's team (the route commits).
* ``CurrentCaller`` (``evalplan.auth.caller``): who is calling; the injection point for authentication.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from evalplan.auth.caller import Caller, CurrentCaller, authenticate
from evalplan.auth.scoping import bind_caller
from evalplan.kit.db import begin_write

__all__ = ["CurrentCaller", "DbSession", "get_db"]


def get_db(request: Request, caller: Annotated[Caller, Depends(authenticate)]) -> Iterator[Session]:
    """The request's session, scoped to the caller's team (``evalplan.auth.scoping``)."""
    with request.app.state.session_factory() as session:
        bind_caller(session, caller)
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            begin_write(session)
        yield session


DbSession = Annotated[Session, Depends(get_db)]
