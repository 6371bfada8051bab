"""HTTP latency of a session of the default method at N = 12,000 items and 400 references (issue 11).

    nice -n 10 python -m bench.session_latency_large [--items 12000] [--references 400] [--posts 400]
                                                     [--method refgp_ivr] [--write docs/PERFORMANCE.md]

Synthetic binary scores from a 2PL population (seeded: abilities N(0, 1), difficulties N(0, 1),
log-discriminations N(0, 0.3^2)), ``references + 1`` models x ``items`` items, uploaded as one wide CSV
to ``evalplan serve`` (embedded: SQLite, in-process jobs; ``bench.session_latency_bench.start_server``).
One session (``method`` omitted unless ``--method``: the default), all other models as references,
``max_items = posts``, ``stop`` none; then one POST ``{item, score}`` per proposed item with the
target's true score, each timed over one keep-alive connection. A post "with a refit" is one whose
response's ``hyperparameters`` differ from the previous response's. Targets: p50 <= 25 ms and
p99 <= 250 ms over all posts, refits included.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from bench.markdown_sections import write_section
from bench.session_latency_bench import pct, start_server, stop_server

BEGIN, END = "<!-- session-latency-large -->", "<!-- /session-latency-large -->"


def synthetic(n_models: int, n_items: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_models)
    b = rng.normal(0, 1, n_items)
    a = np.exp(0.3 * rng.normal(size=n_items))
    p = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
    return (rng.random(p.shape) < p).astype(np.int8)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=12_000)
    ap.add_argument("--references", type=int, default=400)
    ap.add_argument("--posts", type=int, default=400)
    ap.add_argument("--method", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    Y = synthetic(args.references + 1, args.items, args.seed)
    items = [f"i{j}" for j in range(args.items)]
    names = [f"m{k}" for k in range(args.references + 1)]
    buf = io.StringIO()
    buf.write("model," + ",".join(items) + "\n")
    for k, name in enumerate(names):
        buf.write(name + "," + ",".join(map(str, Y[k].tolist())) + "\n")
    target = names[0]
    truth = dict(zip(items, Y[0].astype(float).tolist()))
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="evalplan-latency-large-") as tmpdir:
        base, proc = start_server(Path(tmpdir))
        try:
            with httpx.Client(base_url=base, timeout=600) as client:
                r = client.post("/v1/benchmarks", json={"name": "big", "score_kind": "binary"})
                assert r.status_code == 201, r.text
                t0 = time.perf_counter()
                r = client.post("/v1/benchmarks/big/scores", content=buf.getvalue().encode(),
                                headers={"Content-Type": "text/csv"})
                t_upload = time.perf_counter() - t0
                assert r.status_code in (200, 201), r.text
                body = {"benchmark": "big", "target": target, "max_items": args.posts,
                        **({"method": args.method} if args.method else {})}
                t0 = time.perf_counter()
                r = client.post("/v1/sessions", json=body)
                t_create = time.perf_counter() - t0
                assert r.status_code == 201, r.text
                s = r.json()
                method = s["method"]
                plain: list[float] = []
                refit: list[float] = []
                hp = s["hyperparameters"]
                while s["status"] == "active":
                    item = s["next_items"][0]
                    t0 = time.perf_counter()
                    r = client.post(f"/v1/sessions/{s['id']}/observations", json={"item": item, "score": truth[item]})
                    dt = time.perf_counter() - t0
                    assert r.status_code == 200, r.text
                    s = r.json()
                    (refit if s["hyperparameters"] != hp else plain).append(dt)
                    hp = s["hyperparameters"]
        finally:
            stop_server(proc)
    runtime = time.perf_counter() - t_start
    every = plain + refit
    p50, p99 = pct(every, 50) * 1e3, pct(every, 99) * 1e3
    md = "\n".join([
        BEGIN,
        f"### Session HTTP latency at N = {args.items:,} items, {args.references} references ({method})",
        "",
        f"`nice -n 10 python -m bench.session_latency_large {' '.join(argv if argv is not None else sys.argv[1:])}` "
        f"({platform.machine()}, {os.cpu_count()} CPU cores shared with other work, Python "
        f"{platform.python_version()}; total {runtime:.0f} s, CSV upload {t_upload:.0f} s). Synthetic 2PL binary "
        "scores; one `evalplan serve` (SQLite, in-process jobs), one keep-alive httpx connection; each post "
        "`{item, score}` for the proposed item; 'refit' = posts whose response's hyperparameters changed.",
        "",
        f"**{len(every)} posts: p50 {p50:.1f} ms (target <= 25 ms: {'met' if p50 <= 25 else 'MISSED'}), "
        f"p90 {pct(every, 90) * 1e3:.1f} ms, p99 {p99:.1f} ms (target <= 250 ms: {'met' if p99 <= 250 else 'MISSED'}), "
        f"max {max(every) * 1e3:.0f} ms. Without a refit p50 {pct(plain, 50) * 1e3:.1f} / p99 "
        f"{pct(plain, 99) * 1e3:.1f} ms; {len(refit)} posts with a refit: p50 {pct(refit, 50) * 1e3:.0f} ms, max "
        f"{max(refit or [float('nan')]) * 1e3:.0f} ms. Session create (prior, features, first proposal): "
        f"{t_create:.1f} s.** Final estimate {s['estimate']:.4f} (ci {s['ci'][0]:.4f}, {s['ci'][1]:.4f}) vs truth "
        f"{float(np.mean(Y[0])):.4f} after {s['n_observed']} items.",
        END,
    ])
    print(md)
    if args.write:
        write_section(args.write, md, BEGIN, END, new_file="# Performance\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
