"""Benchmark item-text embeddings through the service (issue: embeddings).

Embeds ``$EVALPLAN_DATA_DIR/gsm8k_text/items.jsonl`` (1,319 GSM8K test items; default
``../shared/data``, read in place) through the service path: the real app and its in-process job
dispatcher on a fresh database (SQLite by default, ``--backend postgresql`` for a fresh PostgreSQL
database), ``POST /v1/benchmarks``, ``POST /v1/benchmarks/{b}/items`` with the JSONL file, then
``POST /v1/embeddings`` and the ``embed`` job to its end. The job's time includes everything it
does: loading the items, building and hashing the texts, the cache lookup, token counting, encoding
and storing the vectors.

Peer, in the same process and run: ``model.encode(texts, batch_size=64, normalize_embeddings=True)``
on the same texts with the same (already loaded) model. Each is timed ``--runs`` times (median),
interleaved; before each job run the cached vectors are deleted so the job computes them all.
Then a second job on unchanged data measures the cache (target ~0 s).

Targets: job throughput within 10% of the direct call; second run ~0 s.

Usage: python -m bench.coresets.embedding_bench [--runs 3] [--backend sqlite|postgresql] [--write docs/PERFORMANCE.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import psutil  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from sqlalchemy import delete  # noqa: E402

from bench.common.markdown_sections import write_section as write_marked_section
from bench.common.server import data_dir  # noqa: E402
from evalplan.core.embedding.embedder import load_embedder  # noqa: E402
from evalplan.core.embedding.embedding_text import item_text  # noqa: E402
from evalplan.db.migrate import upgrade  # noqa: E402
from evalplan.db.models import Embedding  # noqa: E402
from evalplan.embeddings.repository import load_embeddings  # noqa: E402
from evalplan.kit.db import make_engine, make_session_factory  # noqa: E402
from evalplan.kit.settings import Settings  # noqa: E402
from evalplan.main import create_app  # noqa: E402
from evalplan.workers.dispatch import InProcessDispatcher  # noqa: E402

BEGIN, END = "<!-- embeddings -->", "<!-- /embeddings -->"
BENCHMARK = "gsm8k_text"


def run_job(client: TestClient, dispatcher: InProcessDispatcher, body: dict) -> tuple[float, float, dict]:
    """POST /v1/embeddings and wait for the job's future (no polling); returns (wall s, CPU s, job)."""
    start, cpu = time.perf_counter(), time.process_time()
    r = client.post("/v1/embeddings", json=body)
    assert r.status_code == 202, r.text
    dispatcher.futures[-1].result()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    job = client.get(f"/v1/jobs/{r.json()['job']['id']}").json()
    assert job["status"] == "succeeded", job
    return seconds, cpu, job


def drop_database(name: str) -> None:
    from sqlalchemy import text

    from bench.common.server import ADMIN_URL

    admin = make_engine(ADMIN_URL).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--write", type=Path, default=None, help="rewrite the embeddings section of this markdown file")
    args = parser.parse_args()

    items_path = data_dir() / BENCHMARK / "items.jsonl"
    raw = items_path.read_bytes()
    rows = [json.loads(line) for line in raw.splitlines() if line.strip()]
    texts = [item_text(r["prompt"], r.get("target"), r.get("fields"), []) for r in rows]

    with tempfile.TemporaryDirectory() as folder:
        if args.backend == "sqlite":
            url = f"sqlite:///{Path(folder) / 'bench.db'}"
            upgrade(url)
        else:
            from bench.common.server import fresh_database

            url = fresh_database("evalplan_embed_bench")
        settings = Settings(database_url=url, redis_url=None, log_level="WARNING")
        engine = make_engine(url)
        factory = make_session_factory(engine)
        dispatcher = InProcessDispatcher(factory, threads=1)
        app = create_app(settings, session_factory=factory, dispatcher=dispatcher)

        start = time.perf_counter()
        embedder = load_embedder(settings.embedding_model)  # the same process-wide cache the job uses
        load_s = time.perf_counter() - start
        model = embedder.model
        model.encode(texts[:64], batch_size=64, normalize_embeddings=True, show_progress_bar=False)  # warm-up

        with TestClient(app) as client:
            assert client.post("/v1/benchmarks", json={"name": BENCHMARK}).status_code == 201
            r = client.post(f"/v1/benchmarks/{BENCHMARK}/items", content=raw,
                            headers={"content-type": "application/x-ndjson"})
            assert r.status_code == 200 and r.json()["created"] == len(rows), r.text

            direct_s, job_s, job_inner_s, direct_cpu, job_cpu = [], [], [], [], []
            direct = None
            result: dict = {}
            for i in range(args.runs):
                for which in (("direct", "job") if i % 2 == 0 else ("job", "direct")):  # alternate the order
                    if which == "direct":
                        start, cpu = time.perf_counter(), time.process_time()
                        direct = model.encode(texts, batch_size=64, normalize_embeddings=True,
                                              show_progress_bar=False)
                        direct_s.append(time.perf_counter() - start)
                        direct_cpu.append(time.process_time() - cpu)
                        continue
                    with factory() as session:
                        session.execute(delete(Embedding))
                        session.commit()
                    seconds, cpu, job = run_job(client, dispatcher, {"benchmarks": [BENCHMARK]})
                    result = job["result"]
                    assert result["n_embedded"] == len(set(texts)) and result["n_cached"] == 0, result
                    job_s.append(seconds)
                    job_cpu.append(cpu)
                    job_inner_s.append(result["seconds"])
                print(f"run {i + 1}: direct {direct_s[-1]:.2f} s (CPU {direct_cpu[-1]:.2f} s), job {job_s[-1]:.2f} s "
                      f"(CPU {job_cpu[-1]:.2f} s, handler {job_inner_s[-1]:.2f} s)", flush=True)

            second_s, _, second = run_job(client, dispatcher, {"benchmarks": [BENCHMARK]})
            assert second["result"]["n_embedded"] == 0 and second["result"]["n_cached"] == len(rows)
            with factory() as session:
                _, _, stored = load_embeddings(session, [BENCHMARK], settings.embedding_model)
            max_diff = float(np.abs(stored - direct).max())
        engine.dispose()
        if args.backend == "postgresql":
            drop_database("evalplan_embed_bench")

    n = len(texts)
    med_direct, med_job = statistics.median(direct_s), statistics.median(job_s)
    figures = {
        "n": n, "runs": args.runs, "backend": args.backend, "device": embedder.device,
        "direct_s": direct_s, "job_s": job_s, "job_inner_s": job_inner_s,
        "direct_ips": n / med_direct, "job_ips": n / med_job, "ratio": med_direct / med_job,
        "best_ratio": min(direct_s) / min(job_s), "load_avg": os.getloadavg(),
        "direct_cpu": direct_cpu, "job_cpu": job_cpu,
        "cpu_ratio": statistics.median(direct_cpu) / statistics.median(job_cpu),
        "second_s": second_s, "second_inner_s": second["result"]["seconds"],
        "n_truncated": result["n_truncated"], "max_seq_length": result["max_seq_length"],
        "max_diff": max_diff, "load_s": load_s, "model": settings.embedding_model,
        "tokens": embedder.token_counts(texts),
        "solution_tokens": embedder.token_counts(
            [item_text(r["prompt"], r.get("target"), r.get("fields"), ["solution"]) for r in rows]),
    }
    table = render(figures)
    print(table)
    if args.write:
        write_section(args.write, table)


def render(f: dict) -> str:
    import torch

    machine = (f"{platform.machine()}, {os.cpu_count()} CPU cores (torch threads {torch.get_num_threads()}), "
               f"{psutil.virtual_memory().total / 2**30:.0f} GiB RAM, device `{f['device']}`, "
               f"Python {platform.python_version()}, torch {torch.__version__}")
    tokens = f["tokens"]
    fmt = lambda xs: ", ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    return "\n".join([
        f"{BEGIN}",
        "<!-- written by `python -m bench.coresets.embedding_bench --write docs/PERFORMANCE.md` -->",
        "### Embeddings (`POST /v1/embeddings`, the `embed` job)",
        "",
        f"Machine: {machine}. Data: `gsm8k_text/items.jsonl`, {f['n']:,} items (prompt + target; "
        f"{int(np.median(tokens))} tokens median, {int(tokens.max())} max). Model `{f['model']}` "
        f"(all-MiniLM-L6-v2, 384-d, {f['max_seq_length']}-token limit; load {f['load_s']:.1f} s, not timed "
        f"below). Job: the real app and in-process dispatcher on a fresh {f['backend']} database, timed from "
        f"`POST /v1/embeddings` to the job's end, cached vectors deleted before each run. Direct: "
        f"`model.encode(texts, batch_size=64, normalize_embeddings=True)` on the same texts, same loaded "
        f"model, same process, interleaved with the job runs. Median of {f['runs']}. The machine is shared "
        f"(1-minute load average {f['load_avg'][0]:.1f} at the end), so single runs vary.",
        "",
        "| measure | median | target | all runs |",
        "|---|---|---|---|",
        f"| direct `model.encode` | {f['n'] / f['direct_ips']:.2f} s = {f['direct_ips']:.0f} items/s | | "
        f"{fmt(f['direct_s'])} |",
        f"| the `embed` job, all {f['n']:,} items | {f['n'] / f['job_ips']:.2f} s = {f['job_ips']:.0f} items/s | "
        f"| {fmt(f['job_s'])} (handler {fmt(f['job_inner_s'])}) |",
        f"| job throughput / direct throughput (wall clock) | {f['ratio']:.2f} | >= 0.90 | best run vs best "
        f"run: {f['best_ratio']:.2f} |",
        f"| the same ratio on process CPU time (insensitive to other load) | {f['cpu_ratio']:.2f} | >= 0.90 | "
        f"direct {fmt(f['direct_cpu'])}; job {fmt(f['job_cpu'])} |",
        f"| second job, unchanged text (all cached) | {f['second_s']:.3f} s (handler {f['second_inner_s']:.3f} s) "
        f"| ~0 s | |",
        f"| items truncated at {f['max_seq_length']} tokens (counted, reported) | {f['n_truncated']} | | |",
        f"| (the same items with `embedding_fields: [\"solution\"]`, worked solutions appended: texts over "
        f"the limit) | {int((f['solution_tokens'] > f['max_seq_length']).sum())} | | "
        f"{int(np.median(f['solution_tokens']))} tokens median, {int(f['solution_tokens'].max())} max |",
        f"| max abs difference, stored vs direct vectors | {f['max_diff']:.1e} | | |",
        "",
        "The job sorts texts by token count (which it computes anyway to count truncations) before "
        "batching, so its batches carry less padding than `model.encode`'s character-length sort.",
        END,
    ])


def write_section(path: Path, table: str) -> None:
    """Replace the ``<!-- embeddings -->`` section of ``path`` (or append it), keeping the rest."""
    write_marked_section(path, table, BEGIN, END, new_file="# Performance\n")


if __name__ == "__main__":
    main()
