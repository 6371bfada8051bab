"""HTTP latency of a session of the default method at N = 12,000 items and 400 references (issue 11).

    nice -n 10 python -m bench.sessions.session_latency_large [--items 12000] [--references 400] [--posts 400]
                                                     [--methods refgp_ivr refgp_v2] [--write docs/PERFORMANCE.md]

Synthetic binary scores from a 2PL population (seeded: abilities N(0, 1), difficulties N(0, 1),
log-discriminations N(0, 0.3^2)), ``references + 1`` models x ``items`` items, uploaded as one wide CSV
to ``evalplan serve`` (embedded: SQLite, in-process jobs; ``bench.common.server.start_server``).
One session per method (``method`` omitted unless ``--methods``: the default), each on another target
row of the same upload (one CSV upload for all), all other models as references,
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
from typing import Any

import httpx
import numpy as np

from bench.common.markdown_sections import INTERPRETATION, write_section
from bench.common.server import source_tree, start_server, stop_server
from bench.common.stats import percentile as pct

BEGIN, END = "<!-- session-latency-large -->", "<!-- /session-latency-large -->"


def synthetic(n_models: int, n_items: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_models)
    b = rng.normal(0, 1, n_items)
    a = np.exp(0.3 * rng.normal(size=n_items))
    p = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
    return (rng.random(p.shape) < p).astype(np.int8)


def run_session(client: httpx.Client, target: str, posts: int, method: str | None,
                truth: dict[str, float]) -> dict[str, Any]:
    """One session of ``target`` (every other model a reference) run for ``posts`` observations."""
    body = {"benchmark": "big", "target": target, "max_items": posts, **({"method": method} if method else {})}
    t0 = time.perf_counter()
    r = client.post("/v1/sessions", json=body)
    t_create = time.perf_counter() - t0
    assert r.status_code == 201, r.text
    s = r.json()
    # warm: the same reference set again (its prior and what the estimator derived from it are stored)
    t0 = time.perf_counter()
    again = client.post("/v1/sessions", json=body)
    t_warm = time.perf_counter() - t0
    assert again.status_code == 201, again.text
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
    return {"create": t_create, "warm": t_warm, "plain": plain, "refit": refit, "final": s, "load": os.getloadavg()[0]}


def summary(label: str, run: dict[str, Any], truth_mean: float) -> str:
    plain, refit = run["plain"], run["refit"]
    every = plain + refit
    p50, p99 = pct(every, 50) * 1e3, pct(every, 99) * 1e3
    s = run["final"]
    return (f"| {label} | {run['create']:.1f} s | {run['warm']:.2f} s | {len(every)} | **{p50:.1f}** | {pct(every, 90) * 1e3:.1f} | "
            f"**{p99:.1f}** | {max(every) * 1e3:.0f} | {pct(plain, 50) * 1e3:.1f} / {pct(plain, 99) * 1e3:.1f} | "
            f"{len(refit)}: {pct(refit, 50) * 1e3:.0f} / {max(refit or [float('nan')]) * 1e3:.0f} | "
            f"{s['estimate']:.4f} ({s['ci'][0]:.4f}, {s['ci'][1]:.4f}) vs {truth_mean:.4f} | {run['load']:.1f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=12_000)
    ap.add_argument("--references", type=int, default=400)
    ap.add_argument("--posts", type=int, default=400)
    ap.add_argument("--methods", "--method", dest="methods", nargs="+", default=None,
                    help="one session per method, each on another target (default: the service's default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline", default=None, metavar="GIT_REF",
                    help="also run the previous code (a git ref, e.g. a commit) on the same database, first")
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    methods: list[str | None] = list(args.methods) if args.methods else [None]
    # one target row per session: the baseline's (method: the first one), then one per method
    plan = ([("previous code (" + args.baseline + ")", args.baseline, methods[0])] if args.baseline else []) + [
        ("this code" + (f", {m}" if m and len(methods) > 1 else ""), None, m) for m in methods]
    n_models = args.references + 1 + max(2, len(plan))
    Y = synthetic(n_models, args.items, args.seed)
    items = [f"i{j}" for j in range(args.items)]
    names = [f"m{k}" for k in range(n_models)]
    buf = io.StringIO()
    buf.write("model," + ",".join(items) + "\n")
    for k, name in enumerate(names):
        buf.write(name + "," + ",".join(map(str, Y[k].tolist())) + "\n")
    t_start = time.perf_counter()
    runs: list[tuple[str, dict[str, Any], float]] = []
    with tempfile.TemporaryDirectory(prefix="evalplan-latency-large-") as tmpdir:
        t_upload = 0.0
        for n, (label, ref, method) in enumerate(plan):
            target_row = (n + 1) % len(plan) if args.baseline else n  # the baseline's row: 1, as before
            with source_tree(ref) as src:
                base, proc = start_server(f"sqlite:///{Path(tmpdir) / 'x.db'}", src=src, log=Path(tmpdir) / "server.log",
                                          cwd=Path(tmpdir))
                try:
                    with httpx.Client(base_url=base, timeout=1200) as client:
                        if n == 0:
                            r = client.post("/v1/benchmarks", json={"name": "big", "score_kind": "binary"})
                            assert r.status_code == 201, r.text
                            t0 = time.perf_counter()
                            r = client.post("/v1/benchmarks/big/scores", content=buf.getvalue().encode(),
                                            headers={"Content-Type": "text/csv"})
                            t_upload = time.perf_counter() - t0
                            assert r.status_code in (200, 201), r.text
                        truth = dict(zip(items, Y[target_row].astype(float).tolist()))
                        # each run's target differs, so does its reference set (all other models): no prior reuse
                        run = run_session(client, names[target_row], args.posts, method, truth)
                        runs.append((label, run, float(np.mean(Y[target_row]))))
                finally:
                    stop_server(proc)
    runtime = time.perf_counter() - t_start
    n_this = len(methods)
    mine = runs[-n_this:]
    names_run = ", ".join(run["final"]["method"] for _, run, _ in mine)
    lines = [
        BEGIN,
        f"### Session HTTP latency at N = {args.items:,} items, {args.references} references ({names_run})",
        "",
        f"`nice -n 10 python -m bench.sessions.session_latency_large {' '.join(argv if argv is not None else sys.argv[1:])}` "
        f"({platform.machine()}, {os.cpu_count()} CPU cores shared with other work, Python "
        f"{platform.python_version()}; total {runtime:.0f} s, CSV upload {t_upload:.0f} s). Synthetic 2PL binary "
        f"scores ({n_models} models); one `evalplan serve` (SQLite, in-process jobs) per row on the same "
        "database, one keep-alive httpx connection; each row's target is another model and its references all the "
        f"other {n_models - 1} (so no row reuses another's stored prior); each post `{{item, score}}` for "
        "the proposed item; 'refit' = posts whose response's hyperparameters changed. Session create = resolving "
        "the references, loading the score matrix, the prior (computed and stored), the features and the first "
        "proposal; 'create again (warm)' = the same request right after (stored prior and derived state reused). Load = the 1-minute load average after the row (2 cores; the goals are for an idle machine).",
        "",
        "| code | session create (cold) | create again (warm) | posts | p50 (ms) | p90 | p99 (ms) | max | no refit p50 / p99 | refits: p50 / max (ms) "
        "| final estimate (ci) vs truth | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [summary(label, run, truth_mean) for label, run, truth_mean in runs]
    lines.append("")
    for _, this, _ in mine:
        every = this["plain"] + this["refit"]
        p50, p99 = pct(every, 50) * 1e3, pct(every, 99) * 1e3
        lines.append(f"**This code, {this['final']['method']}: p50 {p50:.1f} ms (target <= 25 ms: "
                     f"{'met' if p50 <= 25 else 'MISSED'}), p99 {p99:.1f} ms (target <= 250 ms: "
                     f"{'met' if p99 <= 250 else 'MISSED'}), session create {this['create']:.1f} s cold (goal <= 10 s: "
                     f"{'met' if this['create'] <= 10 else 'MISSED'}), {this['warm']:.2f} s warm (goal <= 2 s: "
                     f"{'met' if this['warm'] <= 2 else 'MISSED'}).**")
        if args.baseline and this is mine[0][1]:
            old = runs[0][1]
            old_every = old["plain"] + old["refit"]
            lines.append(f"Ratios previous / this, same run and method: session create "
                         f"{old['create'] / this['create']:.1f}x cold, {old['warm'] / this['warm']:.1f}x warm, p50 {pct(old_every, 50) / pct(every, 50):.2f}x, "
                         f"p99 {pct(old_every, 99) / pct(every, 99):.2f}x.")
        lines.append("")
    lines += [INTERPRETATION[0], INTERPRETATION[1]]
    lines.append(END)
    md = "\n".join(lines)
    print(md)
    if args.write:
        write_section(args.write, md, BEGIN, END, new_file="# Performance\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
