"""Latency of ``POST /v1/coresets/{id}/predict`` at 400 references x 1,000 items (issue 16 §5).

``nice -n 10 python -m bench.coresets.predict_latency_bench [--refs 400] [--items 1000] [--runs 30]
[--batch 1 10 50 100] [--write docs/PERFORMANCE.md]``

A real ``evalplan serve`` process on a fresh PostgreSQL database (bench/common/server.py). A generated 2PL
benchmark (``--refs`` reference models + 100 stored target models, ``--items`` items, 0/1) is uploaded
as CSV; one mRMR++ coreset (``mrmr`` + ``kernel_ridge``, 10% of the items, every reference) is
created. Then, over one keep-alive connection: ``--runs`` predictions of a stored target by
``{"model": name}``, ``--runs`` with posted ``scores``, ``--runs`` with a posted target above every reference
(the extrapolation guard's AIPW and its leave-one-reference-out interval), and batch requests
``{"models": [...]}`` of each size in ``--batch``. Reported: p50 / p90 / p99 of each path, the first predict
of each kind, and the batch time per model. Targets: p50 <= 50 ms (issue 16), p99 <= 1 s (issue 34); batch
time linear in the number of models.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import time
from pathlib import Path

import httpx
import numpy as np

from bench.common.markdown_sections import write_section
from bench.common.server import fresh_database, running_server
from bench.common.stats import percentile

START, END = "<!-- predict-latency -->", "<!-- /predict-latency -->"
N_TARGETS = 100


def matrix(refs: int, items: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a, b = rng.lognormal(0, 0.4, items), rng.normal(0, 1, items)
    theta = rng.normal(0, 1, refs + N_TARGETS)
    return (rng.random((refs + N_TARGETS, items)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(int)


def wide_csv(Y: np.ndarray, names: list[str], ids: list[str]) -> str:
    out = io.StringIO()
    out.write("model," + ",".join(ids) + "\n")
    for name, row in zip(names, Y):
        out.write(name + "," + ",".join(map(str, row.tolist())) + "\n")
    return out.getvalue()


def timed(client: httpx.Client, url: str, body: dict) -> float:
    t0 = time.perf_counter()
    r = client.post(url, json=body)
    dt = time.perf_counter() - t0
    assert r.status_code == 200, r.text[:500]
    return dt


def pct(xs: list[float], q: float) -> float:
    return percentile(xs, q, scale=1000.0)  # ms


def run(args) -> dict:
    Y = matrix(args.refs, args.items)
    names = [f"ref{i:03d}" for i in range(args.refs)] + [f"tgt{i:03d}" for i in range(N_TARGETS)]
    ids = [f"q{j:04d}" for j in range(args.items)]
    url = fresh_database("evalplan_predict_bench")
    with running_server(url) as (base, _), httpx.Client(base_url=base, timeout=600) as client:
        assert client.post("/v1/benchmarks", json={"name": "gen"}).status_code == 201
        r = client.post("/v1/benchmarks/gen/scores", content=wide_csv(Y, names, ids),
                        headers={"content-type": "text/csv"})
        assert r.status_code == 200, r.text
        r = client.post("/v1/coresets", json={"method": "mrmr", "predictor": "kernel_ridge", "benchmarks": ["gen"],
                                              "budget": {"fraction": 0.1}, "reference_models": names[:args.refs]})
        assert r.status_code == 202, r.text
        job = r.json()["job"]["id"]
        t0 = time.perf_counter()
        while (status := client.get(f"/v1/jobs/{job}").json()["status"]) not in ("succeeded", "failed"):
            time.sleep(0.5)
        assert status == "succeeded"
        create_s = time.perf_counter() - t0
        cid = r.json()["coreset"]["id"]
        coreset = client.get(f"/v1/coresets/{cid}").json()
        col = {i: j for j, i in enumerate(ids)}
        predict = f"/v1/coresets/{cid}/predict"
        targets = names[args.refs:]
        # the first predict of the process: parses the stored fits and fits the predictor (no warm-up before)
        first_s = timed(client, predict, {"model": targets[0]})
        extreme = [{"benchmark": "gen", "item": it["item"], "score": 1} for it in coreset["items"]]
        t0 = time.perf_counter()
        r = client.post(predict, json={"scores": extreme})  # above every reference: the extrapolation guard
        first_extrapolated_s = time.perf_counter() - t0
        assert r.status_code == 200 and r.json()["extrapolation"], r.text[:300]
        by_model, posted, extrapolated = [], [], []
        for i in range(args.runs + 2):  # two warm-ups
            name = targets[i % N_TARGETS]
            row = Y[args.refs + i % N_TARGETS]
            scores = [{"benchmark": "gen", "item": it["item"], "score": int(row[col[it["item"]]])}
                      for it in coreset["items"]]
            t_model = timed(client, predict, {"model": name})
            t_post = timed(client, predict, {"scores": scores})
            t_extra = timed(client, predict, {"scores": extreme, "level": 0.9 if i % 2 else 0.95})
            if i >= 2:
                by_model.append(t_model)
                posted.append(t_post)
                extrapolated.append(t_extra)
        batch = {}
        for size in args.batch:
            ts = [timed(client, predict, {"models": targets[:size]}) for _ in range(3)]
            batch[size] = statistics.median(ts)
    paths = {"model": by_model, "posted": posted, "extrapolated": extrapolated}
    return {"refs": args.refs, "items": args.items, "k": len(coreset["items"]), "create_s": create_s,
            **{f"{p}_p{q}": pct(xs, q) for p, xs in paths.items() for q in (50, 90, 99)},
            "first_ms": first_s * 1000, "first_extrapolated_ms": first_extrapolated_s * 1000, "batch": batch,
            "load": os.getloadavg()[0], "runs": args.runs}


def markdown(res: dict, args) -> str:
    cmd = (f"nice -n 10 python -m bench.coresets.predict_latency_bench --refs {args.refs} --items {args.items} --runs {args.runs} "
           f"--batch {' '.join(map(str, args.batch))} --write docs/PERFORMANCE.md")
    lines = [START, "## Coreset predict latency (issue 16 §5, issue 34)", "",
             f"`{cmd}`: real `evalplan serve` on PostgreSQL, generated 0/1 benchmark, {res['refs']} references x "
             f"{res['items']} items, mRMR++ coreset of {res['k']} items (created in {res['create_s']:.1f} s), one "
             f"keep-alive HTTP connection, 2 shared cores (1-minute load {res['load']:.1f} at the end). {res['runs']} "
             "requests per path after two warm-ups; `extrapolated` posts a target above every reference (all ones), "
             "so the extrapolation guard's AIPW answers with its leave-one-reference-out interval. First = the "
             "first request of that kind after the coreset is ready, in this process (parses the stored state, "
             "fits the predictor). Targets: p50 <= 50 ms (issue 16), p99 <= 1 s (issue 34).", "",
             "| path | p50 ms | p90 ms | p99 ms |", "|---|---|---|---|",
             f"| `{{model}}` (stored scores) | {res['model_p50']:.1f} | {res['model_p90']:.1f} | {res['model_p99']:.1f} |",
             f"| `{{scores}}` (posted) | {res['posted_p50']:.1f} | {res['posted_p90']:.1f} | {res['posted_p99']:.1f} |",
             f"| `{{scores}}` extrapolated (AIPW) | {res['extrapolated_p50']:.1f} | {res['extrapolated_p90']:.1f} | "
             f"{res['extrapolated_p99']:.1f} |", "",
             f"First predict: {res['first_ms']:.0f} ms (`{{model}}`), first extrapolated: "
             f"{res['first_extrapolated_ms']:.0f} ms.", "",
             "| batch `{models: [...]}` size | median ms | ms per model |", "|---|---|---|"]
    for size, t in res["batch"].items():
        lines.append(f"| {size} | {t * 1000:.1f} | {t * 1000 / size:.2f} |")
    lines += ["", "<!-- interpretation -->", "<!-- /interpretation -->", END]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--refs", type=int, default=400)
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 10, 50, 100])
    ap.add_argument("--write", type=Path)
    args = ap.parse_args()
    res = run(args)
    print(res)
    if args.write:
        write_section(args.write, markdown(res, args), START, END, new_file="# Performance\n")


if __name__ == "__main__":
    main()
