"""The leaderboard of one or more benchmarks: a row per model, a cell per benchmark.

A cell is, in this order of preference:

* ``measured``: the model has a stored score (the benchmark's default metric) on every item; the
  cell is their mean, the full-benchmark score itself (no interval);
* ``session``: the newest session readable by the caller whose target is the model; the cell is its
  estimate and interval at the session's own level;
* ``coreset``: the model has stored scores on every item a ready coreset selected from the
  benchmark (it ran the coreset); the cell is ``POST /v1/coresets/{id}/predict``'s estimate and
  interval at the asked level (newest such coreset).

Everything is read through the caller's scoped session (``evalplan.auth.scoping``): another team's
private benchmarks, sessions and coresets are neither listed nor used.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evalplan.benchmarks.service import get_benchmarks
from evalplan.core.sequential.stopping import DEFAULT_LEVEL
from evalplan.coresets import predict as coreset_predict
from evalplan.db.models import Benchmark, Coreset, CoresetItem, EvalSession, Item, Model, Score
from evalplan.kit.csv_cells import neutralise
from evalplan.kit.errors import EvalplanError, InvalidInput
from evalplan.kit.pagination import decode_cursor, encode_cursor, invalid_cursor

KINDS = ("measured", "session", "coreset")
ORDERS = ("desc", "asc")
#: coresets tried per benchmark for the models that ran one (newest first)
MAX_CORESETS = 5


@dataclass
class Leaderboard:
    benchmarks: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    level: float
    sort: str
    order: str


def parse_benchmarks(value: str | None) -> list[str]:
    names = [b.strip() for b in (value or "").split(",") if b.strip()]
    if not names:
        raise InvalidInput("name at least one benchmark: ?benchmarks=a,b",
                           [{"parameter": "benchmarks", "detail": "empty"}])
    if len(set(names)) != len(names):
        raise InvalidInput("a benchmark is named twice", [{"parameter": "benchmarks", "detail": ",".join(names)}])
    return names


def _measured(session: Session, bench: Benchmark) -> tuple[dict[str, dict[str, Any]], set[str], int]:
    """Complete models' mean scores, the ids of models with only some items scored, and the item count."""
    n_items = int(session.scalar(select(func.count()).select_from(Item).where(Item.benchmark_id == bench.id)) or 0)
    rows = session.execute(
        select(Score.model_id, func.count(), func.avg(Score.value))
        .join(Item, Item.pk == Score.item_pk)
        .where(Item.benchmark_id == bench.id, Score.metric == bench.default_metric)
        .group_by(Score.model_id)).all()
    complete: dict[str, dict[str, Any]] = {}
    partial: set[str] = set()
    for model_id, count, mean in rows:
        if n_items and int(count) == n_items:
            complete[model_id] = {"kind": "measured", "score": float(mean), "ci": None, "level": None,
                                  "n_observed": int(count), "source": None}
        else:
            partial.add(model_id)
    return complete, partial, n_items


def _sessions(session: Session, bench: Benchmark) -> dict[str, dict[str, Any]]:
    """The newest readable single-target session per target name."""
    found: dict[str, dict[str, Any]] = {}
    stmt = (select(EvalSession).where(EvalSession.benchmark_id == bench.id, EvalSession.target.is_not(None))
            .order_by(EvalSession.created_at.desc(), EvalSession.id.desc()))
    for row in session.scalars(stmt):
        name = str(row.target)
        if name in found or row.estimate is None or not math.isfinite(row.estimate):
            continue
        level = float((row.config or {}).get("level") or DEFAULT_LEVEL)
        ci = [row.ci_lo, row.ci_hi] if row.ci_lo is not None and row.ci_hi is not None else None
        found[name] = {"kind": "session", "score": float(row.estimate), "ci": ci, "level": level,
                       "n_observed": row.n_observed, "source": row.id, "status": row.status}
    return found


def _coreset_cells(session: Session, bench: Benchmark, model_ids: set[str], level: float
                   ) -> dict[str, dict[str, Any]]:
    """Predictions for the models (ids) that have scores on every item a ready coreset picked from ``bench``."""
    found: dict[str, dict[str, Any]] = {}
    if not model_ids:
        return found
    coresets = [c for c in session.scalars(select(Coreset).where(Coreset.status == "ready")
                                           .order_by(Coreset.created_at.desc(), Coreset.id.desc()))
                if bench.id in (c.benchmark_ids or [])][:MAX_CORESETS]
    for coreset in coresets:
        wanted = model_ids - set(found)
        if not wanted:
            break
        picked = select(CoresetItem.item_pk).where(CoresetItem.coreset_id == coreset.id,
                                                   CoresetItem.benchmark_id == bench.id)
        k = int(session.scalar(select(func.count()).select_from(picked.subquery())) or 0)
        if k == 0:
            continue
        covered = session.execute(
            select(Score.model_id, func.count()).where(Score.model_id.in_(wanted), Score.metric == bench.default_metric,
                                                        Score.item_pk.in_(picked))
            .group_by(Score.model_id)).all()
        ids = sorted(m for m, count in covered if int(count) == k)
        if not ids:
            continue
        try:
            batch = coreset_predict.predict_models(session, coreset, ids, level)
        except EvalplanError:
            continue  # e.g. a multi-benchmark coreset whose other benchmarks the models did not run
        for model_id, prediction in zip(ids, batch["predictions"], strict=True):
            entry = (prediction.get("benchmarks") or {}).get(bench.name)
            if not entry or entry.get("estimate") is None:
                continue
            interval = entry.get("interval")
            found[model_id] = {"kind": "coreset", "score": float(entry["estimate"]),
                               "ci": list(interval) if interval else None, "level": float(batch["level"]),
                               "n_observed": k, "source": coreset.id,
                               "extrapolation": bool(prediction.get("extrapolation", False))}
    return found


def build(session: Session, benchmark_refs: list[str], *, level: float | None = None, sort: str | None = None,
          order: str = "desc") -> Leaderboard:
    """Every readable model's cell on each benchmark, sorted (``sort``: a benchmark's name, ``mean``
    or ``model``; default the only benchmark, else ``mean``)."""
    lvl = DEFAULT_LEVEL if level is None else float(level)
    if not 0.0 < lvl < 1.0:
        raise InvalidInput("level must be strictly between 0 and 1", [{"parameter": "level", "detail": str(level)}])
    if order not in ORDERS:
        raise InvalidInput("order must be desc or asc", [{"parameter": "order", "detail": order}])
    benchmarks = get_benchmarks(session, benchmark_refs, location="parameter")
    names = [b.name for b in benchmarks]
    sort = sort or (names[0] if len(names) == 1 else "mean")
    if sort not in (*names, "mean", "model"):
        raise InvalidInput(f"sort must be one of the benchmarks, 'mean' or 'model', got {sort!r}",
                           [{"parameter": "sort", "detail": f"choices: {', '.join([*names, 'mean', 'model'])}"}])
    cells: dict[str, dict[str, dict[str, Any]]] = {}  # model name -> benchmark name -> cell
    meta: list[dict[str, Any]] = []
    for bench in benchmarks:
        measured, partial, n_items = _measured(session, bench)
        ids = set(measured) | partial
        model_names = dict(session.execute(select(Model.id, Model.name).where(Model.id.in_(ids))).all()) if ids else {}
        for model_id, cell in measured.items():
            if model_id in model_names:
                cells.setdefault(model_names[model_id], {})[bench.name] = cell
        for name, cell in _sessions(session, bench).items():
            if bench.name not in cells.get(name, {}):
                cells.setdefault(name, {})[bench.name] = cell
        remaining = {m for m in partial if m in model_names and bench.name not in cells.get(model_names[m], {})}
        for model_id, cell in _coreset_cells(session, bench, remaining, lvl).items():
            cells.setdefault(model_names[model_id], {})[bench.name] = cell
        meta.append({"id": bench.id, "name": bench.name, "n_items": n_items, "score_kind": bench.score_kind})
    rows = []
    for model, by_bench in cells.items():
        scores = [by_bench[b]["score"] for b in names if b in by_bench]
        mean = sum(scores) / len(scores) if len(scores) == len(names) else None
        rows.append({"model": model, "mean": mean,
                     "kinds": sorted({c["kind"] for c in by_bench.values()}, key=KINDS.index),
                     "cells": {b: by_bench.get(b) for b in names}})

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        if sort == "model":
            return (row["model"],)
        value = row["mean"] if sort == "mean" else (row["cells"][sort] or {}).get("score")
        if value is None:
            return (True, 0.0, row["model"])
        return (False, -float(value) if order == "desc" else float(value), row["model"])

    rows.sort(key=key, reverse=(sort == "model" and order == "desc"))
    return Leaderboard(meta, rows, lvl, sort, order)


def decode_offset(cursor: str | None) -> int:
    offset = decode_cursor(cursor) if cursor else 0
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise invalid_cursor()
    return offset


def page(board: Leaderboard, *, limit: int, cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the sorted rows; the cursor holds the offset of the next row."""
    offset = decode_offset(cursor)
    end = offset + limit
    return board.rows[offset:end], encode_cursor(end) if end < len(board.rows) else None


def _number(value: Any) -> str:
    return "" if value is None else repr(float(value))


def to_csv(board: Leaderboard) -> str:
    """The whole table: ``model, mean`` then per benchmark its score, kind, interval and level."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = ["model", "mean"]
    for b in board.benchmarks:
        header += [b["name"], f"{b['name']} kind", f"{b['name']} lo", f"{b['name']} hi", f"{b['name']} level"]
    writer.writerow([neutralise(h) for h in header])
    for row in board.rows:
        line = [neutralise(row["model"]), _number(row["mean"])]
        for b in board.benchmarks:
            cell = row["cells"].get(b["name"])
            if cell is None:
                line += ["", "", "", "", ""]
                continue
            ci = cell.get("ci") or [None, None]
            line += [_number(cell["score"]), cell["kind"], _number(ci[0]), _number(ci[1]), _number(cell.get("level"))]
        writer.writerow(line)
    return out.getvalue()
