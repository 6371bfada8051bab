"""Accuracy of sequential evaluation (src/evalplan/core/sequential) on real leaderboards, as in papers/004 §5.1.

    python -m bench.sessions.sequential_accuracy_bench [--write docs/RESULTS.md] [--targets 10] [--seeds 2]
                                              [--n-max 300] [--ref-cap 100] [--workers 2]

For each benchmark (openllm_v2_musr, alpacaeval1, helm_lite_gsm; read in place from EVALPLAN_DATA_DIR,
default ../shared/data) and each regime (004 §5.1 "Interpolation and Extrapolation Reference Setup"):

* interpolation: 10 targets drawn uniformly at random (seeded); references = all other models;
* extrapolation: the 10 best models (full-benchmark mean) are the targets, the next 20% of the models
  (round(0.2 * #models), by rank) are discarded as the performance gap, the remaining lower-performing
  models are the references.

If a reference pool is larger than --ref-cap it is subsampled uniformly at random (seeded) once per regime.

Each (target, method, seed) is run once WITHOUT stopping (epsilon1 = epsilon2 = 0) and the trajectory
(estimate, variance after every observation) is recorded. From it we compute

* RMSE(n) over targets (and seeds) for n = 1..n_max, shown at n = 10, 25, 50, 100, 200, 300;
* the evaluation-weighted integrated RMSE (004 §5.1 metric 3): 100 * integral_0^n_max n' RMSE(n') dn',
  evaluated as the exact Riemann sum over n' = 1..n_max (dn' = 1); and the same divided by
  integral_0^n_max n' dn' (= the n-weighted mean RMSE x 100), which is scale-free;
* the default stopping rule (epsilon1 = 0.005, W = 30, epsilon2 in {0.01, 0.02, 0.03}) replayed on the
  trajectory exactly as ``SequentialEstimator._check_stop`` does (selection never depends on the rule,
  so this equals a live run with that config; the script checks this on one live run per benchmark).
  Runs continue past n_max until every replayed rule has fired (or all items are used).

alpacaeval1 has missing cells: a reference's missing cells are filled with that reference's mean; a
target is evaluated only over the items it has scores for (prior, truth and sampling restricted to them).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # one BLAS thread per worker process

import numpy as np  # noqa: E402

from bench.common.shared_data import data_dir  # noqa: E402
from evalplan.core.sequential import Z975, BucketPrior, SequentialEstimator, SessionConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- sequential-accuracy -->", "<!-- /sequential-accuracy -->"
DATASETS = ("openllm_v2_musr", "alpacaeval1", "helm_lite_gsm")
METHODS = ("bayesame", "bayesame_rs", "rs_mean")
LABEL = {"bayesame": "BayesAME", "bayesame_rs": "BayesAME-RS", "rs_mean": "RS-Mean"}
EPS2 = (0.01, 0.02, 0.03)
EPS1, WINDOW = 0.005, 30
CURVE_N = (10, 25, 50, 100, 200, 300)


def load(name: str) -> tuple[list[str], np.ndarray]:
    with open(data_dir() / name / "scores.csv", newline="") as f:
        reader = csv.reader(f)
        next(reader)
        rows = list(reader)
    names = [r[0] for r in rows]
    X = np.array([[float(v) if v != "" else np.nan for v in r[1:]] for r in rows], dtype=np.float64)
    return names, X


def setup(X: np.ndarray, regime: str, n_targets: int, ref_cap: int, seed: int):
    """(targets, references, n_gap) model indices for a regime (004 §5.1)."""
    rng = np.random.default_rng(seed)
    M = X.shape[0]
    means = np.nanmean(X, axis=1)
    gap = 0
    if regime == "interpolation":
        targets = np.sort(rng.choice(M, size=n_targets, replace=False))
        pool = np.setdiff1d(np.arange(M), targets)
    else:
        order = np.argsort(-means, kind="stable")
        gap = int(round(0.2 * M))
        targets = order[:n_targets]
        pool = np.sort(order[n_targets + gap:])
    if len(pool) > ref_cap:
        pool = np.sort(rng.choice(pool, size=ref_cap, replace=False))
    return targets, pool, gap


def replay_stop(est: np.ndarray, var: np.ndarray, eps2: float, N: int) -> int:
    """n at which SessionConfig(epsilon1=EPS1, epsilon2=eps2, window=WINDOW) stops (batch 1); est[n-1] = after n obs."""
    n_have = len(est)
    for n in range(WINDOW, n_have + 1):
        last = est[n - WINDOW:n]
        if last.max() - last.min() <= EPS1 and 2.0 * Z975 * math.sqrt(max(var[n - 1], 0.0)) <= eps2:
            return n
    return N if n_have >= N else -1  # -1: not fired yet


def run_one(job: dict) -> dict:
    """One trajectory: run without stopping until n >= n_max and every replayed rule has fired."""
    ref, target, method, seed, n_max = job["ref"], job["target"], job["method"], job["seed"], job["n_max"]
    prior = job.get("prior") or BucketPrior.from_reference_scores(ref)
    N = prior.n_items
    # never stop early: a window longer than the benchmark (eps = 0 alone still "converges" when the
    # variance is 0 and the estimate is constant, e.g. RS-Mean after 30 identical scores)
    cfg = SessionConfig(method=method, epsilon1=0.0, epsilon2=0.0, window=N + 1, seed=seed, max_items=N)
    e = SequentialEstimator(prior, cfg)
    est, var, lo, hi = [], [], [], []
    stops = {x: -1 for x in EPS2}
    t0 = time.perf_counter()
    while not e.stopped:
        for i in e.propose():
            e.observe(i, float(target[i]))
        est.append(e.estimate)
        var.append(e.variance)
        lo.append(e.ci[0])
        hi.append(e.ci[1])
        n = len(est)
        for x in EPS2:  # online replay of the rule (cheap: only needs the last W estimates)
            if stops[x] < 0 and n >= WINDOW:
                last = est[n - WINDOW:]
                if max(last) - min(last) <= EPS1 and 2.0 * Z975 * math.sqrt(max(var[-1], 0.0)) <= x:
                    stops[x] = n
        if n >= min(n_max, N) and all(v > 0 for v in stops.values()):
            break
    for x in EPS2:
        if stops[x] < 0:
            stops[x] = N  # exhausted all items
    return dict(key=job["key"], method=method, seed=seed, truth=float(np.mean(target)), N=N,
                B=prior.n_buckets, selection=e.selection, est=np.array(est), var=np.array(var),
                lo=np.array(lo), hi=np.array(hi), stops=stops, seconds=time.perf_counter() - t0)


def live_check(ref, target, eps2=0.02) -> tuple[int, float, int, float]:
    """A live BayesAME run with the default stopping rule vs the replay on an unstopped trajectory."""
    prior = BucketPrior.from_reference_scores(ref)
    e = SequentialEstimator(prior, SessionConfig(method="bayesame", epsilon1=EPS1, epsilon2=eps2, window=WINDOW))
    while not e.stopped:
        for i in e.propose():
            e.observe(i, float(target[i]))
    r = run_one(dict(key=None, ref=ref, target=target, method="bayesame", seed=0, n_max=1, prior=prior))
    n = r["stops"][eps2]
    return e.n_observed, e.estimate, n, float(r["est"][n - 1])


def build_jobs(name, X, regime, args):
    targets, refs, gap = setup(X, regime, args.targets, args.ref_cap, seed=args.seed)
    jobs = []
    R = X[refs]
    R = np.where(np.isnan(R), np.nanmean(R, axis=1, keepdims=True), R)  # fill a reference's missing cells with its mean
    shared_prior = None
    for t in targets:
        cols = ~np.isnan(X[t])
        ref_t = R[:, cols] if not cols.all() else R
        if cols.all():
            if shared_prior is None:
                shared_prior = BucketPrior.from_reference_scores(R)
            prior = shared_prior
        else:
            prior = None  # built in the worker on the target's observed columns
        for method in METHODS:
            seeds = {"bayesame": [0], "bayesame_rs": list(range(args.seeds)),
                     "rs_mean": list(range(args.rs_mean_seeds))}[method]
            for s in seeds:
                jobs.append(dict(key=(name, regime, int(t)), ref=ref_t, target=X[t, cols], method=method,
                                 seed=s, n_max=args.n_max, prior=prior))
    info = dict(dataset=name, regime=regime, n_targets=len(targets), n_refs=len(refs), n_models=X.shape[0],
                gap=gap, N=X.shape[1], target_range=(float(np.nanmean(X[targets], 1).min()), float(np.nanmean(X[targets], 1).max())),
                ref_range=(float(np.nanmean(X[refs], 1).min()), float(np.nanmean(X[refs], 1).max())))
    return jobs, info


def summarize(results: list[dict], n_max: int) -> dict:
    out = {}
    for method in METHODS:
        rs = [r for r in results if r["method"] == method]
        if not rs:
            continue
        nm = min(n_max, min(r["N"] for r in rs))
        err = np.array([r["est"][:nm] - r["truth"] for r in rs])  # (runs, nm)
        rmse = np.sqrt(np.mean(err ** 2, axis=0))  # RMSE(n), n = 1..nm
        n = np.arange(1, nm + 1)
        irmse = 100.0 * float(np.sum(n * rmse))
        stop = {}
        for x in EPS2:
            ns = np.array([r["stops"][x] for r in rs])
            cover = np.array([r["lo"][k - 1] <= r["truth"] <= r["hi"][k - 1] for r, k in zip(rs, ns)])
            e_stop = np.array([r["est"][k - 1] - r["truth"] for r, k in zip(rs, ns)])
            stop[x] = dict(n=float(ns.mean()), coverage=float(cover.mean()), rmse=float(np.sqrt(np.mean(e_stop ** 2))),
                           n_runs=len(rs))
        out[method] = dict(rmse=rmse, irmse=irmse, irmse_norm=irmse / float(n.sum()), nm=nm, stop=stop,
                           runs=len(rs), selection=rs[0]["selection"], B=rs[0]["B"])
    return out


def fmt_tables(summaries, infos, n_max) -> str:
    lines = ["#### RMSE (x100) vs number of evaluated items n, and evaluation-weighted integrated RMSE", "",
             "| benchmark | regime | method | " + " | ".join(f"n={n}" for n in CURVE_N if n <= n_max)
             + f" | IRMSE 100·Σ n·RMSE(n), n≤{n_max} | normalized (÷Σn) | vs RS-Mean |",
             "|---|---|---|" + "---|" * (len([n for n in CURVE_N if n <= n_max]) + 3)]
    for key, s in summaries.items():
        base = s["rs_mean"]["irmse"]
        for m in METHODS:
            r = s[m]
            cells = [f"{100 * r['rmse'][n - 1]:.2f}" if n <= r["nm"] else "-" for n in CURVE_N if n <= n_max]
            lines.append(f"| {key[0]} | {key[1]} | {LABEL[m]} | " + " | ".join(cells)
                         + f" | {r['irmse']:,.0f} | {r['irmse_norm']:.2f} | {r['irmse'] / base:.3f} |")
    lines += ["", "#### Default stopping rule (epsilon1 = 0.005, W = 30): realized coverage of the 95% CI and mean items", "",
              "| benchmark | regime | method | " + " | ".join(f"eps2={x}: coverage / mean n / RMSE x100" for x in EPS2) + " |",
              "|---|---|---|" + "---|" * len(EPS2)]
    for key, s in summaries.items():
        for m in METHODS:
            st = s[m]["stop"]
            lines.append(f"| {key[0]} | {key[1]} | {LABEL[m]} | " + " | ".join(
                f"{100 * st[x]['coverage']:.0f}% / {st[x]['n']:.0f} / {100 * st[x]['rmse']:.2f}" for x in EPS2) + " |")
    lines += ["", "#### Setups", "",
              "| benchmark | regime | models | items N | references K_r | gap (discarded) | buckets B / selection (BayesAME) | target means | reference means | runs (BayesAME / -RS / RS-Mean) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for key, s in summaries.items():
        i = infos[key]
        lines.append(f"| {key[0]} | {key[1]} | {i['n_models']} | {i['N']} | {i['n_refs']} | {i['gap']} | "
                     f"{s['bayesame']['B']} / {s['bayesame']['selection']} | {i['target_range'][0]:.3f}–{i['target_range'][1]:.3f} | "
                     f"{i['ref_range'][0]:.3f}–{i['ref_range'][1]:.3f} | "
                     f"{s['bayesame']['runs']} / {s['bayesame_rs']['runs']} / {s['rs_mean']['runs']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="*", default=list(DATASETS))
    ap.add_argument("--targets", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=2, help="seeds for BayesAME-RS")
    ap.add_argument("--rs-mean-seeds", type=int, default=5, help="seeds for RS-Mean (cheap)")
    ap.add_argument("--n-max", type=int, default=300)
    ap.add_argument("--ref-cap", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-live-check", action="store_true")
    ap.add_argument("--save", type=Path, help="pickle the raw trajectories here")
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    all_jobs, infos, data = [], {}, {}
    for name in args.datasets:
        _, X = load(name)
        data[name] = X
        for regime in ("interpolation", "extrapolation"):
            jobs, info = build_jobs(name, X, regime, args)
            all_jobs += jobs
            infos[(name, regime)] = info
    # longest jobs first (BayesAME on the largest N) for load balance
    all_jobs.sort(key=lambda j: (j["method"] == "rs_mean", -len(j["target"])))
    results = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for r in pool.map(run_one, all_jobs, chunksize=1):
            results.append(r)
    t_runs = time.perf_counter() - t_start
    if args.save:
        import pickle
        args.save.write_bytes(pickle.dumps(dict(results=results, infos=infos)))
    summaries = {}
    for key in infos:
        summaries[key] = summarize([r for r in results if r["key"][:2] == key], args.n_max)
    checks = []
    if not args.no_live_check:
        for name in args.datasets:
            X = data[name]
            targets, refs, _ = setup(X, "interpolation", args.targets, args.ref_cap, seed=args.seed)
            t = targets[0]
            cols = ~np.isnan(X[t])
            R = X[refs]
            R = np.where(np.isnan(R), np.nanmean(R, axis=1, keepdims=True), R)[:, cols]
            checks.append((name, *live_check(R, X[t, cols])))
    runtime = time.perf_counter() - t_start
    bayes_secs = [r["seconds"] for r in results if r["method"] != "rs_mean"]
    tables = fmt_tables(summaries, infos, args.n_max)
    cmd = "python -m bench.sessions.sequential_accuracy_bench" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    cmd_env = f"EVALPLAN_DATA_DIR={data_dir()}"
    check_txt = "; ".join(f"{c[0]}: live n={c[1]} est={c[2]:.4f} vs replay n={c[3]} est={c[4]:.4f}" for c in checks)
    md = "\n".join([
        BEGIN,
        "<!-- written by `python -m bench.sessions.sequential_accuracy_bench --write docs/RESULTS.md` -->",
        "### Sequential evaluation accuracy: BayesAME vs BayesAME-RS vs RS-Mean (papers/004 §5.1)",
        "",
        f"Command: `{cmd}` (data: {cmd_env}). Machine: {platform.machine()}, {os.cpu_count()} CPU cores (shared), Python "
        f"{platform.python_version()}, numpy {np.__version__}; {args.workers} worker processes. Total run time "
        f"{runtime / 60:.1f} min ({len(results)} trajectories; median BayesAME/-RS trajectory {np.median(bayes_secs):.1f} s).",
        "",
        f"Protocol: {args.targets} targets per regime (seed {args.seed}); interpolation = random targets, references = "
        f"the other models; extrapolation = the {args.targets} best models by full-benchmark mean, the next "
        "round(20% x #models) models by rank discarded (the paper's gap), the rest are references. Reference pools "
        f"above {args.ref_cap} models are subsampled uniformly at random (openllm_v2_musr only: 419 / 333 -> {args.ref_cap}, for time). "
        f"BayesAME: 1 seed per target (information-gain selection; the seed only breaks ties inside a bucket); "
        f"BayesAME-RS: {args.seeds} seeds per target, RS-Mean: {args.rs_mean_seeds} seeds per target. All `SessionConfig` defaults (refit every 50, "
        "sigma2 by regime) except the stopping epsilons. RMSE(n) is over targets x seeds. alpacaeval1: missing reference "
        "cells filled with the reference's mean; each target evaluated over the items it has scores for "
        "(truth = its mean there). Stopping rows replay the rule on the unstopped trajectory "
        f"(check against live runs with eps2 = 0.02: {check_txt}).",
        "",
        "IRMSE is 004's metric 3, 100 ∫ n' RMSE(n') dn', taken over n' ≤ "
        f"{args.n_max} (not up to N) as the Riemann sum with dn' = 1; its magnitude depends on the range, so the "
        "normalized column (÷ Σ n' = n-weighted mean RMSE x 100) and the ratio to RS-Mean are the comparable numbers. "
        "The absolute values are not on the scale of 004 Table 2 (whose normalization is not recoverable from the text).",
        "",
        tables,
        "",
        "<!-- interpretation -->",
        END,
    ])
    print(md)
    if args.write:
        text = args.write.read_text() if args.write.exists() else "# Results\n"
        if BEGIN in text and END in text:
            pre, rest = text.split(BEGIN, 1)
            old = rest.split(END, 1)[0]
            post = rest.split(END, 1)[1]
            # keep a hand-written interpretation if one was added after the marker line
            if "<!-- interpretation -->" in old:
                interp = old.split("<!-- interpretation -->", 1)[1]
                md = md.replace("<!-- interpretation -->\n", "<!-- interpretation -->" + interp, 1) if interp.strip() else md
            text = pre + md + post
        else:
            text = text.rstrip("\n") + "\n\n" + md + "\n"
        args.write.write_text(text)
    print(f"runs {t_runs:.0f} s, total {runtime:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
