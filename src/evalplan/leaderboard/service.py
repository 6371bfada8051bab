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
from threading import Lock
from typing import Any

import numpy as np
from cachetools import LRUCache
from sqlalchemy import text
from sqlalchemy.orm import Session

from evalplan.benchmarks import repository as benchmark_repository
from evalplan.benchmarks.score_matrix import aligned, item_order, read_rows
from evalplan.benchmarks.service import get_benchmarks
from evalplan.core.sequential.stopping import DEFAULT_LEVEL
from evalplan.coresets import predict as coreset_predict
from evalplan.coresets import repository as coreset_repository
from evalplan.db.models import Benchmark
from evalplan.kit.csv_cells import neutralise
from evalplan.kit.errors import EvalplanError, InvalidInput
from evalplan.kit.pagination import decode_cursor, encode_cursor, invalid_cursor
from evalplan.models import repository as model_repository
from evalplan.sessions import repository as session_repository

KINDS = ("measured", "session", "coreset")
ORDERS = ("desc", "asc")
#: coresets tried per benchmark for the models that ran one (newest first)
MAX_CORESETS = 5
#: per-model (count, mean) of recent (benchmark, data version, items): the warm leaderboard reads no scores
_SUMMARIES: LRUCache[tuple[Any, ...], dict[str, tuple[int, float]]] = LRUCache(maxsize=256)
_SUMMARIES_LOCK = Lock()


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


#: each model's count and mean of its scores at positions < :n (the items, when their positions are 0..n-1)
SQLITE_ROW_SUMMARIES = (
    "SELECT r.model_id, count(*), avg(j.value) FROM score_rows r CROSS JOIN json_each(r.vals) j "
    "WHERE r.benchmark_id = :b AND r.metric = :m AND j.type IN ('real', 'integer') AND j.key < :n "
    "GROUP BY r.model_id")


def _row_summaries(session: Session, bench: Benchmark, n_items: int, last_position: int
                   ) -> dict[str, tuple[int, float]]:
    """model id -> (scored items, mean score) under the benchmark's default metric, from the stored score rows
    (one read of ``score_rows``, numpy per row; never the per-cell ``scores`` view, whose SQLite plan scanned
    every row once per item: 243 s for MuSR's 429 x 756). Cached per (benchmark, data version, items): every
    score write bumps the data version."""
    key = (bench.id, int(bench.data_version or 0), bench.default_metric, n_items, last_position)
    with _SUMMARIES_LOCK:
        cached = _SUMMARIES.get(key)
    if cached is not None:
        return cached
    out: dict[str, tuple[int, float]] = {}
    if session.get_bind().dialect.name == "sqlite" and n_items == last_position + 1:
        # positions 0..n-1: SQLite's json_each counts and averages each row in C (decoding 10,000 rows of JSON
        # in Python took most of a cold request)
        for model_id, count, mean in session.execute(text(SQLITE_ROW_SUMMARIES),
                                                     {"b": bench.id, "m": bench.default_metric, "n": n_items}):
            out[model_id] = (int(count), float(mean))
    else:
        _, _, positions = item_order(session, bench.id)
        for model_id, (row, _version) in read_rows(session, bench.id, bench.default_metric).items():
            values = aligned(row, positions)
            present = values[~np.isnan(values)]
            if present.size:
                out[model_id] = (int(present.size), float(present.mean()))
    with _SUMMARIES_LOCK:
        _SUMMARIES[key] = out
    return out


def _measured(session: Session, bench: Benchmark) -> tuple[dict[str, dict[str, Any]], set[str], int]:
    """Complete models' mean scores, the ids of models with only some items scored, and the item count."""
    n_items, last_position = benchmark_repository.item_shape(session, bench.id)
    complete: dict[str, dict[str, Any]] = {}
    partial: set[str] = set()
    for model_id, (count, mean) in _row_summaries(session, bench, n_items, last_position).items():
        if n_items and count == n_items:
            complete[model_id] = {"kind": "measured", "score": mean, "ci": None, "level": None,
                                  "n_observed": count, "source": None}
        else:
            partial.add(model_id)
    return complete, partial, n_items


def _sessions(session: Session, bench: Benchmark) -> dict[str, dict[str, Any]]:
    """The newest readable single-target session per target name (only the columns a cell shows)."""
    found: dict[str, dict[str, Any]] = {}
    for target, estimate, config, ci_lo, ci_hi, n_observed, session_id, status in \
            session_repository.single_target_estimates(session, bench.id):
        name = str(target)
        if name in found or estimate is None or not math.isfinite(estimate):
            continue
        level = float((config or {}).get("level") or DEFAULT_LEVEL)
        ci = [ci_lo, ci_hi] if ci_lo is not None and ci_hi is not None else None
        found[name] = {"kind": "session", "score": float(estimate), "ci": ci, "level": level,
                       "n_observed": n_observed, "source": session_id, "status": status}
    return found


def _covering(session: Session, bench: Benchmark, coreset_id: str, model_ids: set[str]) -> tuple[int, list[str]]:
    """(items the coreset picked from ``bench``, the models of ``model_ids`` with a score on each of them)."""
    positions = np.fromiter(coreset_repository.picked_positions(session, coreset_id, bench.id), np.int64)
    if positions.size == 0:
        return 0, []
    rows = read_rows(session, bench.id, bench.default_metric, model_ids)
    return int(positions.size), sorted(m for m, (row, _) in rows.items()
                                       if not np.isnan(aligned(row, positions)).any())


def _coreset_cells(session: Session, bench: Benchmark, model_ids: set[str], level: float
                   ) -> dict[str, dict[str, Any]]:
    """Predictions for the models (ids) that have scores on every item a ready coreset picked from ``bench``."""
    found: dict[str, dict[str, Any]] = {}
    if not model_ids:
        return found
    newest = coreset_repository.ready_ids_on(session, bench.id, MAX_CORESETS)
    for coreset_id in newest:
        wanted = model_ids - set(found)
        if not wanted:
            break
        k, ids = _covering(session, bench, coreset_id, wanted)
        if not ids:
            continue
        coreset = coreset_repository.coreset_by_id(session, coreset_id)
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
    found = [_measured(session, bench) for bench in benchmarks]
    every = set().union(*(set(measured) | partial for measured, partial, _ in found))
    # the readable models' names (scoped), in one query for every benchmark
    model_names = model_repository.names_by_id(session, every)
    for bench, (measured, partial, n_items) in zip(benchmarks, found, strict=True):
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
