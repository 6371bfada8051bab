"""The session tables' queries (docs/ARCHITECTURE.md "Table ownership"): what other domains read (a session's
observed scores, the newest estimates per target on a benchmark, other teams' sessions on a benchmark, a
team's sessions for its deletion) and the reads of the session checks (``evalplan.sessions.validation``).
Team deletion and the benchmark checks (``evalplan.auth``, below sessions in the dependency order) get theirs
registered here."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, func, literal_column, select, union_all
from sqlalchemy.orm import Session

from evalplan.auth.deletion import register_team_part
from evalplan.auth.dependents import register_reader
from evalplan.db.models import Benchmark, EvalSession, SessionObservation, Team


def observed_scores(session: Session, session_id: str) -> dict[int, tuple[int, float]]:
    """item pk -> (arrival seq, score) of a single-target session."""
    rows = session.execute(select(SessionObservation.item_pk, SessionObservation.seq, SessionObservation.score)
                           .where(SessionObservation.session_id == session_id)).all()
    return {int(pk): (int(seq), float(score)) for pk, seq, score in rows}


def single_target_estimates(session: Session, benchmark_id: str) -> list[
        Row[str | None, float | None, dict[str, Any], float | None, float | None, int, str, str]]:
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


def session_by_id(session: Session, session_id: str) -> EvalSession | None:
    """The readable session ``session_id``."""
    return session.get(EvalSession, session_id)


def locked_with_benchmark(session: Session, session_id: str) -> Row[EvalSession, Benchmark, str] | None:
    """(the session's row, locked ``FOR UPDATE`` and refreshed, its benchmark, its team's name) in one round trip;
    None when there is no readable session ``session_id``."""
    return session.execute(
        select(EvalSession, Benchmark, Team.name).join(Benchmark, Benchmark.id == EvalSession.benchmark_id)
        .outerjoin(Team, Team.id == EvalSession.team_id)
        .where(EvalSession.id == session_id).with_for_update(of=EvalSession)
        .execution_options(populate_existing=True)).first()


def item_scores(session: Session, session_id: str) -> list[Row[int, float]]:
    """``(item_pk, score)`` of every observation of the session."""
    return list(session.execute(select(SessionObservation.item_pk, SessionObservation.score)
                                .where(SessionObservation.session_id == session_id)).all())


def observations_on(session: Session, benchmark_id: str
                    ) -> list[Row[str | None, list[str] | None, int, int, float]]:
    """``(target, targets, target_index, item_pk, score)`` of every observation of the readable sessions on the
    benchmark."""
    return list(session.execute(
        select(EvalSession.target, EvalSession.targets, SessionObservation.target_index,
               SessionObservation.item_pk, SessionObservation.score)
        .join(SessionObservation, SessionObservation.session_id == EvalSession.id)
        .where(EvalSession.benchmark_id == benchmark_id)).all())


def stored_scores(session: Session, session_id: str, pks: list[int]) -> tuple[dict[tuple[int, int], float], int]:
    """The stored scores ``{(target_index, item_pk): score}`` of the items ``pks`` in session
    ``session_id``, and the number of observations it has stored: one round trip for at most 1000
    items (the count rides along as a row with ``target_index`` -1)."""
    obs = SessionObservation
    stored: dict[tuple[int, int], float] = {}
    n_stored = -1
    for start in range(0, max(len(pks), 1), 1000):
        head = select(obs.target_index, obs.item_pk, obs.score).where(
            obs.session_id == session_id, obs.item_pk.in_(pks[start:start + 1000]))
        stmt: Any = head if start else union_all(
            head, select(literal_column("-1"), func.count(), literal_column("0.0")).where(obs.session_id == session_id))
        for t, pk, score in session.execute(stmt):
            if int(t) < 0:
                n_stored = int(pk)
            else:
                stored[(int(t), int(pk))] = float(score)
    assert n_stored >= 0
    return stored, n_stored


register_reader("foreign_sessions", foreign_session_ids)
register_team_part("sessions", delete_team_sessions)
