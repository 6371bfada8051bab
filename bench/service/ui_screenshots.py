"""Screenshots of every page into docs/screenshots/, on the real data in ../shared/data.

    python -m bench.service.ui_screenshots [--out docs/screenshots] [--only leaderboard compare ...]

Starts `evalplan serve` on a fresh PostgreSQL database (bench/common/server.py), loads real benchmarks
through the HTTP API (MuSR, five HELM Lite scenarios, GSM8K and AlpacaEval prompts), builds a text
coreset, a score-based coreset, a session fed a real model's scores, a backtest, a plan for three HELM Lite
scenarios and the benchmark similarity, then drives Debian's chromium (playwright, executable_path) over the
pages at 1280 px, plus two pages at phone width. Takes a few minutes on 2 CPU cores (embedding ~2.1k prompts
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

from bench.common.server import ROOT, data_dir, fresh_database, running_server

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


def checkpoint_pair_on_musr(http: httpx.Client, n: int = 200) -> tuple[str, str]:
    """Two "checkpoints" (two real MuSR models, renamed) run on the same random item order with
    random-sampling sessions: what the comparison page pairs."""
    lines = (data_dir() / "openllm_v2_musr" / "scores.csv").read_text().splitlines()
    items = lines[0].split(",")[1:]
    rows = [lines[1 + r].split(",") for r in (SESSION_TARGET_ROW, SESSION_TARGET_ROW + 60)]
    order = [items[(j * 7919) % len(items)] for j in range(len(items))]  # a fixed permutation (7919 is prime)
    ids = []
    for label, row in zip(("musr-ckpt-1000", "musr-ckpt-2000"), rows):
        values = dict(zip(items, row[1:]))
        session = ok(http.post("/v1/sessions", json={"benchmark": "musr", "target": label, "method": "rs_mean",
                                                     "max_items": n}))
        batch = [{"item": i, "score": float(values[i])} for i in order if values.get(i, "") != ""][:n]
        ok(http.post(f"/v1/sessions/{session['id']}/observations", json={"observations": batch}))
        ids.append(session["id"])
    return ids[0], ids[1]


def coreset_only_model(http: httpx.Client, helm: dict[str, Any], model: str = "openai_gpt-4o-2024-08-06") -> None:
    """A real HELM Lite model's scores on the coreset's items only, under a new name: the leaderboard
    shows it as coreset predictions (a strong model, so that it is on the first page)."""
    for folder in HELM:
        name = folder.removeprefix("helm_lite_")
        lines = (data_dir() / folder / "scores.csv").read_text().splitlines()
        items = lines[0].split(",")[1:]
        row = next((line for line in lines[1:] if line.split(",", 1)[0] == model), lines[1])
        values = dict(zip(items, row.split(",")[1:]))
        cells = [{"model": "helm-checkpoint (coreset only)", "item": it["item"], "score": float(values[it["item"]])}
                 for it in helm["items"] if it["benchmark"] == name and values.get(it["item"], "") != ""]
        ok(http.post(f"/v1/benchmarks/{name}/scores", json=cells))


REFERENCE_SOLUTIONS = "gsm8k-reference-solutions"


def reference_solutions_as_responses(http: httpx.Client, n: int = 400) -> None:
    """GSM8K's own reference solutions, imported as an lm-eval ``--log_samples`` file of a "model" named for what
    it is (``gsm8k-reference-solutions``, exact match 1): real text for the pages' response column (the shared
    data holds no model outputs)."""
    lines = (data_dir() / "gsm8k_text" / "items.jsonl").read_text().splitlines()[:n]
    records = []
    for line in lines:
        item = json.loads(line)
        records.append({"doc_id": int(item["id"]), "doc": {"question": item["prompt"], "answer": item["target"]},
                        "target": item["target"], "arguments": [[item["prompt"], {"until": ["\n\n"]}]],
                        "resps": [[item["target"]]], "filtered_resps": [item["target"]], "filter": "none",
                        "metrics": ["exact_match"], "exact_match": 1.0})
    body = "".join(json.dumps(r) + "\n" for r in records).encode()
    ok(http.post("/v1/imports/lm-eval", data={"model": REFERENCE_SOLUTIONS},
                 files=[("files", ("samples_gsm8k_2024-06-26T12-00-00.000000.jsonl", body, "application/x-ndjson"))]),
       201, 202)


def seed(http: httpx.Client, pages: set[str]) -> dict[str, str]:
    """What the ``pages`` need (all of it for every page)."""
    ids: dict[str, str] = {}
    benchmark(http, "musr", "openllm_v2_musr", "reasoning")
    for folder, capability in HELM.items():
        benchmark(http, folder.removeprefix("helm_lite_"), folder, capability)
    if pages & {"coreset-text", "similarity"}:
        benchmark(http, "gsm8k", "gsm8k_text", "math", scores=False, items=True)
        benchmark(http, "alpacaeval", "alpacaeval1", "instruction following", items=True, kind="continuous")
    if "coreset-text" in pages:
        ids["text"] = coreset(http, {"name": "gsm8k-starter", "method": "facility_location", "benchmarks": ["gsm8k"],
                                     "budget": 40})["id"]
        reference_solutions_as_responses(http)
    if pages & {"coreset-scores", "coreset-scores-phone", "leaderboard"}:
        helm = coreset(http, {"name": "helm-lite-5pct", "method": "mrmr", "benchmarks": [
            b.removeprefix("helm_lite_") for b in HELM], "budget": {"fraction": 0.05}, "reference_models": "all"})
        ids["helm"] = helm["id"]
        coreset_only_model(http, helm)
    if "coreset-auto" in pages:  # what auto chose on MuSR, and its CV table
        ids["auto"] = coreset(http, {"name": "musr-auto", "method": "auto", "benchmarks": ["musr"], "budget": 40,
                                     "reference_models": "all",
                                     "params": {"selectors": ["random", "mrmr"], "max_seconds": 240}})["id"]
    if pages & {"session", "session-phone", "benchmark"}:
        ids["session"] = session_on_musr(http)["id"]
    if pages & {"compare", "benchmark", "leaderboard"}:
        ids["ckpt_a"], ids["ckpt_b"] = checkpoint_pair_on_musr(http)
    if "backtest" in pages:
        backtest = ok(http.post("/v1/backtests", json={
            "benchmarks": "musr", "methods": ["random", "mrmr", "anchor_points"],
            "budgets": [0.02, 0.05, 0.1, 0.2], "n_reference": 100, "seeds": 3,
            "params": {"anchor_points": {"n_init": 1}}}), 202)
        wait(http, backtest["job"]["id"])
        ids["backtest"] = backtest["job"]["id"]
    if "plan" in pages:
        plan = ok(http.post("/v1/plans", json={
            "benchmarks": ["math", "gsm", "mmlu"], "half_width": 0.03, "methods": ["random", "mrmr", "anchor_points"],
            "seeds": 2, "cost_per_item": 0.4, "params": {"anchor_points": {"n_init": 1}}}), 202)
        wait(http, plan["job"]["id"])
        ids["plan"] = plan["job"]["id"]
    if "similarity" in pages:
        similarity = http.get("/v1/benchmark-similarity", params={"benchmarks": "gsm8k,alpacaeval"})
        if similarity.status_code == 202:
            wait(http, similarity.json()["job"]["id"])
    if "benchmark" in pages:
        stats = http.get("/v1/benchmarks/musr/stats")
        if stats.status_code == 202:
            wait(http, stats.json()["job"]["id"])
    return ids


def page_paths(ids: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(desktop, phone) page name -> path; pages whose data was not seeded are left out."""
    helm_suite = ",".join(b.removeprefix("helm_lite_") for b in HELM)
    desktop = {"home": "/ui/", "benchmark": "/ui/benchmarks/musr",
               "session": f"/ui/sessions/{ids.get('session')}",
               "coreset-text": f"/ui/coresets/{ids.get('text')}?model={REFERENCE_SOLUTIONS}",
               "coreset-auto": f"/ui/coresets/{ids.get('auto')}",
               "coreset-scores": f"/ui/coresets/{ids.get('helm')}", "backtest": f"/ui/jobs/{ids.get('backtest')}",
               "plan": f"/ui/plans/{ids.get('plan')}", "login": "/ui/login",
               "similarity": "/ui/similarity?benchmarks=gsm8k&benchmarks=alpacaeval",
               "leaderboard": f"/ui/leaderboard?benchmarks={helm_suite}", "leaderboard-picker": "/ui/leaderboard",
               "compare": f"/ui/compare?sessions={ids.get('ckpt_a')},{ids.get('ckpt_b')}",
               "docs": "/docs", "redoc": "/redoc", "not-found": "/ui/coresets/cs_unknown"}
    needs = {"session": "session", "coreset-text": "text", "coreset-auto": "auto", "coreset-scores": "helm", "backtest": "backtest",
             "plan": "plan", "compare": "ckpt_a", "leaderboard": "helm"}
    desktop = {k: v for k, v in desktop.items() if k not in needs or needs[k] in ids}
    phone = {"session-phone": desktop.get("session"), "coreset-scores-phone": desktop.get("coreset-scores")}
    return desktop, {k: v for k, v in phone.items() if v is not None}


def shoot(base: str, ids: dict[str, str], out: Path, only: set[str] | None = None) -> list[str]:
    from PIL import Image
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("EVALPLAN_TEST_CHROMIUM") or shutil.which("chromium") or "chromium"
    desktop, phone = page_paths(ids)
    if only:
        desktop = {k: v for k, v in desktop.items() if k in only}
        phone = {k: v for k, v in phone.items() if k in only}
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
    parser.add_argument("--database", default="evalplan_screenshots", help="the throwaway database's name")
    parser.add_argument("--only", nargs="+", default=None, help="these pages only (and only their data)")
    args = parser.parse_args()
    everything = set(page_paths({k: "x" for k in ("session", "text", "helm", "backtest", "plan", "ckpt_a",
                                                  "auto")})[0]) | {
        "session-phone", "coreset-scores-phone"}
    pages = set(args.only) if args.only else everything
    if pages - everything:
        parser.error(f"unknown pages {sorted(pages - everything)}; choose from {sorted(everything)}")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with running_server(fresh_database(args.database)) as (base, _):
        with httpx.Client(base_url=base, timeout=600) as http:
            ids = seed(http, pages)
        written = shoot(base, ids, args.out, pages if args.only else None)
    print(json.dumps({"written": written, "seconds": round(time.perf_counter() - started, 1)}))


if __name__ == "__main__":
    main()
