"""What a new benchmark, model or coreset name may be (issue 24, docs/SECURITY.md "Names").

* never ``.`` or ``..``, nor a ``/``-separated part that is ``.`` or ``..``;
* no control, format (bidi overrides and isolates, zero-width characters, BOM), surrogate, line or
  paragraph separator characters (Unicode categories Cc, Cf, Cs, Zl, Zp): such a name displays as
  something else than it is (the rule lives in ``evalplan.kit.text_rules``);
* no literal ``%2F``/``%2f`` (issue 32 item 8): references decode it to ``/``, so ``team-a%2Fmusr`` would
  read as ``team-a/musr``, refused like it;
* a name may hold ``/`` (a model id like ``org/model`` from a harness or the Hugging Face hub, an
  inspect task like ``inspect_evals/gsm8k``), but its part before the first ``/`` is never the name
  of a team (``local`` included): ``team/name`` always means that team's resource
  (``evalplan.auth.naming``), so a name that reads as one is refused (422) on every create path, and
  a team cannot be created under a name that existing names start with (409);
* coreset series names hold neither ``/`` nor ``@`` (``[team/]name@version`` references).

Existing rows are not checked here (only new names): the migration ``0024_team_prefixed_names`` renamed
the ones that read as ``team/name``.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from evalplan.db.models import LOCAL_TEAM_ID, Team
from evalplan.kit.errors import ErrorCollector, InvalidInput
from evalplan.kit.text_rules import name_char_problem

#: an encoded '/': references decode it (``evalplan.auth.naming.normalize_ref``), so a name holding it
#: would read as ``team/name`` or never be reachable by name
ENCODED_SLASHES = ("%2f", "%2F")


def text_problem(name: str, kind: str, *, slash: bool = True) -> str | None:
    """Why ``name`` cannot be a new ``kind`` name, judged on its text alone; None when it can."""
    reason = name_char_problem(name)
    if reason:
        return f"{kind} name {name!r} {reason}"
    if any(encoded in name for encoded in ENCODED_SLASHES):
        return (f"{kind} name {name!r} may not contain '%2F' (an encoded '/': references decode it, "
                "so the name would read as another one)")
    if not slash and ("/" in name or "@" in name):
        return f"{kind} name {name!r} may not contain '/' or '@' (they separate team/name@version)"
    parts = name.split("/")
    if any(p in (".", "..") for p in parts):
        return f"{kind} name {name!r} may not be, or have a '/'-separated part that is, '.' or '..'"
    return None


def team_prefixed(session: Session, names: Iterable[str]) -> dict[str, str]:
    """``{name: team}`` for the names whose part before the first ``/`` is a team's name."""
    prefixes = {n.split("/", 1)[0]: n for n in names if "/" in n}
    if not prefixes:
        return {}
    teams = set(session.scalars(select(Team.name).where(Team.name.in_(list(prefixes)))))
    if LOCAL_TEAM_ID in prefixes:
        teams.add(LOCAL_TEAM_ID)
    return {n: n.split("/", 1)[0] for n in names if "/" in n and n.split("/", 1)[0] in teams}


def check_new_names(session: Session, names: Iterable[str], kind: str, field: str = "name", *,
                    slash: bool = True) -> None:
    """422 naming ``field`` and each bad name, unless every one of ``names`` may be a new ``kind`` name."""
    names = list(names)
    errors = ErrorCollector()
    for name in names:
        reason = text_problem(name, kind, slash=slash)
        if reason:
            errors.add(reason, field=field)
    for name, team in team_prefixed(session, names).items():
        errors.add(f"{kind} name {name!r} would read as team/name (a team is called {team!r}): "
                   f"choose a name that does not start with '{team}/'", field=field)
    if errors:
        raise InvalidInput(f"invalid {kind} name in field {field!r}: {errors.errors[0]['detail']}", errors.errors)


__all__ = ["check_new_names", "team_prefixed", "text_problem"]
