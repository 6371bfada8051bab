"""Reading one model's row, and a whole benchmark, of a 21,000-item score matrix on PostgreSQL (issue 27).

    nice -n 10 python -m bench.service.score_row_read [--items 21000] [--models 200] [--reads 200]
                                                      [--write docs/PERFORMANCE.md]

A fresh PostgreSQL database migrated to head; one benchmark of ``--items`` items and ``--models`` models of
binary scores (10% missing), written through ``write_scores`` (the upload's write). Timed, each ``--reads``
times on one warm connection, models in random order:

* this code: ``model_row`` (one primary-key read of the packed row, decoded by numpy) and ``load_matrix``;
* the previous layout, in the same run and database: the same cells copied into a per-cell table with the
  previous schema (``(model_id, item_pk, metric) -> value``, primary key and ``ix_scores_item_pk``), read with
  the previous query (the model's cells of the benchmark's items, joined to ``items``) into a numpy row.

Goal: one model's row of a 21,000-item benchmark in <= 5 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from bench.common.markdown_sections import write_section
from bench.common.server import drop_database, fresh_database

START, END = "<!-- score-row-read -->", "<!-- /score-row-read -->"
DATABASE = "evalplan_bench_row_read"
OLD_TABLE = "scores_long_previous"


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=21_000)
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--reads", type=int, default=200)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    from evalplan.benchmarks.items import ensure_items
    from evalplan.benchmarks.score_matrix import item_order, load_matrix, model_row, write_scores
    from evalplan.db.models import LOCAL_TEAM_ID, Benchmark, Model
    from evalplan.kit.db import make_engine

    url = fresh_database(DATABASE)
    engine = make_engine(url)
    rng = np.random.default_rng(0)
    values = (rng.random((args.models, args.items)) < 0.6).astype(float)
    values[rng.random(values.shape) < 0.1] = np.nan
    try:
        with Session(engine) as session:
            benchmark = Benchmark(name="rows", score_kind="binary", score_min=0.0, score_max=1.0, data_version=1,
                                  embedding_fields=[], default_metric="score", team_id=LOCAL_TEAM_ID)
            session.add(benchmark)
            models = [Model(name=f"m{i}", team_id=LOCAL_TEAM_ID, meta={}) for i in range(args.models)]
            session.add_all(models)
            session.flush()
            items = [f"q{j}" for j in range(args.items)]
            pk_of = ensure_items(session, benchmark, items)
            t0 = time.perf_counter()
            n = write_scores(session, benchmark, [m.id for m in models], [pk_of[i] for i in items], values, "score")
            t_write = time.perf_counter() - t0
            # the previous layout, same cells
            session.execute(text(f"CREATE TABLE {OLD_TABLE} (model_id varchar(40), item_pk bigint, "
                                 "metric varchar(200), value float8, PRIMARY KEY (model_id, item_pk, metric))"))
            session.execute(text(f"CREATE INDEX ix_{OLD_TABLE}_item_pk ON {OLD_TABLE} (item_pk)"))
            t0 = time.perf_counter()
            cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
            pks_arr = np.array([pk_of[i] for i in items])
            with cursor.copy(f"COPY {OLD_TABLE} (model_id, item_pk, metric, value) FROM STDIN") as copy:
                for r, model in enumerate(models):
                    have = ~np.isnan(values[r])
                    copy.write("".join(f"{model.id}\t{pk}\tscore\t{v!r}\n"
                                       for pk, v in zip(pks_arr[have].tolist(), values[r][have].tolist())))
            t_old_write = time.perf_counter() - t0
            session.commit()
            session.execute(text(f"ANALYZE {OLD_TABLE}"))
            session.execute(text("ANALYZE score_rows"))
            session.commit()
            benchmark_id, model_ids = benchmark.id, [m.id for m in models]
        order = rng.permutation(args.models)
        with Session(engine) as session:
            benchmark = session.get(Benchmark, benchmark_id)
            assert benchmark is not None
            pks, _, positions = item_order(session, benchmark_id)
            col_of = {pk: j for j, pk in enumerate(pks)}
            new_t: list[float] = []
            old_t: list[float] = []
            old_sql = text(f"SELECT s.item_pk, s.value FROM {OLD_TABLE} s JOIN items i ON i.pk = s.item_pk "
                           "WHERE i.benchmark_id = :b AND s.model_id = :m AND s.metric = 'score'")
            for k in range(args.reads):
                i = int(order[k % args.models])
                t0 = time.perf_counter()
                row = model_row(session, benchmark, model_ids[i], "score")
                new_t.append(time.perf_counter() - t0)
                assert row is not None and np.array_equal(row, values[i], equal_nan=True)
                t0 = time.perf_counter()
                cells = session.execute(old_sql, {"b": benchmark_id, "m": model_ids[i]}).all()
                old_row = np.full(len(pks), np.nan)
                old_row[[col_of[c[0]] for c in cells]] = [c[1] for c in cells]
                old_t.append(time.perf_counter() - t0)
                assert np.array_equal(old_row, values[i], equal_nan=True)
            t0 = time.perf_counter()
            matrix = load_matrix(session, benchmark, "score")
            t_matrix = time.perf_counter() - t0
            assert np.array_equal(matrix.values, values, equal_nan=True)
            t0 = time.perf_counter()
            long_cells = session.execute(text(
                f"SELECT s.model_id, s.item_pk, s.value FROM {OLD_TABLE} s JOIN items i ON i.pk = s.item_pk "
                "WHERE i.benchmark_id = :b AND s.metric = 'score'"), {"b": benchmark_id}).all()
            t_old_matrix = time.perf_counter() - t0
            assert len(long_cells) == n
            del positions
    finally:
        engine.dispose()
        drop_database(DATABASE)
    load = os.getloadavg()[0]
    ms = lambda v: v * 1e3  # noqa: E731
    p50_new, p50_old = ms(pct(new_t, 50)), ms(pct(old_t, 50))
    lines = [
        START,
        f"### Reading score rows at {args.items:,} items (PostgreSQL, issue 27)",
        "",
        f"`nice -n 10 python -m bench.service.score_row_read {' '.join(argv if argv is not None else sys.argv[1:])}` "
        f"({platform.machine()}, {os.cpu_count()} CPU cores shared with other work; load {load:.1f} at the end). "
        f"{args.models} models x {args.items:,} items of binary scores (10% missing, {n:,} cells), one warm "
        f"connection, {args.reads} reads in random model order. Previous layout = the same cells in a per-cell "
        "table with the previous schema and indexes, read by the previous query, in the same database and run.",
        "",
        "| read | this code: p50 (ms) | p99 (ms) | previous layout: p50 (ms) | p99 (ms) | previous / this (p50) |",
        "|---|---:|---:|---:|---:|---:|",
        f"| one model's row | **{p50_new:.2f}** | {ms(pct(new_t, 99)):.2f} | {p50_old:.2f} | {ms(pct(old_t, 99)):.2f} "
        f"| {p50_old / p50_new:.1f}x |",
        f"| the whole benchmark (`load_matrix`; previous: the cells only) | {ms(t_matrix):.0f} | | "
        f"{ms(t_old_matrix):.0f} | | {t_old_matrix / t_matrix:.1f}x |",
        "",
        f"Write of the {n:,} cells: {t_write:.1f} s as packed rows (`write_scores`, binary COPY), "
        f"{t_old_write:.1f} s by a text COPY into the per-cell table with its two indexes.",
        "",
        f"**One model's row: p50 {p50_new:.2f} ms (goal <= 5 ms: {'met' if p50_new <= 5 else 'MISSED'}).**",
        END,
    ]
    md = "\n".join(lines)
    print(md)
    if args.write:
        write_section(args.write, md, START, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
