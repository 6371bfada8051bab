"""Multi-benchmark score-based coreset accuracy on the five HELM Lite sets as one suite (paper 002 §3.1).

``python -m bench.coresets.multi_benchmark_accuracy [--seeds 5] [--write docs/RESULTS.md]``

Data (read in place from EVALPLAN_DATA_DIR, default ../shared/data relative to the repo root):
``helm_lite_gsm`` (1000 items), ``helm_lite_math`` (437), ``helm_lite_mmlu`` (567),
``helm_lite_med_qa`` (1000) and ``helm_lite_commonsense`` (500): 3504 items, the same 83 models,
0/1 scores. Rows are aligned by model name.

Protocol: :func:`evalplan.core.backtest.suite_backtest.run_suite_backtest` (its module docstring), i.e. what
the service does for one multi-benchmark score-based coreset, and what ``POST /v1/backtests``
with ``suite: true`` runs: references drawn once on the overall score (stratified, M = 30, the
other 53 models are test models) and shared by the five benchmarks; a TOTAL budget (5% / 10% of
the 3504 items) split in proportion to size, at least one each; per benchmark the selector on the
references and the named predictor, with a 90% interval on cross-fitted errors (selector and
predictor refitted on ten folds); overall = mean of the five estimates, its interval on the pooled
per-reference errors. Each HELM Lite set is registered as its own capability here, so
per-capability = per-benchmark. The predictor is the one named (as a request with an explicit
``predictor``), so the service's AIPW switch for extrapolated targets does not apply; gp-IRT has
no interval. Compute knob: ``--ap-n-init`` (AnchorPoints k-medoids restarts; the service default
5). BLAS / OpenMP are limited to ``--threads`` (default 1): on 2 shared cores the multi-threaded
BLAS made mRMR ~7x slower on these 30-row matrices.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import markdown_sections
from bench.common.shared_data import data_dir
from evalplan.benchmarks.score_formats import parse_wide_csv
from evalplan.core.backtest.backtest import impute_item_mean
from evalplan.core.backtest.suite_backtest import OVERALL, run_suite_backtest, split_total_budget
from evalplan.core.benchmarks.score_scale import ScoreScale

ROOT = Path(__file__).resolve().parents[2]
START = "<!-- multi-benchmark -->"
END = "<!-- /multi-benchmark -->"
INTERP = ("<!-- interpretation -->", "<!-- /interpretation -->")
DATASETS = ("helm_lite_gsm", "helm_lite_math", "helm_lite_mmlu", "helm_lite_med_qa", "helm_lite_commonsense")
SHORT = {d: d.removeprefix("helm_lite_") for d in DATASETS}
BUDGETS = (0.05, 0.1)
N_REFERENCE = 30
LEVEL = 0.9
#: (label, selector, predictor)
METHODS: tuple[tuple[str, str, str], ...] = (
    ("Random", "random", "mean"), ("Random+", "random", "ridge"), ("Random++", "random", "kernel_ridge"),
    ("AnchorPoints", "anchor_points", "weighted_mean"), ("AnchorPoints++", "anchor_points", "kernel_ridge"),
    ("gp-IRT", "irt", "gp_irt"), ("mRMR+", "mrmr", "ridge"), ("mRMR++", "mrmr", "kernel_ridge"),
)


def load_suite(names: Sequence[str] = DATASETS) -> tuple[list[str], list[np.ndarray]]:
    """(model names shared by every set, sorted; one models x items matrix per set, rows aligned)."""
    ups = [parse_wide_csv((data_dir() / n / "scores.csv").read_bytes(),
                          ScoreScale(kind="continuous", minimum=None, maximum=None)) for n in names]
    models = sorted(set.intersection(*(set(u.model_names) for u in ups)))
    mats = []
    for u in ups:
        row = {m: i for i, m in enumerate(u.model_names)}
        mats.append(impute_item_mean(u.values[[row[m] for m in models]]))
    return models, mats


# ----------------------------------------------------------------------------- one trial
def run_trial(mats: Sequence[np.ndarray], seed: int, fraction: float,
              methods: Sequence[tuple[str, str, str]] = METHODS, n_reference: int = N_REFERENCE,
              level: float = LEVEL, method_params: Mapping[str, Mapping[str, Any]] | None = None
              ) -> list[dict[str, Any]]:
    """One row per method for one seed and one total budget: :func:`run_suite_backtest` (the
    protocol of the module docstring), its per-benchmark rows folded into the overall row."""
    plan: dict[str, list[str]] = {}
    for _label, method, pred in methods:
        plan.setdefault(method, []).append(pred)
    names = [str(b) for b in range(len(mats))]
    rows = run_suite_backtest(mats, names, plan, budgets=[fraction], n_reference=n_reference,
                              split="stratified", seeds=[seed], level=level, method_params=method_params)
    out = []
    for label, method, pred in methods:
        by = {r["scope"]: r for r in rows if r["method"] == method and r["predictor"] == pred}
        o = by[OVERALL]
        bench_cov = [by[n]["coverage"] for n in names if math.isfinite(by[n]["coverage"])]
        row: dict[str, Any] = {
            "label": label, "method": method, "predictor": pred, "budget": float(fraction), "k": o["k"],
            "counts": [by[n]["k"] for n in names], "seed": seed, "n_reference": o["n_reference"],
            "n_test": o["n_test"], **{m: o[m] for m in ("rmse", "mae", "spearman", "kendall")},
            "coverage": o["coverage"], "width": o["interval_width"],
            "coverage_bench": float(np.mean(bench_cov)) if bench_cov else math.nan, "seconds": o["seconds"],
        }
        for b, n in enumerate(names):
            row[f"rmse_{b}"] = by[n]["rmse"]
            row[f"kendall_{b}"] = by[n]["kendall"]
        out.append(row)
    return out


def summarize(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> dict[tuple[str, float], dict[str, float]]:
    """(label, budget) -> key -> mean, key_se -> standard error over seeds (NaN-free values)."""
    groups: dict[tuple[str, float], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["label"], r["budget"]), []).append(r)
    out = {}
    for g, rs in groups.items():
        d: dict[str, float] = {"n_seeds": len(rs)}
        for key in keys:
            v = np.array([r[key] for r in rs], dtype=float)
            v = v[np.isfinite(v)]
            d[key] = float(v.mean()) if v.size else math.nan
            d[key + "_se"] = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else math.nan
        out[g] = d
    return out


# ----------------------------------------------------------------------------- reporting
def fmt(v: float, se: float = math.nan, scale: float = 1.0, digits: int = 3) -> str:
    if not math.isfinite(v):
        return "n/a"
    s = f"{v * scale:.{digits}f}"
    return s + (f" ± {se * scale:.{digits}f}" if math.isfinite(se) else "")


def overall_table(summ: Mapping[tuple[str, float], Mapping[str, float]], labels: Sequence[str]) -> str:
    bl = [f"{int(round(b * 100))}%" for b in BUDGETS]
    head = ("| method | " + " | ".join(f"RMSE {b}" for b in bl) + " | " + " | ".join(f"MAE {b}" for b in bl)
            + " | " + " | ".join(f"Kendall {b}" for b in bl) + " | " + " | ".join(f"cov90 {b}" for b in bl)
            + " | width 10% | bench cov90 10% | sec 10% |")
    lines = [head, "|" + "---|" * (1 + 4 * len(BUDGETS) + 3)]
    for lab in labels:
        cells = [fmt(summ[(lab, b)]["rmse"], summ[(lab, b)]["rmse_se"], 100, 2) for b in BUDGETS]
        cells += [fmt(summ[(lab, b)]["mae"], summ[(lab, b)]["mae_se"], 100, 2) for b in BUDGETS]
        cells += [fmt(summ[(lab, b)]["kendall"], summ[(lab, b)]["kendall_se"]) for b in BUDGETS]
        cells += [fmt(summ[(lab, b)]["coverage"], digits=2) for b in BUDGETS]
        d = summ[(lab, 0.1)]
        cells += [fmt(d["width"], scale=100, digits=1), fmt(d["coverage_bench"], digits=2),
                  fmt(d["seconds"], digits=1)]
        lines.append(f"| {lab} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def per_benchmark_table(summ: Mapping[tuple[str, float], Mapping[str, float]], labels: Sequence[str],
                        budget: float) -> str:
    names = [SHORT[d] for d in DATASETS]
    head = ("| method | " + " | ".join(f"RMSE {n}" for n in names) + " | "
            + " | ".join(f"τ {n}" for n in names) + " |")
    lines = [head, "|" + "---|" * (1 + 2 * len(names))]
    for lab in labels:
        d = summ[(lab, budget)]
        cells = [fmt(d[f"rmse_{b}"], d[f"rmse_{b}_se"], 100, 2) for b in range(len(names))]
        cells += [fmt(d[f"kendall_{b}"], d[f"kendall_{b}_se"], 1, 2) for b in range(len(names))]
        lines.append(f"| {lab} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def claim_lines(summ: Mapping[tuple[str, float], Mapping[str, float]], labels: Sequence[str]) -> list[str]:
    out = []
    for b in BUDGETS:
        best_rmse = min(labels, key=lambda lab: summ[(lab, b)]["rmse"])
        best_tau = max(labels, key=lambda lab: summ[(lab, b)]["kendall"])
        r, m = summ[("Random", b)], summ[("mRMR++", b)]
        red = 1 - m["rmse"] / r["rmse"]
        out.append(f"- {int(round(b * 100))}%: lowest overall RMSE {best_rmse} "
                   f"({summ[(best_rmse, b)]['rmse'] * 100:.2f}), highest Kendall {best_tau} "
                   f"({summ[(best_tau, b)]['kendall']:.3f}); mRMR++ RMSE {abs(red):.0%} "
                   f"{'below' if red >= 0 else 'above'} Random "
                   f"({m['rmse'] * 100:.2f} vs {r['rmse'] * 100:.2f}), Kendall {m['kendall']:.3f} vs "
                   f"{r['kendall']:.3f}")
    return out


def write_section(path: Path, section: str) -> None:
    """This script's section (between START and END) of ``path``; see :mod:`bench.common.markdown_sections`."""
    markdown_sections.write_section(path, section, START, END)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--ap-n-init", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="BLAS / OpenMP threads (threadpoolctl)")
    ap.add_argument("--no-irt", action="store_true", help="omit gp-IRT")
    ap.add_argument("--write", type=Path, default=None)
    args = ap.parse_args()
    from threadpoolctl import threadpool_limits

    threadpool_limits(args.threads)
    t_all = time.perf_counter()
    models, mats = load_suite()
    sizes = [Y.shape[1] for Y in mats]
    methods = [m for m in METHODS if not (args.no_irt and m[2] == "gp_irt")]
    params = {"anchor_points": {"n_init": args.ap_n_init}}
    rows = []
    for seed in range(args.seeds):
        for b in BUDGETS:
            rows += run_trial(mats, seed, b, methods, method_params=params)
        print(f"seed {seed} done ({time.perf_counter() - t_all:.0f} s)", flush=True)
    keys = ["rmse", "mae", "spearman", "kendall", "coverage", "width", "coverage_bench", "seconds"]
    keys += [f"{m}_{b}" for b in range(len(mats)) for m in ("rmse", "kendall")]
    summ = summarize(rows, keys)
    labels = [m[0] for m in methods]
    counts = {b: split_total_budget(sizes, b) for b in BUDGETS}
    n_test = rows[0]["n_test"]
    wall = time.perf_counter() - t_all
    split_txt = "; ".join(f"{int(round(b * 100))}% = {sum(c)} items = "
                          + " + ".join(f"{SHORT[d]} {k}" for d, k in zip(DATASETS, c)) for b, c in counts.items())
    cut = (f"Compute cuts: AnchorPoints k-medoids n_init = {args.ap_n_init} (service default 5)"
           if args.ap_n_init != 5 else f"No compute cut: all {len(methods)} methods, AnchorPoints k-medoids "
           "n_init = 5 (the service default)") + ("; gp-IRT omitted (--no-irt)." if args.no_irt else ".")
    parts = [START, "<!-- written by `python -m bench.coresets.multi_benchmark_accuracy --write docs/RESULTS.md` -->",
             "## Multi-benchmark score-based coresets on HELM Lite (paper 002 §3.1): backtest",
             "",
             f"Suite: the five HELM Lite sets as ONE multi-benchmark coreset ({len(models)} shared models, "
             f"{sum(sizes)} items: " + ", ".join(f"`{d}` {n}" for d, n in zip(DATASETS, sizes)) + "; 0/1). "
             f"Protocol (`evalplan.core.backtest.suite_backtest.run_suite_backtest`, as the service does and as `POST /v1/backtests` "
             f"with `suite: true` runs): M = "
             f"{N_REFERENCE} stratified references (10 bins over the overall score; the same references for every "
             f"benchmark), {n_test} test models, {args.seeds} seeds (each seed = its own reference draw and "
             f"selector seed). A TOTAL budget split in proportion to size (≥ 1 each): "
             f"{split_txt}. Per benchmark the selector is fitted on the references and the named predictor on "
             "the references' coreset scores -> that benchmark's full mean (estimate clipped to [0, 1]; no AIPW "
             "switch, the predictor being explicit); overall = mean of the 5 per-benchmark estimates vs the mean "
             "of the 5 full means. Each HELM Lite set is its own capability here, so per-capability = "
             "per-benchmark (the table below). RMSE / MAE in accuracy points (x100), mean ± s.e. over seeds; "
             "Kendall = tau-b over the test models. cov90 = fraction of test models whose true overall score "
             "lies in the service's combined overall 90% interval (split conformal on the references' pooled "
             "per-benchmark cross-fitted errors, clipped to [0, 1]; n/a for gp-IRT); "
             "width = its mean width (x100); bench cov90 = mean over benchmarks of the per-benchmark 90% "
             "coverage (cross-fitted calibration as in the service); sec = selection + fit/predict + interval "
             "calibration per trial, all 5 benchmarks, 1 BLAS thread on 2 shared cores. "
             + cut,
             "",
             "The same from the service in one call, after uploading the five matrices: `POST /v1/backtests` with `"
             + json.dumps({"benchmarks": list(DATASETS), "methods": list(dict.fromkeys(m[1] for m in methods)),
                           "predictors": {k: [m[2] for m in methods if m[1] == k] for k in dict.fromkeys(m[1] for m in methods)},
                           "budgets": list(BUDGETS), "n_reference": N_REFERENCE, "split": "stratified",
                           "seeds": args.seeds, "params": params, "suite": True}) + "`.",
             "",
             f"### Overall (mean of the 5 benchmarks; {len(models)} models, {n_test} test)", "",
             overall_table(summ, labels), ""]
    for b in BUDGETS:
        parts += [f"### Per benchmark (= per capability), {int(round(b * 100))}% total budget "
                  "(RMSE x100, Kendall τ)", "", per_benchmark_table(summ, labels, b), ""]
    parts += ["### Paper claim check (002 §3.1: on binary sets mRMR++ has the lowest errors and highest rank "
              "correlations)", ""] + claim_lines(summ, labels)
    parts += ["", f"Total wall time {wall:.0f} s.", "", INTERP[0], INTERP[1], END]
    section = "\n".join(p for p in parts if p is not None)
    print(section)
    if args.write:
        write_section(args.write, section)


if __name__ == "__main__":
    main()
