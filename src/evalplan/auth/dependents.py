"""What other teams build on a benchmark or a model: the integrity checks before a deletion or a change
to private (``DELETE /v1/benchmarks/{b}``, ``DELETE /v1/models/{m}``, ``PATCH`` visibility, team deletion).

They read the coreset and session tables across teams (``unscoped``: counted, never returned to the
caller). Those tables belong to domains above auth in the dependency order (coresets, sessions, and the
benchmarks' score index), so each owner registers its reader here from its ``repository.py``
(``register_reader``) and the lower domains (models, benchmarks) and team deletion ask here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from evalplan.auth.scoping import unscoped
from evalplan.db.models import Benchmark, Model

__all__ = ["READERS", "foreign_dependents", "published_dependents", "reader", "register_reader"]

#: what each reader answers, and the domain whose repository registers it
READERS = {
    "published_coresets": "coresets: (id, benchmark_ids, reference_models) of every published coreset",
    "foreign_coresets": "coresets: ids of the coresets of teams other than the benchmark's built on it",
    "team_published_coresets": "coresets: ids of a team's published coresets",
    "readable_coresets": "coresets: which of these coreset ids the caller may read",
    "foreign_sessions": "sessions: ids of the sessions of teams other than the benchmark's on it",
    "scored_benchmarks": "benchmarks: ids of the benchmarks a model has scores on",
}
_READERS: dict[str, Callable[..., Any]] = {}


def register_reader(name: str, read: Callable[..., Any]) -> None:
    """The owner of the rows behind ``name`` (one of ``READERS``) answers it with ``read``."""
    if name not in READERS:
        raise ValueError(f"unknown dependents reader {name!r}")
    _READERS[name] = read


def reader(name: str) -> Callable[..., Any]:
    read = _READERS.get(name)
    if read is None:  # a process that checks dependents imports the domains (evalplan.main does)
        raise RuntimeError(f"no {name!r} reader registered ({READERS[name]}): import its domain's repository")
    return read


def published_dependents(session: Session, *, benchmark_id: str | None = None,
                         model: Model | None = None) -> list[str]:
    """Published coresets (of any team: counted, never shown) built on the benchmark, or using the model as
    a reference (by name, or through ``"all"`` when it has scores on one of their benchmarks)."""
    with unscoped(session):
        rows = reader("published_coresets")(session)
        scored_on: set[str] = reader("scored_benchmarks")(session, model.id) if model is not None else set()
    found = []
    for coreset_id, benchmark_ids, references in rows:
        ids = set(benchmark_ids or [])
        if benchmark_id is not None and benchmark_id in ids:
            found.append(coreset_id)
        elif model is not None and ids & scored_on and (
                references == "all" or (isinstance(references, list) and model.name in references)):
            found.append(coreset_id)
    return found


def foreign_dependents(session: Session, benchmark: Benchmark) -> list[str]:
    """Ids of other teams' coresets and sessions built on ``benchmark`` (unscoped count: they are not the
    caller's to read, so only how many is reported)."""
    with unscoped(session):
        coresets: list[str] = reader("foreign_coresets")(session, benchmark)
        sessions: list[str] = reader("foreign_sessions")(session, benchmark)
    return coresets + sessions
