"""Screenshots of every page into docs/screenshots/, on the real data in ../shared/data.

    python -m bench.ui_screenshots [--out docs/screenshots]

Starts `evalplan serve` on a fresh PostgreSQL database (bench/server.py), loads real benchmarks
through the HTTP API (MuSR, five HELM Lite scenarios, GSM8K and AlpacaEval prompts), builds a text
coreset, a score-based coreset, a BayesAME session fed a real model's scores, a backtest and the
benchmark similarity, then drives Debian's chromium (playwright, executable_path) over the pages at
1280 px, plus two pages at phone width. Takes a few minutes on 2 CPU cores (embedding ~2.1k prompts
and the backtest dominate). Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import httpx

from bench.server import ROOT, data_dir, fresh_database, running_server

HELM = {"helm_lite_gsm": "math", "helm_lite_math": "math", "helm_lite_mmlu": "knowledge",
        "helm_lite_med_qa": "medicine", "helm_lite_commonsense": "commonsense"}
MAX_HEIGHT = 2600  # px of a desktop screenshot (long tables are cut, the page above them is kept)
SESSION_TARGET_ROW = 120  # a mid-ranked MuSR model (its real scores answer the session)


def wait(http: httpx.Client, job_id: str, timeout: float = 1800) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while (job := http.get(f"/v1/jobs/{job_id}").json())["status"] in ("queued", "running"):
        if time.monotonic() > deadline:
            raise TimeoutError(job)
        time.sleep(0.5)
    if job["status"] != "succeeded":
        raise RuntimeError(job)
    return job


def ok(response: httpx.Response, *codes: int) -> dict[str, Any]:
    if response.status_code not in (codes or (200, 201)):
        raise RuntimeError(f"{response.request.method} {response.request.url}: {response.status_code} {response.text[:500]}")
    return response.json()


def benchmark(http: httpx.Client, name: str, folder: str, capability: str, *, scores: bool = True,
              items: bool = False, kind: str = "binary") -> None:
    ok(http.post("/v1/benchmarks", json={"name": name, "capability": capability, "score_kind": kind}))
    path = data_dir() / folder
    if items:
        ok(http.post(f"/v1/benchmarks/{name}/items", content=(path / "items.jsonl").read_bytes(),
                     headers={"content-type": "application/x-ndjson"}))
    if scores:
        ok(http.post(f"/v1/benchmarks/{name}/scores", content=(path / "scores.csv").read_bytes(),
                     headers={"content-type": "text/csv"}))


def coreset(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    created = ok(http.post("/v1/coresets", json=body), 202)
    wait(http, created["job"]["id"])
    return ok(http.get(f"/v1/coresets/{created['coreset']['id']}"))


def session_on_musr(http: httpx.Client) -> dict[str, Any]:
    lines = (data_dir() / "openllm_v2_musr" / "scores.csv").read_text().splitlines()
    items = lines[0].split(",")[1:]
    row = lines[1 + SESSION_TARGET_ROW].split(",")
    target, values = row[0], dict(zip(items, row[1:]))
    session = ok(http.post("/v1/sessions", json={"benchmark": "musr", "target": target, "max_items": 300}))
    while session["status"] == "active":
        batch = [{"item": i, "score": float(values[i])} for i in session["next_items"] if values.get(i, "") != ""]
        session = ok(http.post(f"/v1/sessions/{session['id']}/observations", json={"observations": batch}))
    return session


def seed(http: httpx.Client) -> dict[str, str]:
    benchmark(http, "musr", "openllm_v2_musr", "reasoning")
    for folder, capability in HELM.items():
        benchmark(http, folder.removeprefix("helm_lite_"), folder, capability)
    benchmark(http, "gsm8k", "gsm8k_text", "math", scores=False, items=True)
    benchmark(http, "alpacaeval", "alpacaeval1", "instruction following", items=True, kind="continuous")
    text = coreset(http, {"name": "gsm8k-starter", "method": "facility_location", "benchmarks": ["gsm8k"],
                          "budget": 40})
    helm = coreset(http, {"name": "helm-lite-5pct", "method": "mrmr", "benchmarks": [b.removeprefix("helm_lite_")
                          for b in HELM], "budget": {"fraction": 0.05}, "reference_models": "all"})
    session = session_on_musr(http)
    backtest = ok(http.post("/v1/backtests", json={
        "benchmarks": "musr", "methods": ["random", "mrmr", "anchor_points"],
        "budgets": [0.02, 0.05, 0.1, 0.2], "n_reference": 100, "seeds": 3,
        "params": {"anchor_points": {"n_init": 1}}}), 202)
    wait(http, backtest["job"]["id"])
    similarity = http.get("/v1/benchmark-similarity", params={"benchmarks": "gsm8k,alpacaeval"})
    if similarity.status_code == 202:
        wait(http, similarity.json()["job"]["id"])
    stats = http.get("/v1/benchmarks/musr/stats")
    if stats.status_code == 202:
        wait(http, stats.json()["job"]["id"])
    return {"text": text["id"], "helm": helm["id"], "session": session["id"], "backtest": backtest["job"]["id"]}


def shoot(base: str, ids: dict[str, str], out: Path) -> list[str]:
    from PIL import Image
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("EVALPLAN_TEST_CHROMIUM") or shutil.which("chromium") or "chromium"
    desktop = {"home": "/ui/", "benchmark": "/ui/benchmarks/musr", "session": f"/ui/sessions/{ids['session']}",
               "coreset-text": f"/ui/coresets/{ids['text']}", "coreset-scores": f"/ui/coresets/{ids['helm']}",
               "backtest": f"/ui/jobs/{ids['backtest']}",
               "similarity": "/ui/similarity?benchmarks=gsm8k&benchmarks=alpacaeval",
               "docs": "/docs", "redoc": "/redoc", "not-found": "/ui/coresets/cs_unknown"}
    phone = {"session-phone": desktop["session"], "coreset-scores-phone": desktop["coreset-scores"]}
    written = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for shots, options in ((desktop, {"viewport": {"width": 1280, "height": 900}}),
                               (phone, {"viewport": {"width": 390, "height": 844}, "is_mobile": True,
                                        "device_scale_factor": 2})):
            context = browser.new_context(**options)
            context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base)
                          else route.abort())
            page = context.new_page()
            for name, path in shots.items():
                page.goto(base + path)
                page.wait_for_load_state("networkidle")
                if name in ("docs", "redoc"):
                    page.wait_for_selector(".swagger-ui .opblock, .api-content h1")
                image = Image.open(io.BytesIO(page.screenshot(full_page=True)))
                limit = MAX_HEIGHT * (2 if "phone" in name else 1)
                if image.height > limit:
                    image = image.crop((0, 0, image.width, limit))
                if "phone" in name:
                    image = image.resize((image.width // 2, image.height // 2))
                target = out / f"{name}.png"
                image.convert("RGB").save(target, optimize=True)
                written.append(target.name)
            context.close()
        browser.close()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with running_server(fresh_database("evalplan_screenshots")) as (base, _):
        with httpx.Client(base_url=base, timeout=600) as http:
            ids = seed(http)
        written = shoot(base, ids, args.out)
    print(json.dumps({"written": written, "seconds": round(time.perf_counter() - started, 1)}))


if __name__ == "__main__":
    main()
