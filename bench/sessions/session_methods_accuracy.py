"""Fixed-budget accuracy of the session methods, side by side in one run (issue 11 "Evidence").

    nice -n 10 python -m bench.sessions.session_methods_accuracy [--datasets ...] [--targets 10] [--ref-cap 100]
                                                        [--workers 2] [--write docs/RESULTS.md]

Methods: ``refgp_ivr`` (the default), ``proeval_bq``, ``fluid_irt``, ``bayesame`` (papers/004) and
``rs_mean`` (3 seeds), all through ``evalplan.core.sequential.make_estimator`` with the session defaults,
never stopping early. Data (read in place from EVALPLAN_DATA_DIR, default ../shared/data):
openllm_v2_musr, openllm_v2_math_hard, helm_lite_{commonsense,gsm,math,med_qa,mmlu}, alpacaeval1.
Regimes as docs/RESULTS.md "Sequential accuracy" defines them (``bench.sessions.sequential_accuracy_bench.setup``):
interpolation = random targets, references = all other models; extrapolation = the best models are
the targets, the next 20% by rank are discarded, the rest are references. Reference pools above
``--ref-cap`` are subsampled (seeded). alpacaeval1's missing cells: a reference's are filled with its
mean, a target is evaluated over the items it has scores for.

Reported per (dataset, regime, method): MAE (points, x100) of the estimate at n = 25/50/100/200 over
the targets (10 per regime by default: 20 held-out targets per data set), and the coverage of the
95% interval at those n; then per data set the ratio of the
default's MAE to each peer's (< 1: the default is better).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

from bench.common.markdown_sections import write_section  # noqa: E402
from bench.sessions.sequential_accuracy_bench import load, setup  # noqa: E402
from evalplan.core.sequential import BucketPrior, SessionConfig, make_estimator  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- session-methods-accuracy -->", "<!-- /session-methods-accuracy -->"
DATASETS = ("openllm_v2_musr", "openllm_v2_math_hard", "helm_lite_commonsense", "helm_lite_gsm", "helm_lite_math",
            "helm_lite_med_qa", "helm_lite_mmlu", "alpacaeval1")
METHODS = ("refgp_ivr", "proeval_bq", "fluid_irt", "bayesame", "rs_mean")
SEEDS = {"rs_mean": (0, 1, 2)}
NS = (25, 50, 100, 200)
_PRIORS: dict[tuple, BucketPrior] = {}


def run_group(jobs: list[dict]) -> list[dict]:
    """The runs of one reference set in one worker: one prior, one feature / IRT fit."""
    return [run_one(job) for job in jobs]


def run_one(job: dict) -> dict:
    key = job["prior_key"]
    prior = _PRIORS.get(key)
    if prior is None:  # one prior (and its features / IRT fit) per reference set
        _PRIORS.clear()
        prior = _PRIORS[key] = BucketPrior.from_reference_scores(job["ref"])
    target = job["target"]
    N = prior.n_items
    n_max = min(max(NS), N)
    t0 = time.perf_counter()
    cfg = SessionConfig(method=job["method"], epsilon1=0.0, epsilon2=0.0, window=N + 1, seed=job["seed"],
                        max_items=n_max)
    e = make_estimator(prior, cfg)
    truth = float(np.mean(target))
    rows = {}
    while not e.stopped:
        for i in e.propose():
            e.observe(i, float(target[i]))
        if e.n_observed in NS:
            lo, hi = e.ci
            rows[e.n_observed] = (abs(e.estimate - truth), lo <= truth <= hi)
    return dict(key=job["key"], method=job["method"], rows=rows, seconds=time.perf_counter() - t0)


def build_jobs(name: str, X: np.ndarray, regime: str, args: argparse.Namespace) -> tuple[list[dict], dict]:
    targets, refs, gap = setup(X, regime, args.targets, args.ref_cap, seed=args.seed)
    R = X[refs]
    R = np.where(np.isnan(R), np.nanmean(R, axis=1, keepdims=True), R)
    jobs = []
    for t in targets:
        cols = ~np.isnan(X[t])
        ref_t = R[:, cols]
        pkey = (name, regime) if cols.all() else (name, regime, int(t))
        for method in METHODS:
            for s in SEEDS.get(method, (0,)):
                jobs.append(dict(key=(name, regime, int(t)), prior_key=pkey, ref=ref_t, target=X[t, cols],
                                 method=method, seed=s))
    info = dict(dataset=name, regime=regime, n_targets=len(targets), n_refs=len(refs), n_models=X.shape[0],
                N=X.shape[1], gap=gap)
    return jobs, info


def summarize(results: list[dict]) -> dict:
    out: dict = {}
    for r in results:
        d, reg, _t = r["key"]
        for n, (err, cov) in r["rows"].items():
            out.setdefault((d, reg, r["method"]), {}).setdefault(n, []).append((err, cov))
    return out


def fmt(summary: dict, infos: list[dict], seconds: dict, args: argparse.Namespace, wall: float) -> str:
    head = "| data set | regime | method | " + " | ".join(f"MAE@{n}" for n in NS) + " | " + \
           " | ".join(f"cov95@{n}" for n in NS) + " |"
    lines = [BEGIN, "## Session methods at a fixed budget (issue 11)", "",
             f"`nice -n 10 python -m bench.sessions.session_methods_accuracy --targets {args.targets} --ref-cap "
             f"{args.ref_cap} --datasets {' '.join(args.datasets)}` ({platform.python_version()}, "
             f"{args.workers} workers, {wall / 60:.1f} min). MAE in points (x100) over the targets; cov95 = share "
             "of targets whose 95% interval holds the truth. rs_mean: 3 seeds per target. Every method "
             "through `make_estimator` with the session defaults, never stopping early.", "",
             "| data set | regime | targets | references | items |", "|---|---|---|---|---|"]
    for i in infos:
        lines.append(f"| {i['dataset']} | {i['regime']} | {i['n_targets']} | {i['n_refs']} of {i['n_models'] - 1}"
                     f" | {i['N']} |")
    lines += ["", head, "|" + "---|" * (3 + 2 * len(NS))]
    for i in infos:
        for m in METHODS:
            cells = summary.get((i["dataset"], i["regime"], m), {})
            mae = [f"{100 * np.mean([e for e, _ in cells[n]]):.2f}" if n in cells else "-" for n in NS]
            cov = [f"{100 * np.mean([c for _, c in cells[n]]):.0f}%" if n in cells else "-" for n in NS]
            name = f"**{m}**" if m == METHODS[0] else m
            lines.append(f"| {i['dataset']} | {i['regime']} | {name} | " + " | ".join(mae + cov) + " |")
    lines += ["", "Ratio of the default's MAE to each peer's (< 1: the default is better), over both regimes:", "",
              "| data set | vs | " + " | ".join(f"n={n}" for n in NS) + " |", "|" + "---|" * (2 + len(NS))]
    wins = total = 0
    for d in args.datasets:
        for peer in ("proeval_bq", "fluid_irt", "bayesame", "rs_mean"):
            cells = []
            for n in NS:
                ours = [e for reg in ("interpolation", "extrapolation")
                        for e, _ in summary.get((d, reg, METHODS[0]), {}).get(n, [])]
                theirs = [e for reg in ("interpolation", "extrapolation")
                          for e, _ in summary.get((d, reg, peer), {}).get(n, [])]
                if ours and theirs:
                    ratio = np.mean(ours) / max(np.mean(theirs), 1e-12)
                    cells.append(f"{ratio:.2f}")
                    if peer in ("proeval_bq", "fluid_irt"):
                        wins += ratio < 1
                        total += 1
                else:
                    cells.append("-")
            lines.append(f"| {d} | {peer} | " + " | ".join(cells) + " |")
    lines += ["", f"The default beats both proeval_bq and fluid_irt in {wins} of {total} (data set, n) cells.", "",
              "Seconds per 200-item run (mean over runs): " + ", ".join(
                  f"{m} {np.mean(seconds[m]):.2f}" for m in METHODS if seconds.get(m)), "",
              "<!-- interpretation -->", "<!-- /interpretation -->", END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="*", default=list(DATASETS))
    ap.add_argument("--targets", type=int, default=10, help="per regime (x2 regimes per data set)")
    ap.add_argument("--ref-cap", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    jobs, infos = [], []
    for name in args.datasets:
        _names, X = load(name)
        for regime in ("interpolation", "extrapolation"):
            j, info = build_jobs(name, X, regime, args)
            jobs += j
            infos.append(info)
    print(f"{len(jobs)} runs", file=sys.stderr)
    groups: dict = {}
    for job in jobs:
        groups.setdefault(job["key"][:2], []).append(job)
    results = []
    with ProcessPoolExecutor(args.workers) as pool:
        for k, rs in enumerate(pool.map(run_group, list(groups.values()))):
            results += rs
            print(f"{k + 1}/{len(groups)} groups {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    seconds: dict = {}
    for r in results:
        seconds.setdefault(r["method"], []).append(r["seconds"])
    text = fmt(summarize(results), infos, seconds, args, time.perf_counter() - t0)
    print(text)
    if args.write:
        write_section(args.write, text, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
