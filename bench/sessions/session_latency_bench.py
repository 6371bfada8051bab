"""HTTP latency of sequential sessions against the embedded server (SQLite, in-process jobs).

    python -m bench.sessions.session_latency_bench [--runs 3] [--observations 200] [--write docs/PERFORMANCE.md]

Starts ``evalplan serve`` (one uvicorn process) on a free port with EVALPLAN_DATABASE_URL=sqlite:///<tmp>/x.db,
creates a binary benchmark and uploads ``openllm_v2_musr/scores.csv`` (429 x 756; read in place from
EVALPLAN_DATA_DIR, default ../shared/data). Each run picks a target model (seeded), creates a session whose
``reference_models`` are all the other 428 models (max_items = observations; defaults otherwise, so a refit
happens after every 50th observation), then posts the observations one at a time: for each response's
``next_items[0]`` it POSTs ``{item, score}`` with the target's true score, timing the full HTTP round trip
(one keep-alive connection). Reported per run: session-create time and p50/p90/p99 of all posts, of posts
without a refit, and the posts that include a refit; the table gives the median over runs.
Targets: p50 <= 25 ms, p99 <= 100 ms.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from bench.common.markdown_sections import write_section
from bench.common.server import start_server, stop_server
from bench.common.shared_data import data_dir
from bench.common.stats import percentile as pct

BEGIN, END = "<!-- session-latency -->", "<!-- /session-latency -->"
DATASET = "openllm_v2_musr"
REFIT_EVERY = 50


def one_run(client: httpx.Client, bench: str, names: list[str], truth: dict[str, float], target: str,
            n_obs: int) -> dict:
    refs = [m for m in names if m != target]
    t0 = time.perf_counter()
    r = client.post("/v1/sessions", json={"benchmark": bench, "target": target, "reference_models": refs,
                                          "max_items": n_obs})
    t_create = time.perf_counter() - t0
    assert r.status_code == 201, r.text
    s = r.json()
    plain, refit = [], []
    while s["status"] == "active":
        item = s["next_items"][0]
        body = {"item": item, "score": truth[item]}
        t0 = time.perf_counter()
        r = client.post(f"/v1/sessions/{s['id']}/observations", json=body)
        dt = time.perf_counter() - t0
        assert r.status_code == 200, r.text
        s = r.json()
        (refit if s["n_observed"] % REFIT_EVERY == 0 else plain).append(dt)
    return dict(target=target, create=t_create, plain=plain, refit=refit, all=plain + refit,
                n=s["n_observed"], stop=s["stop_reason"], estimate=s["estimate"], ci=s["ci"],
                truth=float(np.mean(list(truth.values()))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--observations", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    csv_path = data_dir() / DATASET / "scores.csv"
    csv_bytes = csv_path.read_bytes()
    rows = list(csv.reader(csv_bytes.decode().splitlines()))
    items = rows[0][1:]
    names = [r[0] for r in rows[1:]]
    matrix = {r[0]: dict(zip(items, (float(v) for v in r[1:]))) for r in rows[1:]}
    rng = np.random.default_rng(args.seed)
    targets = [names[i] for i in rng.choice(len(names), size=args.runs, replace=False)]
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="evalplan-latency-") as tmpdir:
        tmp = Path(tmpdir)
        base, proc = start_server(f"sqlite:///{tmp / 'x.db'}", log=tmp / "server.log", cwd=tmp)
        try:
            with httpx.Client(base_url=base, timeout=120) as client:
                r = client.post("/v1/benchmarks", json={"name": "musr", "score_kind": "binary"})
                assert r.status_code == 201, r.text
                t0 = time.perf_counter()
                r = client.post("/v1/benchmarks/musr/scores", content=csv_bytes, headers={"Content-Type": "text/csv"})
                t_upload = time.perf_counter() - t0
                assert r.status_code in (200, 201), r.text
                runs = [one_run(client, "musr", names, matrix[t], t, args.observations) for t in targets]
        finally:
            stop_server(proc)
    runtime = time.perf_counter() - t_start

    def med(key, q):
        return statistics.median(pct(r[key], q) for r in runs) * 1e3

    lines = ["| run | target | session create | posts | p50 all | p90 all | p99 all | p50 no-refit | p99 no-refit | refit posts (n) | refit p50 / max | stop | estimate (95% CI) vs truth |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(runs, 1):
        lines.append(f"| {i} | {r['target']} | {r['create'] * 1e3:.0f} ms | {len(r['all'])} | {pct(r['all'], 50) * 1e3:.1f} ms "
                     f"| {pct(r['all'], 90) * 1e3:.1f} ms | {pct(r['all'], 99) * 1e3:.1f} ms | {pct(r['plain'], 50) * 1e3:.1f} ms "
                     f"| {pct(r['plain'], 99) * 1e3:.1f} ms | {len(r['refit'])} | {pct(r['refit'], 50) * 1e3:.0f} / {max(r['refit'] or [float('nan')]) * 1e3:.0f} ms "
                     f"| {r['n']} ({r['stop']}) | {r['estimate']:.3f} ({r['ci'][0]:.3f}, {r['ci'][1]:.3f}) vs {r['truth']:.3f} |")
    p50, p90, p99 = med("all", 50), med("all", 90), med("all", 99)
    summary = (f"**Median over {len(runs)} runs: session create {statistics.median(r['create'] for r in runs) * 1e3:.0f} ms; "
               f"observation POST p50 {p50:.1f} ms (target <= 25 ms: {'met' if p50 <= 25 else 'MISSED'}), p90 {p90:.1f} ms, "
               f"p99 {p99:.1f} ms (target <= 100 ms: {'met' if p99 <= 100 else 'MISSED'}); without refit p50 {med('plain', 50):.1f} / "
               f"p99 {med('plain', 99):.1f} ms; posts with a refit p50 {med('refit', 50):.0f} ms.**")
    md = "\n".join([
        BEGIN,
        "<!-- written by `python -m bench.sessions.session_latency_bench --write docs/PERFORMANCE.md` -->",
        "### Sequential session HTTP latency (embedded server, SQLite)",
        "",
        f"Command: `python -m bench.sessions.session_latency_bench {' '.join(argv if argv is not None else sys.argv[1:])}`. "
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores (shared with other work), Python {platform.python_version()}. "
        f"Total run time {runtime:.0f} s (CSV upload {t_upload:.1f} s). One `evalplan serve` process, "
        "EVALPLAN_DATABASE_URL=sqlite:///<tmp>/x.db, no Redis (in-process jobs); client: httpx over one keep-alive "
        f"connection on 127.0.0.1. Benchmark: {DATASET} (429 models x 756 items, binary). Each run: a random target "
        "(seeded), `reference_models` = the other 428 models, `max_items` = "
        f"{args.observations}, other settings default (BayesAME, refit every {REFIT_EVERY}); one POST "
        "`/v1/sessions/{id}/observations` `{item, score}` per proposed item with the target's true score; time = full "
        "round trip. 'refit' = the posts whose observation count is a multiple of 50 (the estimator refits "
        "its hyperparameters inside that request). Session create includes resolving 428 reference names, building and "
        "storing the bucket prior (each run's reference set differs, so no prior-cache hit) and the first proposal.",
        "",
        summary,
        "",
        *lines,
        END,
    ])
    print(md)
    if args.write:
        write_section(args.write, md, BEGIN, END, new_file="# Performance\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
