"""The session tables' queries that other domains call (docs/ARCHITECTURE.md "Table ownership"): a session's
observed scores, the newest estimates per target on a benchmark, other teams' sessions on a benchmark, a
team's sessions for its deletion. Team deletion and the benchmark checks (``evalplan.auth``, below sessions in
the dependency order) get theirs registered here."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from evalplan.auth.deletion import register_team_part
from evalplan.auth.dependents import register_reader
from evalplan.db.models import Benchmark, EvalSession, SessionObservation


def observed_scores(session: Session, session_id: str) -> dict[int, tuple[int, float]]:
    """item pk -> (arrival seq, score) of a single-target session."""
    rows = session.execute(select(SessionObservation.item_pk, SessionObservation.seq, SessionObservation.score)
                           .where(SessionObservation.session_id == session_id)).all()
    return {int(pk): (int(seq), float(score)) for pk, seq, score in rows}


def single_target_estimates(session: Session, benchmark_id: str) -> list[Row[Any]]:
    """The readable single-target sessions on the benchmark, newest first: ``(target, estimate, config, ci_lo,
    ci_hi, n_observed, id, status)``."""
    stmt = (select(EvalSession.target, EvalSession.estimate, EvalSession.config, EvalSession.ci_lo,
                   EvalSession.ci_hi, EvalSession.n_observed, EvalSession.id, EvalSession.status)
            .where(EvalSession.benchmark_id == benchmark_id, EvalSession.target.is_not(None))
            .order_by(EvalSession.created_at.desc(), EvalSession.id.desc()))
    return list(session.execute(stmt).all())


def foreign_session_ids(session: Session, benchmark: Benchmark) -> list[str]:
    """Ids of the sessions of teams other than the benchmark's on it (the caller unscopes)."""
    return list(session.scalars(select(EvalSession.id).where(EvalSession.benchmark_id == benchmark.id,
                                                             EvalSession.team_id != benchmark.team_id)))


def delete_team_sessions(session: Session, team_id: str) -> list[tuple[str, int]]:
    """Delete the team's sessions (observations by cascade); their ``(id, n_observed)``."""
    rows = list(session.scalars(select(EvalSession).where(EvalSession.team_id == team_id)))
    gone = [(s.id, s.n_observed) for s in rows]
    for row in rows:
        session.delete(row)
    return gone


register_reader("foreign_sessions", foreign_session_ids)
register_team_part("sessions", delete_team_sessions)
