"""End-to-end check of score-based coresets (mRMR++) over real HTTP on real data (papers/002 flow).

Flow, on ``openllm_v2_musr/scores.csv`` (binary, one row per model, items c0..c755):

1. a real ``evalplan serve`` on a fresh PostgreSQL database (``bench.common.server``); ``POST /v1/benchmarks``
   (score kind binary) and ``POST /v1/benchmarks/musr/scores`` with the wide CSV of ALL models
   (unknown items and models are created by the upload);
2. 30 reference models by the stratified rule (``evalplan.core.backtest.backtest.split_models`` on the models' full
   mean scores, ``np.random.default_rng(seed)``); every other model is a held-out target;
3. ``POST /v1/coresets {"method": "mrmr", "budget": {"fraction": 0.1}, "reference_models": [...]}``
   (no predictor: the default kernel ridge, i.e. mRMR++), job polled until done (wall time recorded);
4. ``POST /v1/coresets/{id}/predict`` for every target with its scores on the coreset items;
5. estimate vs the true full mean: RMSE / MAE (x100), Kendall tau, coverage of the 90% interval
   (overall and by extrapolation flag), fraction flagged, interval width, predictor of the flagged
   targets, predict latency; compared with the offline backtest of the same seed
   (``run_backtest(..., seeds=[seed])``; ``kernel_ridge`` as asked, plus ``guard``, the service's rule:
   kernel ridge in range, AIPW when flagged) and with an offline replay of the same selection and
   the guard rule target by target.

Usage: OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.coresets.e2e_score_coreset_http [--seed 0] [--write docs/RESULTS.md]
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import platform
import statistics
import time
from pathlib import Path

import httpx
import numpy as np
from scipy.stats import kendalltau

from bench.common.markdown_sections import write_section
from bench.common.server import data_dir, fresh_database, running_server
from evalplan.core.backtest.backtest import _predict, _select, run_backtest, split_models

START, END = "<!-- e2e-score-coreset -->", "<!-- /e2e-score-coreset -->"
BENCH = "musr"
N_REF, BUDGET, LEVEL = 30, 0.1, 0.9


def load(path: Path) -> tuple[list[str], list[str], np.ndarray, int]:
    rows = list(csv.reader(io.StringIO(path.read_text())))
    items = rows[0][1:]
    models = [r[0] for r in rows[1:]]
    n_missing = sum(1 for r in rows[1:] for v in r[1:] if v == "")
    Y = np.array([[float(v) if v != "" else math.nan for v in r[1:]] for r in rows[1:]], dtype=float)
    return models, items, Y, n_missing


def wait_job(http: httpx.Client, job_id: str, timeout: float = 1800) -> dict:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        job = http.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.2)
    raise TimeoutError(f"job {job_id} not done after {timeout} s")


def pct(v: np.ndarray) -> str:
    return f"{100 * float(np.mean(v)):.1f}%" if v.size else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    t_all = time.perf_counter()
    csv_path = data_dir() / "openllm_v2_musr" / "scores.csv"
    csv_bytes = csv_path.read_bytes()
    models, items, Y, n_missing = load(csv_path)
    M, N = Y.shape
    s = Y.mean(axis=1)
    ref, test = split_models(s, N_REF, "stratified", np.random.default_rng(args.seed))
    ref_names = [models[i] for i in ref]
    col = {item: j for j, item in enumerate(items)}
    notes: list[str] = []

    url = fresh_database("evalplan_e2e_coreset")
    with running_server(url) as (base, _proc), httpx.Client(base_url=base, timeout=300) as http:
        r = http.post("/v1/benchmarks", json={"name": BENCH, "capability": "reasoning", "score_kind": "binary"})
        assert r.status_code == 201, r.text
        t0 = time.perf_counter()
        r = http.post(f"/v1/benchmarks/{BENCH}/scores", content=csv_bytes, headers={"content-type": "text/csv"})
        t_upload = time.perf_counter() - t0
        assert r.status_code == 200, r.text
        up = r.json()
        assert (up["n_scores"], up["n_models"], up["n_items"]) == (M * N - n_missing, M, N), up

        t0 = time.perf_counter()
        r = http.post("/v1/coresets", json={"method": "mrmr", "benchmarks": [BENCH], "budget": {"fraction": BUDGET},
                                            "reference_models": ref_names, "seed": args.seed})
        assert r.status_code == 202, r.text
        coreset_id, job_id = r.json()["coreset"]["id"], r.json()["job"]["id"]
        job = wait_job(http, job_id)
        t_job = time.perf_counter() - t0
        assert job["status"] == "succeeded", job
        coreset = http.get(f"/v1/coresets/{coreset_id}").json()
        assert coreset["status"] == "ready", coreset
        core_items = [it["item"] for it in sorted(coreset["items"], key=lambda it: it["rank"])]
        job_seconds = None
        if job.get("started_at") and job.get("finished_at"):
            from datetime import datetime
            job_seconds = (datetime.fromisoformat(job["finished_at"]) - datetime.fromisoformat(job["started_at"])).total_seconds()
        fits_summary = (coreset.get("diagnostics") or {}).get("fits_summary", {})
        core_cols = np.array([col[i] for i in core_items])

        est, lo, hi, flag, pred_used, calib, lat = [], [], [], [], [], [], []
        for t in test:
            body = {"model": models[t], "level": LEVEL,
                    "scores": [{"benchmark": BENCH, "item": it, "score": float(Y[t, col[it]])} for it in core_items]}
            t0 = time.perf_counter()
            r = http.post(f"/v1/coresets/{coreset_id}/predict", json=body)
            lat.append(time.perf_counter() - t0)
            assert r.status_code == 200, (models[t], r.status_code, r.text)
            out = r.json()
            b = out["benchmarks"][BENCH]
            est.append(b["estimate"]); lo.append(b["interval"][0]); hi.append(b["interval"][1])
            flag.append(bool(b["extrapolation"])); pred_used.append(b["predictor"]); calib.append(b["calibration"])
            if bool(out["extrapolation"]) != bool(b["extrapolation"]):
                notes.append(f"top-level extrapolation differs from the benchmark entry for {models[t]}")
            if abs(out["overall"]["estimate"] - b["estimate"]) > 1e-9:
                notes.append(f"overall estimate differs from the benchmark estimate for {models[t]}")

    est_a, lo_a, hi_a, flag_a = np.array(est), np.array(lo, dtype=float), np.array(hi, dtype=float), np.array(flag)
    truth = s[test]
    err = est_a - truth
    inside = (lo_a <= truth) & (truth <= hi_a)
    rmse, mae = float(np.sqrt(np.mean(err ** 2))), float(np.mean(np.abs(err)))
    tau = float(kendalltau(truth, est_a).statistic)
    width = hi_a - lo_a
    lat_ms = np.array(lat) * 1000
    pred_flagged = sorted({p for p, f in zip(pred_used, flag) if f})
    pred_unflagged = sorted({p for p, f in zip(pred_used, flag) if not f})
    calib_flagged = sorted({c for c, f in zip(calib, flag) if f})
    calib_unflagged = sorted({c for c, f in zip(calib, flag) if not f})

    # strongest held-out model
    top = int(np.argmax(truth))
    top_name, top_true = models[test[top]], float(truth[top])
    above_all = bool(top_true > s[ref].max())
    ref_core_means = Y[np.ix_(ref, core_cols)].mean(axis=1)
    top_core_mean = float(Y[test[top], core_cols].mean())

    core_mean_t = Y[np.ix_(test, core_cols)].mean(axis=1)
    n_below = int(np.sum(flag_a & (core_mean_t < ref_core_means.min())))
    n_above = int(np.sum(flag_a & (core_mean_t > ref_core_means.max())))
    n_above_all_refs = int(np.sum(truth > s[ref].max()))

    # offline replay: same references, same selector seed, the service's guard rule, target by target
    k = max(1, int(round(BUDGET * N)))
    idx, weights, selector = _select("mrmr", Y[ref], k, args.seed, {})
    same_items = sorted(map(int, idx)) == sorted(map(int, core_cols))
    same_order = [int(i) for i in idx] == [int(i) for i in core_cols]
    Xr, Xt = Y[np.ix_(ref, idx)], Y[np.ix_(test, idx)]
    ref_means = Xr.mean(axis=1)
    off_flag = (Xt.mean(axis=1) < ref_means.min()) | (Xt.mean(axis=1) > ref_means.max())
    off_guard, _, _ = _predict("guard", Y[ref], Xr, s[ref], Xt, truth, np.asarray(idx), weights, selector,
                               off_flag, LEVEL, args.seed, False)
    max_diff = float(np.max(np.abs(np.asarray(off_guard) - est_a)))
    flags_agree = bool(np.array_equal(off_flag, flag_a))

    # offline backtest of the same seed
    t0 = time.perf_counter()
    rows = run_backtest(Y, ["mrmr"], {"mrmr": ["kernel_ridge", "guard"]}, budgets=(BUDGET,), n_reference=N_REF,
                        split="stratified", seeds=[args.seed], interval_budgets=(BUDGET,))
    t_bt = time.perf_counter() - t0
    bt = {r["predictor"]: r for r in rows}

    def f(v: float, scale: float = 100, d: int = 2) -> str:
        return "n/a" if v is None or not math.isfinite(v) else f"{scale * v:.{d}f}"

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, PostgreSQL on 127.0.0.1"
    fl, nf = flag_a, ~flag_a
    lines = [
        START,
        "<!-- written by `OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m bench.coresets.e2e_score_coreset_http --write docs/RESULTS.md` -->",
        "### End to end over HTTP: mRMR++ coreset on MuSR, held-out models predicted through the API",
        "",
        f"`openllm_v2_musr` ({M} models x {N} items, binary, {n_missing} missing cells, so neither the service "
        f"nor the backtest imputes anything) uploaded as wide CSV to a real `evalplan serve` on a fresh "
        f"PostgreSQL database ({t_upload:.1f} s). {N_REF} reference models by the stratified rule "
        f"(`split_models(s, {N_REF}, \"stratified\", default_rng({args.seed}))`), the other {len(test)} are "
        f"targets. `POST /v1/coresets` mrmr, budget fraction {BUDGET} (k = {len(core_items)}), default predictor; "
        f"then one `POST /v1/coresets/{{id}}/predict` per target with its {len(core_items)} coreset scores. "
        f"Scores are x100 (points of accuracy). Machine: {machine}.",
        "",
        "| measure | service (HTTP) | offline backtest, same seed: kernel_ridge | offline: guard (service rule) |",
        "|---|---|---|---|",
        f"| targets | {len(test)} | {bt['kernel_ridge']['n_test']} | {bt['guard']['n_test']} |",
        f"| RMSE | {f(rmse)} | {f(bt['kernel_ridge']['rmse'])} | {f(bt['guard']['rmse'])} |",
        f"| MAE | {f(mae)} | {f(bt['kernel_ridge']['mae'])} | {f(bt['guard']['mae'])} |",
        f"| Kendall tau | {tau:.3f} | {bt['kernel_ridge']['kendall']:.3f} | {bt['guard']['kendall']:.3f} |",
        f"| coverage of the 90% interval | {pct(inside)} | {pct(np.array([bt['kernel_ridge']['coverage']]))} | "
        f"{pct(np.array([bt['guard']['coverage']]))} |",
        f"| mean interval width | {f(float(np.mean(width)))} | {f(bt['kernel_ridge']['interval_width'])} | "
        f"{f(bt['guard']['interval_width'])} |",
        f"| fraction flagged `extrapolation` | {pct(flag_a)} ({int(flag_a.sum())}) | "
        f"{pct(np.array([bt['kernel_ridge']['frac_flagged']]))} | {pct(np.array([bt['guard']['frac_flagged']]))} |",
        "",
        "| service, split by flag | targets | RMSE | coverage | mean width | predictor | calibration |",
        "|---|---|---|---|---|---|---|",
        f"| not flagged | {int(nf.sum())} | {f(float(np.sqrt(np.mean(err[nf] ** 2))) if nf.any() else math.nan)} | "
        f"{pct(inside[nf])} | {f(float(np.mean(width[nf])) if nf.any() else math.nan)} | "
        f"{', '.join(pred_unflagged) or '-'} | {', '.join(calib_unflagged) or '-'} |",
        f"| flagged `extrapolation` | {int(fl.sum())} | {f(float(np.sqrt(np.mean(err[fl] ** 2))) if fl.any() else math.nan)} | "
        f"{pct(inside[fl])} | {f(float(np.mean(width[fl])) if fl.any() else math.nan)} | "
        f"{', '.join(pred_flagged) or '-'} | {', '.join(calib_flagged) or '-'} |",
        "",
        f"- Strongest held-out model: `{top_name}`, true {100 * top_true:.2f} vs best reference "
        f"{100 * s[ref].max():.2f} ({'above' if above_all else 'not above'} every reference); its coreset mean "
        f"{100 * top_core_mean:.2f} vs the references' coreset means [{100 * ref_core_means.min():.2f}, "
        f"{100 * ref_core_means.max():.2f}]; flagged: **{bool(flag_a[top])}**, predictor `{pred_used[top]}`, "
        f"estimate {100 * est_a[top]:.2f}, interval [{100 * lo_a[top]:.2f}, {100 * hi_a[top]:.2f}].",
        f"- Held-out models whose true score is above every reference: {n_above_all_refs}"
        + (" (the stratified split draws from the top score bin too, so the 'strongest target above every "
           "reference' check is vacuous on this seed)" if n_above_all_refs == 0 else "")
        + f". Flagged targets: {n_below} below the references' coreset-mean range, {n_above} above; "
        f"mean signed error of the flagged estimates {f(float(np.mean(err[fl])) if fl.any() else math.nan)}.",
        f"- Same selection as offline: coreset items identical to `mrmr` on the same references and seed: "
        f"**{same_items}** (same rank order: {same_order}); flags identical target by target: **{flags_agree}**; "
        f"max |service - offline guard| over the targets: {100 * max_diff:.4f} points.",
        f"- Timing: coreset job {t_job:.1f} s wall from POST to job done"
        + (f" ({job_seconds:.1f} s inside the job)" if job_seconds is not None else "")
        + f"; predict latency p50 {statistics.median(lat_ms):.1f} ms, p95 {float(np.percentile(lat_ms, 95)):.1f} ms "
        f"over {len(lat_ms)} calls (one keep-alive client); offline backtest (both predictors, with the "
        f"cross-fitted intervals) {t_bt:.1f} s. Stored fit: {fits_summary.get(BENCH, fits_summary)}.",
        *(f"- Note: {n}" for n in dict.fromkeys(notes)),
        f"- Total wall time {time.perf_counter() - t_all:.0f} s.",
        "",
        "<!-- interpretation -->",
        "<!-- /interpretation -->",
        END,
    ]
    section = "\n".join(lines)
    print(section)
    if args.write:
        write_section(args.write, section, START, END)


if __name__ == "__main__":
    main()
