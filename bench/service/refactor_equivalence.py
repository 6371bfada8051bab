"""Behaviour fingerprint of the HTTP API for refactors: run it on two commits and diff the JSON.

On a deterministic SYNTHETIC dataset (seeded; nothing from ../shared/data), through HTTP only
(FastAPI TestClient on a fresh SQLite file, jobs in the real in-process thread pool), it runs

* a backtest job (every selector, several predictors incl. the guard) and a suite backtest;
* sessions: bayesame, bayesame_rs, rs_mean (single target), multi-target bayesame without and with
  hyperparameter refits, each driven to its stopping rule by a fixed oracle;
* coresets of the three families (text, score-based, hidden-state) with their predictions;

and writes the backtest rows (minus ``seconds``), every session's responses and trajectory, and the
coreset items and predictions to ``--out`` (ids, timestamps and timings removed).

    python -m bench.service.refactor_equivalence --out /tmp/after.json
    python bench/refactor_equivalence.py --out /tmp/before.json  # in a checkout of a commit before the src layout
    python -m bench.service.refactor_equivalence --compare /tmp/before.json /tmp/after.json
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

VOLATILE = {"id", "created_at", "updated_at", "seconds", "started_at", "finished_at", "job", "coreset",
            "prior_key", "training_key"}
N_MODELS, N_ITEMS = 36, 90
ID = re.compile(r"\b[a-z]+_[0-9a-f]{24}\b")


def scrub(value: Any) -> Any:
    """Drop ids, timestamps and timings (they differ between any two runs)."""
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def stable_ids(text: str) -> str:
    """Server ids (time-ordered) -> their rank among the ids of their type, e.g. ``bm#0``."""
    rank: dict[str, str] = {}
    for i in sorted(set(ID.findall(text))):
        prefix = i.split("_")[0]
        rank[i] = f"{prefix}#{sum(1 for r in rank if r.startswith(prefix + '_'))}"
    return ID.sub(lambda m: rank[m.group(0)], text)


def synthetic_scores(seed: int, n_models: int = N_MODELS, n_items: int = N_ITEMS) -> np.ndarray:
    """Binary scores from a seeded 2PL model (models x items)."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(0, 1, n_models)
    difficulty = rng.normal(0, 1, n_items)
    slope = rng.uniform(0.5, 2.0, n_items)
    p = 1 / (1 + np.exp(-slope * (ability[:, None] - difficulty[None, :])))
    return (rng.random((n_models, n_items)) < p).astype(float)


def item_ids(n: int = N_ITEMS) -> list[str]:
    return [f"q{j:03d}" for j in range(n)]


def wide_csv(Y: np.ndarray, names: list[str], ids: list[str]) -> str:
    lines = ["model," + ",".join(ids)]
    lines += [name + "," + ",".join(str(int(v)) for v in row) for name, row in zip(names, Y)]
    return "\n".join(lines) + "\n"


def ok(response: Any, status: int) -> Any:
    if response.status_code != status:
        raise SystemExit(f"{response.request.method} {response.request.url} -> {response.status_code}: "
                         f"{response.text[:2000]}")
    return response.json()


def wait(client: Any, job_id: str, timeout: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            if job["status"] != "succeeded":
                raise SystemExit(f"job {job_id} {job['status']}: {job.get('error')}")
            return job
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job_id} timed out")
        time.sleep(0.05)


def setup_data(client: Any) -> dict[str, np.ndarray]:
    data = {}
    for b, seed in (("alpha", 1), ("beta", 2)):
        Y = synthetic_scores(seed)
        data[b] = Y
        ok(client.post("/v1/benchmarks", json={"name": b, "capability": "reasoning", "score_kind": "binary"}), 201)
        items = [{"id": i, "prompt": f"Question {i} of {b}: what is {j} plus {seed * j % 7}?"}
                 for j, i in enumerate(item_ids())]
        ok(client.post(f"/v1/benchmarks/{b}/items", json=items), 200)
        names = [f"m{m:02d}" for m in range(N_MODELS)]
        ok(client.post(f"/v1/benchmarks/{b}/scores", content=wide_csv(Y, names, item_ids()),
                       headers={"content-type": "text/csv"}), 200)
    return data


def run_backtests(client: Any) -> dict[str, Any]:
    out = {}
    body = {"benchmarks": ["alpha", "beta"], "budgets": [0.1, 0.2], "n_reference": 20, "seeds": 2,
            "methods": ["random", "anchor_points", "mrmr", "irt", "lasso", "pbsc", "hardness", "random_search"],
            "predictors": {"random": ["mean", "aipw"], "anchor_points": ["weighted_mean", "guard"],
                           "mrmr": ["kernel_ridge", "ridge", "guard"], "irt": ["gp_irt", "p_irt"],
                           "lasso": "ridge", "pbsc": "kernel_ridge", "hardness": "mean",
                           "random_search": "kernel_ridge"},
            "params": {"random_search": {"n_trials": 50}, "anchor_points": {"n_init": 2}}}
    for name, extra in (("per_benchmark", {}), ("extrapolation", {"split": "extrapolation", "n_reference": 15}),
                        ("suite", {"suite": True, "predictors": None,
                                   "methods": ["random", "anchor_points", "mrmr", "irt"],
                                   "params": {"anchor_points": {"n_init": 2}}})):
        job = ok(client.post("/v1/backtests", json={**body, **extra}), 202)["job"]
        result = wait(client, job["id"])["result"]
        out[name] = scrub(result)
    return out


def drive_session(client: Any, body: dict[str, Any], oracle: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Create a session and answer its proposals from ``oracle[target][item]`` until it stops."""
    views = []
    session = ok(client.post("/v1/sessions", json=body), 201)
    views.append(scrub(session))
    for _ in range(2000):
        if session["status"] == "stopped":
            break
        if session.get("targets"):
            obs = [{"target": p["target"], "item": p["item"], "score": oracle[p["target"]][p["item"]]}
                   for p in session["next"]]
        else:
            obs = [{"item": i, "score": oracle[body["target"]][i]} for i in session["next_items"]]
        session = ok(client.post(f"/v1/sessions/{session['id']}/observations", json={"observations": obs}), 200)
        views.append(scrub(session))
    trajectory = ok(client.get(f"/v1/sessions/{session['id']}/trajectory"), 200)
    again = ok(client.get(f"/v1/sessions/{session['id']}"), 200)
    return {"views": views, "trajectory": trajectory, "final": scrub(again)}


def run_sessions(client: Any, data: dict[str, np.ndarray]) -> dict[str, Any]:
    targets = {f"target{t}": synthetic_scores(10 + t, n_models=1)[0] for t in range(3)}
    oracle = {name: dict(zip(item_ids(), map(float, row))) for name, row in targets.items()}
    refs = [f"m{m:02d}" for m in range(N_MODELS)]
    out = {}
    for method in ("bayesame", "bayesame_rs", "rs_mean"):
        out[method] = drive_session(client, {"benchmark": "alpha", "target": "target0", "method": method,
                                             "reference_models": refs, "seed": 3, "max_items": 60}, oracle)
    out["bayesame_batch"] = drive_session(client, {"benchmark": "alpha", "target": "target1", "batch_size": 4,
                                                   "seed": 1, "epsilon1": 0.02, "window": 10}, oracle)
    out["multi_no_refit"] = drive_session(client, {"benchmark": "alpha", "targets": ["target0", "target1"],
                                                   "refit_every": 0, "seed": 2, "max_items": 40}, oracle)
    out["multi_refit"] = drive_session(client, {"benchmark": "alpha", "targets": ["target0", "target1", "target2"],
                                                "n_latent": 3, "refit_every": 20, "seed": 5, "max_items": 45}, oracle)
    return out


def upload_hidden_states(client: Any, data: dict[str, np.ndarray]) -> list[str]:
    """Seeded hidden states (items x 12) for five reference models of ``alpha``."""
    rng = np.random.default_rng(7)
    basis = rng.normal(size=(N_ITEMS, 6))
    sources = [f"m{m:02d}" for m in range(5)]
    for name in sources:
        states = (basis @ rng.normal(size=(6, 12)) + 0.1 * rng.normal(size=(N_ITEMS, 12))).astype(np.float32)
        buf = io.BytesIO()
        np.savez(buf, ids=np.array(item_ids()), states=states)
        ok(client.post("/v1/benchmarks/alpha/hidden-states", data={"model": name},
                       files={"file": ("s.npz", buf.getvalue())}), 201)
    return sources


def run_coresets(client: Any, data: dict[str, np.ndarray]) -> dict[str, Any]:
    sources = upload_hidden_states(client, data)
    target = synthetic_scores(11, n_models=1)[0]
    refs = [f"m{m:02d}" for m in range(N_MODELS)]
    requests = {
        "facility_location": {"method": "facility_location", "benchmarks": ["alpha", "beta"], "budget": 12,
                              "reference_models": refs[:10]},
        "k_center": {"method": "k_center", "benchmarks": ["alpha"], "budget": {"fraction": 0.1}},
        "random": {"method": "random", "benchmarks": ["alpha", "beta"], "budget": 10, "seed": 4},
        "mrmr": {"method": "mrmr", "benchmarks": ["alpha", "beta"], "budget": 12, "reference_models": "all"},
        "anchor_points": {"method": "anchor_points", "benchmarks": ["alpha"], "budget": 9,
                          "reference_models": refs, "predictor": "weighted_mean"},
        "irt": {"method": "irt", "benchmarks": ["alpha"], "budget": 10, "reference_models": refs,
                "predictor": "irt"},
        "lasso": {"method": "lasso", "benchmarks": ["beta"], "budget": {"fraction": 0.1}, "reference_models": refs,
                  "predictor": "ridge"},
        "repcore_correctness": {"method": "repcore", "benchmarks": ["alpha"], "budget": 8,
                                "reference_models": sources, "params": {"input": "correctness"}},
        "repcore_embeddings": {"method": "repcore", "benchmarks": ["alpha"], "budget": 8,
                               "reference_models": sources, "params": {"epochs": 5, "d_z": 4, "hidden": 8,
                                                                       "proj_dim": 8}},
    }
    out = {}
    for name, body in requests.items():
        created = ok(client.post("/v1/coresets", json=body), 202)
        wait(client, created["job"]["id"])
        coreset = ok(client.get(f"/v1/coresets/{created['coreset']['id']}"), 200)
        scores = [{"benchmark": it["benchmark"], "item": it["item"],
                   "score": float(target[item_ids().index(it["item"])])} for it in coreset["items"]]
        prediction = ok(client.post(f"/v1/coresets/{coreset['id']}/predict", json={"scores": scores}), 200)
        exports = {fmt: client.get(f"/v1/coresets/{coreset['id']}/export", params={"format": fmt}).text
                   for fmt in ("jsonl", "csv", "lm-eval", "inspect")}
        out[name] = {"coreset": scrub(coreset), "prediction": scrub(prediction), "exports": exports}
    return out


def fingerprint(out_path: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.pop("EVALPLAN_REDIS_URL", None)
    os.environ.setdefault("EVALPLAN_LOG_LEVEL", "WARNING")
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/equivalence.db"
        os.environ["EVALPLAN_DATABASE_URL"] = url
        from fastapi.testclient import TestClient

        import evalplan as package
        from evalplan.db.migrate import upgrade
        from evalplan.main import create_app

        print(f"evalplan from {Path(package.__file__).parent}", file=sys.stderr)
        upgrade(url)
        with TestClient(create_app()) as client:
            data = setup_data(client)
            result = {"backtests": run_backtests(client), "sessions": run_sessions(client, data),
                      "coresets": run_coresets(client, data)}
    out_path.write_text(stable_ids(json.dumps(result, indent=1, sort_keys=True)))
    print(f"wrote {out_path}", file=sys.stderr)


def compare(before: Any, after: Any, path: str = "") -> list[tuple[str, float | None, str]]:
    """Every place where the two fingerprints differ: (path, relative difference for two floats else None, text)."""
    if isinstance(before, dict) and isinstance(after, dict):
        diffs = [(f"{path}.{k}", None, f"only in {'before' if k in before else 'after'}") for k in set(before) ^ set(after)]
        for k in sorted(set(before) & set(after)):
            diffs += compare(before[k], after[k], f"{path}.{k}")
        return diffs
    if isinstance(before, list) and isinstance(after, list):
        if len(before) != len(after):
            return [(path, None, f"length {len(before)} != {len(after)}")]
        return [d for i, (b, a) in enumerate(zip(before, after)) for d in compare(b, a, f"{path}[{i}]")]
    if isinstance(before, float) and isinstance(after, float):
        if (math.isnan(before) and math.isnan(after)) or before == after:
            return []
        return [(path, abs(before - after) / max(abs(before), abs(after)), f"{before!r} != {after!r}")]
    return [] if before == after else [(path, None, f"{before!r} != {after!r}")]


def count_values(value: Any) -> int:
    if isinstance(value, dict):
        return sum(count_values(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_values(v) for v in value)
    return 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="write the fingerprint here")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--show", type=int, default=20, help="differences listed with --compare")
    args = parser.parse_args()
    if args.out:
        fingerprint(args.out)
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        diffs = compare(before, after)
        for section in sorted(before):
            mine = [d for d in diffs if d[0].startswith(f".{section}.")]
            floats = [d[1] for d in mine if d[1] is not None]
            print(f"{section}: {count_values(before[section])} values compared, {len(mine) - len(floats)} differ "
                  f"exactly, {len(floats)} floats differ" + (f" (max relative difference {max(floats):.1e})" if floats else ""))
        for where, _, text in diffs[:args.show]:
            print(f"{where}: {text}")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
