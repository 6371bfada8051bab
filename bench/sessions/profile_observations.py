"""Profile of the session observation path on PostgreSQL (issue 13, failure 8): where a post's time goes.

    nice -n 10 python -m bench.sessions.profile_observations [--posts 150] [--method refgp_ivr] [--pyinstrument]
                                                             [--cprofile 60]

Setup (not timed): a fresh PostgreSQL database, ``openllm_v2_musr`` (429 x 756, binary) uploaded
through the real app, one session (target = the first model, references = the other models,
``max_items`` = posts). Then ``--posts`` observations, each the first proposed item with the target's
true score, posted three ways, each on its own session:

* ``http``: through the whole ASGI app (``TestClient``: middleware, validation, response encoding);
* ``service``: ``evalplan.sessions.service.post_observations`` + the response view, on one DB session
  per post (what the route does, without HTTP);
* ``estimator``: ``propose`` + ``observe`` of the in-memory estimator alone.

Reported: per-post p50/p99 wall time of each, SQL statements per post (counted by an engine event
listener) and, with ``--pyinstrument``, the service path's profile (printed).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import time
from collections import Counter
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import event

from bench.common.server import data_dir, fresh_database
from bench.common.stats import percentile as pct

DATASET = "openllm_v2_musr"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--posts", type=int, default=150)
    ap.add_argument("--method", default=None)
    ap.add_argument("--pyinstrument", action="store_true")
    ap.add_argument("--cprofile", type=int, default=0, metavar="N",
                    help="profile the service path with the standard library's cProfile; print the top N functions")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from evalplan.kit.db import make_engine, make_session_factory
    from evalplan.kit.settings import Settings
    from evalplan.main import create_app
    from evalplan.sessions import service, views
    from evalplan.sessions.schemas import SessionOut
    from evalplan.sessions.validation import ObservationIn

    url = fresh_database("evalplan_bench_profile")
    engine = make_engine(url)
    factory = make_session_factory(engine)
    statements: Counter[str] = Counter()
    counting = {"on": False}

    @event.listens_for(engine, "before_cursor_execute")
    def _count(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if counting["on"]:
            statements[" ".join(statement.split())[:110]] += 1

    scores = data_dir() / DATASET / "scores.csv"
    rows = list(csv.reader(scores.open()))
    items = rows[0][1:]
    truth = {r[0]: dict(zip(items, (float(v) for v in r[1:]))) for r in rows[1:]}
    names = [r[0] for r in rows[1:]]
    settings = Settings(database_url=url, housekeeping=False, log_level="WARNING")
    body_extra = {"method": args.method} if args.method else {}
    out: dict[str, list[float]] = {}
    with TestClient(create_app(settings, session_factory=factory)) as client:
        assert client.post("/v1/benchmarks", json={"name": "musr", "score_kind": "binary"}).status_code == 201
        r = client.post("/v1/benchmarks/musr/scores", content=scores.read_bytes(), headers={"content-type": "text/csv"})
        assert r.status_code == 200, r.text

        def new_session(target: str) -> dict[str, Any]:
            r = client.post("/v1/sessions", json={"benchmark": "musr", "target": target, "reference_models": names[8:],
                                                  "max_items": args.posts + 1, **body_extra})
            assert r.status_code == 201, r.text
            return dict(r.json())

        # 1. HTTP
        s = new_session(names[0])
        times: list[float] = []
        counting["on"] = True
        statements.clear()
        for _ in range(args.posts):
            item = s["next_items"][0]
            t0 = time.perf_counter()
            r = client.post(f"/v1/sessions/{s['id']}/observations", json={"item": item, "score": truth[names[0]][item]})
            times.append(time.perf_counter() - t0)
            assert r.status_code == 200, r.text
            s = r.json()
        counting["on"] = False
        out["http"] = times
        http_statements = sum(statements.values()) / args.posts
        http_top = statements.most_common(12)

        # 2. the service, no HTTP
        s = new_session(names[1])
        sid, nxt = s["id"], s["next_items"][0]
        times = []
        profiler = None
        if args.pyinstrument:
            from pyinstrument import Profiler
            profiler = Profiler(interval=0.0005)
            profiler.start()
        cprof = None
        if args.cprofile:
            import cProfile
            cprof = cProfile.Profile()
            cprof.enable()
        for _ in range(args.posts):
            t0 = time.perf_counter()
            with factory() as db:
                posted = service.post_observations(db, sid, [ObservationIn(nxt, truth[names[1]][nxt], None)])
                view = SessionOut.model_validate(views.session_view(db, posted.row, posted.benchmark.name, posted.team))
            times.append(time.perf_counter() - t0)
            nxt = view.next_items[0]
        if profiler is not None:
            profiler.stop()
        if cprof is not None:
            cprof.disable()
        out["service"] = times

        # 3. the estimator alone
        from evalplan.sessions import cache
        with factory() as db:
            s = new_session(names[2])
            est = cache.estimators.pop((s["id"], 0))
        assert est is not None
        from evalplan.sessions.priors import load_prior
        with factory() as db:
            row = service.get_eval_session(db, s["id"])
            entry = load_prior(db, row.prior_key)
        times = []
        for _ in range(args.posts):
            t0 = time.perf_counter()
            j = est.propose()[0]
            est.observe(j, truth[names[2]][entry.item_ids[j]])
            times.append(time.perf_counter() - t0)
        out["estimator"] = times

    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}; method {args.method or 'default'}; "
          f"{args.posts} posts each")
    print("| path | p50 (ms) | p90 (ms) | p99 (ms) | mean (ms) |")
    print("|---|---:|---:|---:|---:|")
    for name, values in out.items():
        ms = [1000 * v for v in values]
        print(f"| {name} | {pct(ms, 50):.2f} | {pct(ms, 90):.2f} | {pct(ms, 99):.2f} | {statistics.mean(ms):.2f} |")
    print(f"\nSQL statements per HTTP post: {http_statements:.1f}")
    for stmt, n in http_top:
        print(f"  {n / args.posts:5.2f}  {stmt}")
    if profiler is not None:
        print(profiler.output_text(unicode=False, color=False, show_all=False))
    if cprof is not None:
        import io
        import pstats
        text = io.StringIO()
        pstats.Stats(cprof, stream=text).sort_stats("cumulative").print_stats(args.cprofile)
        print(text.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
