"""``POST /v1/comparisons``: sessions side by side (estimates, intervals, trajectories) and, for each
later session against the first (the baseline), the paired difference on the items both observed
(``evalplan.core.sequential.paired``): the finite-population t interval, the anytime-valid confidence sequence
and the difference of the two sessions' own estimates."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy.orm import Session

from evalplan.benchmarks import repository as benchmark_repository
from evalplan.benchmarks.service import score_range
from evalplan.core.sequential.paired import normal_difference, paired_interval, paired_sequence
from evalplan.core.sequential.stopping import DEFAULT_LEVEL
from evalplan.db.models import EvalSession
from evalplan.kit.errors import ErrorCollector, InvalidInput
from evalplan.kit.validation import finite_or_none
from evalplan.sessions import repository as session_repository
from evalplan.sessions import views as session_views
from evalplan.sessions.service import get_eval_session

MAX_SESSIONS = 10


def _verdict(lo: float | None, hi: float | None) -> str:
    if lo is not None and lo > 0:
        return "b_better"
    if hi is not None and hi < 0:
        return "a_better"
    return "undecided"


def load_sessions(session: Session, ids: list[str]) -> list[EvalSession]:
    """The readable sessions ``ids`` (404 otherwise); 422 for fewer than two, duplicates, multi-target
    sessions or sessions on different benchmarks."""
    if len(ids) < 2 or len(ids) > MAX_SESSIONS:
        raise InvalidInput(f"compare 2 to {MAX_SESSIONS} sessions",
                           [{"field": "sessions", "detail": f"got {len(ids)}"}])
    if len(set(ids)) != len(ids):
        raise InvalidInput("a session is listed twice", [{"field": "sessions", "detail": "duplicates"}])
    rows = [get_eval_session(session, sid) for sid in ids]
    errors = ErrorCollector()
    for i, row in enumerate(rows):
        if row.targets:
            errors.add(f"session {row.id!r} has several targets: compare single-target sessions",
                       field=f"sessions[{i}]")
        elif row.benchmark_id != rows[0].benchmark_id:
            errors.add(f"session {row.id!r} is on another benchmark than {rows[0].id!r}", field=f"sessions[{i}]")
    errors.raise_if_any("sessions that cannot be compared")
    return rows


def compare_sessions(session: Session, ids: list[str], level: float | None = None) -> dict[str, Any]:
    lvl = DEFAULT_LEVEL if level is None else float(level)
    if not 0.0 < lvl < 1.0:
        raise InvalidInput("level must be strictly between 0 and 1", [{"field": "level", "detail": str(level)}])
    rows = load_sessions(session, ids)
    benchmark = benchmark_repository.benchmark_by_id(session, rows[0].benchmark_id)
    assert benchmark is not None
    n_items = benchmark_repository.item_count(session, benchmark.id)
    lo, hi = score_range(benchmark, infinite=True)
    summaries = []
    observed = []
    for row in rows:
        view = session_views.session_view(session, row, benchmark.name)
        summaries.append({key: view[key] for key in ("id", "target", "method", "status", "stop_reason", "n_observed",
                                                     "estimate", "variance", "ci", "level", "previous")}
                         | {"trajectory": session_views.trajectory(session, row)}
                         | ({"compare": view["compare"]} if view.get("compare") else {}))  # a paired session's decision
        observed.append(session_repository.observed_scores(session, row.id))
    base, base_obs = rows[0], observed[0]
    pairs = []
    for row, obs, summary in zip(rows[1:], observed[1:], summaries[1:], strict=True):
        common = sorted(set(base_obs) & set(obs), key=lambda pk: (max(base_obs[pk][0], obs[pk][0]), pk))
        a = [base_obs[pk][1] for pk in common]
        b = [obs[pk][1] for pk in common]
        pair: dict[str, Any] = {"a": base.id, "b": row.id, "a_target": base.target, "b_target": row.target,
                                "level": lvl, "n_common": len(common), "n_items": n_items}
        if common:
            result = paired_interval(a, b, n_population=max(n_items, len(common)), level=lvl)
            pair["paired"] = {"mean_difference": result.mean, "std_error": finite_or_none(result.std_error),
                              "interval": [finite_or_none(result.interval[0]), finite_or_none(result.interval[1])],
                              "b_better": result.b_better, "a_better": result.a_better, "ties": result.ties,
                              "verdict": _verdict(finite_or_none(result.interval[0]),
                                                  finite_or_none(result.interval[1]))}
            if math.isfinite(lo) and math.isfinite(hi):
                seq = paired_sequence(a, b, n_population=max(n_items, len(common)), score_range=(lo, hi), level=lvl)
                pair["anytime"] = {"interval": list(seq[-1]), "verdict": _verdict(*seq[-1]),
                                   "sequence": [{"n": i + 1, "interval": list(s)} for i, s in enumerate(seq)]}
            else:
                pair["anytime"] = None  # the betting sequence needs a bounded score range
        else:
            pair["paired"] = pair["anytime"] = None
        ea, eb = summaries[0], summary
        if ea["estimate"] is not None and eb["estimate"] is not None and ea["variance"] is not None \
                and eb["variance"] is not None:
            diff, (dlo, dhi) = normal_difference(ea["estimate"], ea["variance"], eb["estimate"], eb["variance"], lvl)
            pair["estimates"] = {"difference": diff, "interval": [dlo, dhi], "verdict": _verdict(dlo, dhi)}
        else:
            pair["estimates"] = None
        pairs.append(pair)
    return {"benchmark": benchmark.name, "level": lvl, "n_items": n_items, "sessions": summaries, "pairs": pairs}
