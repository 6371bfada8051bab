"""Who is calling: the one injection point for authentication and team scoping.

Today every request acts as the built-in team ``local`` (``EVALPLAN_AUTH=off`` in API.md "Teams and
tokens"). Authentication plugs in here: a dependency that verifies the bearer token and stores a
:class:`Caller` on ``request.state.caller`` (installed once for every ``/v1`` router in
``app.main``); routes and services that scope by team take ``caller: CurrentCaller``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

LOCAL_TEAM = "local"


@dataclass(frozen=True)
class Caller:
    """The authenticated principal of a request: its team, token and scopes."""

    team: str = LOCAL_TEAM
    token_id: str | None = None
    scopes: frozenset[str] = field(default_factory=lambda: frozenset({"read", "write", "admin"}))


LOCAL_CALLER = Caller()


def current_caller(request: Request) -> Caller:
    """The caller an authentication dependency stored on the request, else the local team."""
    caller = getattr(request.state, "caller", None)
    return caller if isinstance(caller, Caller) else LOCAL_CALLER


CurrentCaller = Annotated[Caller, Depends(current_caller)]
