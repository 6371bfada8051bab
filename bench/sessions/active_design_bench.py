"""Accuracy bench of issue 23: the default ``active_design`` against uniform random sampling, today's
previous default (``refgp_v3``) and the peers (``proeval_bq``, ``fluid_irt``), on every shared data set x
interpolation / extrapolation, held-out targets split by model.

Per (data set, regime) piece, up to 40 targets (fewer only where the models run out; extrapolation =
the best models as targets, the next 20% by rank discarded, references = the rest, at most 200):

* one long ``active_design`` session per target (seed 0) run until its 95% confidence sequence is within
  ±0.01 (or every item is observed): items to ±0.02 / ±0.01 and the coverage at that data-dependent stop;
  the same for uniform random sampling with the betting confidence sequence of sampling without replacement
  (``BettingCS``: what "random, valid at the stop" costs), and the fixed-n normal interval of the uniform
  sample mean (analytic, not valid at a stop; the issue's 66% figure);
* ``--reps`` sessions per target (seeds 0..reps-1) at 5% and 10% of the items: MAE, coverage of the anytime
  and of the fixed-n interval, and ESS = the exact variance of the uniform sample mean (``(1 - n/N) S^2 / n``)
  over the method's mean squared error, pooled over the targets and seeds of the piece, for the reported
  estimate, the model estimate and the design estimate;
* ``refgp_v3``, ``proeval_bq``, ``fluid_irt`` (one session each, deterministic selection) at 5% and 10%: MAE;
* the ESS ceiling of this design family: with the working model's predictions replaced by a least-squares fit
  of the reference features to the target's own full scores (``oracle fit``), and with probabilities
  proportional to each item's true residual (``oracle q``), both with the uniform floor, one-draw variance.

Items whose score is missing for some model (alpacaeval1: 61 cells) are dropped. Each piece is stored as
JSON under ``bench/results/active_design/``; ``--write docs/RESULTS.md`` renders every stored piece.

    EVALPLAN_DATA_DIR=/work/shared/data nice -n 10 python -m bench.sessions.active_design_bench \\
        --datasets openllm_v2_musr openllm_v2_math_hard helm_lite_commonsense helm_lite_gsm helm_lite_math \\
                   helm_lite_med_qa helm_lite_mmlu alpacaeval1 --write docs/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.markdown_sections import write_section
from bench.sessions.sequential_accuracy_bench import load
from evalplan.core.backtest.sequential_backtest import EXTRAPOLATION_GAP, replay
from evalplan.core.sequential import BucketPrior, SessionConfig
from evalplan.core.sequential.active_design import ActiveDesignEstimator
from evalplan.core.sequential.methods import ESTIMATORS
from evalplan.core.sequential.refgp import ref_features
from evalplan.core.sequential.stopping import BettingCS, StopRule

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "bench" / "results" / "active_design"
BEGIN, END = "<!-- active-design -->", "<!-- /active-design -->"
DATASETS = ("openllm_v2_musr", "openllm_v2_math_hard", "helm_lite_commonsense", "helm_lite_gsm", "helm_lite_math",
            "helm_lite_med_qa", "helm_lite_mmlu", "alpacaeval1")
REGIMES = ("interpolation", "extrapolation")
FRACTIONS = (0.05, 0.10)
HALF_WIDTHS = (0.02, 0.01)
PEERS = ("refgp_v3", "proeval_bq", "fluid_irt")
Z95 = 1.959963984540054
MIN_REFS = 10


def split(X: np.ndarray, regime: str, n_targets: int, ref_cap: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    M = X.shape[0]
    if regime == "interpolation":
        k = min(n_targets, M - MIN_REFS)
        targets = np.sort(rng.choice(M, size=k, replace=False))
        pool = np.setdiff1d(np.arange(M), targets)
    else:
        gap = int(round(EXTRAPOLATION_GAP * M))
        k = min(n_targets, M - gap - MIN_REFS)
        order = np.argsort(-X.mean(axis=1), kind="stable")
        targets, pool = np.sort(order[:k]), np.sort(order[k + gap:])
    if len(pool) > ref_cap:
        pool = np.sort(rng.choice(pool, size=ref_cap, replace=False))
    return targets, pool


def design_session(prior: BucketPrior, y: np.ndarray, seed: int, n_max: int, stop_hw: float | None,
                   checkpoints: dict[int, str], **params: Any) -> dict[str, Any]:
    """One active_design session on ``y``: values at the checkpoints and the first n at each half-width."""
    config = SessionConfig(method="active_design", seed=seed, stop=StopRule(0.0).as_dict())
    est = ActiveDesignEstimator(prior, config, score_range=(0.0, 1.0), **params)
    out: dict[str, Any] = {"at": {}, "stop": {}}
    mu = float(y.mean())
    while est.n_observed < n_max:
        item = est.propose()[0]
        est.observe(item, float(y[item]))
        n = est.n_observed
        lo, hi = est.ci
        for h in HALF_WIDTHS:
            if str(h) not in out["stop"] and n >= 10 and (hi - lo) / 2 <= h:
                out["stop"][str(h)] = {"n": n, "covered": bool(lo <= mu <= hi)}
        if n in checkpoints:
            fixed = est.cs.fixed_n(0.95) or (lo, hi)
            out["at"][checkpoints[n]] = {"estimate": est.estimate, "model": est.model_estimate,
                                         "design": est.design_estimate if est.design_estimate is not None
                                         else est.model_estimate,
                                         "anytime": [lo, hi], "fixed": [max(fixed[0], 0.0), min(fixed[1], 1.0)],
                                         "extrapolation": est.extrapolation}
        if stop_hw is not None and (hi - lo) / 2 <= stop_hw and n >= 10:
            break
    return out


def random_stop(y: np.ndarray, seed: int) -> dict[str, int]:
    """Items to each half-width for uniform random sampling with the WoR betting confidence sequence."""
    N = y.size
    order = np.random.default_rng([seed, 99]).permutation(N)
    cs = BettingCS(N, 0.95)
    found: dict[str, int] = {}
    for n, i in enumerate(order, start=1):
        cs.update(float(y[i]))
        lo, hi = cs.interval()
        for h in HALF_WIDTHS:
            if str(h) not in found and n >= 10 and (hi - lo) / 2 <= h:
                found[str(h)] = n
        if len(found) == len(HALF_WIDTHS):
            break
    return found


def fixed_n_items(S2: float, N: int, h: float) -> int:
    """Smallest n with z sqrt((1 - n/N) S^2 / n) <= h (uniform sample mean, fixed-n normal interval)."""
    if S2 <= 0:
        return 1
    n = (Z95 ** 2 * S2) / (h * h + Z95 ** 2 * S2 / N)
    return int(min(N, math.ceil(n)))


def oracle_ess(prior: BucketPrior, y: np.ndarray, gamma: float) -> dict[str, float]:
    """One-draw ESS ceilings (module docstring): uniform mean's variance / the design's one-draw variance."""
    N = y.size
    feats = ref_features(prior)
    phi = feats.phi[prior.bucket_of_item]
    coef, *_ = np.linalg.lstsq(phi, y, rcond=None)
    mu = np.clip(phi @ coef, 0.0, 1.0)
    var_unif = N * float(((y - y.mean()) ** 2).sum())
    out = {}
    for name, spread in (("fit", np.sqrt(np.clip(mu, 0.02, 0.98) * (1 - np.clip(mu, 0.02, 0.98)))),
                         ("residual", np.abs(y - mu))):
        e = y - mu
        tot = spread.sum()
        q = (1 - gamma) * spread / tot + gamma / N if tot > 0 else np.full(N, 1.0 / N)
        v = float((e * e / q).sum() - e.sum() ** 2)
        out[name] = var_unif / v if v > 1e-15 else float("inf")
    return out


def run_piece(name: str, regime: str, args: argparse.Namespace) -> dict[str, Any]:
    _, X = load(name)
    keep = ~np.isnan(X).any(axis=0)
    X = X[:, keep]
    targets, refs = split(X, regime, args.targets, args.ref_cap, args.seed)
    N = X.shape[1]
    prior = BucketPrior.from_reference_scores(X[refs])
    marks = {max(1, math.ceil(f * N)): str(f) for f in FRACTIONS}
    n_max = max(marks)
    t0 = time.perf_counter()
    per_target = []
    for k, t in enumerate(targets):
        y = X[t]
        mu, S2 = float(y.mean()), float(y.var(ddof=1))
        runs = [design_session(prior, y, 0, N, 0.01, marks)]
        runs += [design_session(prior, y, r, n_max, None, marks) for r in range(1, args.reps)]
        peers = {}
        for m in PEERS:
            if m not in ESTIMATORS:
                continue
            est, _, _ = replay(prior, y, ESTIMATORS[m], SessionConfig(method=m, seed=0), level=0.95,
                               score_range=(0.0, 1.0), n_max=n_max)
            peers[m] = {f: float(est[n - 1]) for n, f in marks.items() if n <= est.size}
        per_target.append({"model": int(t), "mean": mu, "S2": S2, "runs": runs, "peers": peers,
                           "random_cs": random_stop(y, k),
                           "random_fixed": {str(h): fixed_n_items(S2, N, h) for h in HALF_WIDTHS},
                           "oracle": oracle_ess(prior, y, 0.25)})
        if args.verbose:
            print(f"  {name} {regime} target {k + 1}/{len(targets)} {time.perf_counter() - t0:.0f}s", flush=True)
    return {"dataset": name, "regime": regime, "n_items": N, "n_models": int(X.shape[0]),
            "n_targets": int(len(targets)), "n_references": int(len(refs)), "reps": args.reps,
            "marks": {f: n for n, f in marks.items()}, "targets": per_target,
            "seconds": time.perf_counter() - t0, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores (shared), Python {platform.python_version()}"}


# --------------------------------------------------------------------------- summary and rendering
def summarize(p: dict[str, Any]) -> dict[str, Any]:
    N = p["n_items"]
    s: dict[str, Any] = {"ess": {}, "mae": {}, "cov_fixed": {}, "cov_anytime": {}, "stop": {}}
    for f, n in p["marks"].items():
        var_u = np.mean([(1 - n / N) * t["S2"] / n for t in p["targets"]])
        for kind in ("estimate", "model", "design"):
            err = [r["at"][f][kind] - t["mean"] for t in p["targets"] for r in t["runs"] if f in r["at"]]
            s["ess"][f"{kind}@{f}"] = float(var_u / max(np.mean(np.square(err)), 1e-15))
        s["mae"][f"active_design@{f}"] = float(np.mean([abs(r["at"][f]["estimate"] - t["mean"])
                                                        for t in p["targets"] for r in t["runs"] if f in r["at"]]))
        for m in PEERS:
            vals = [abs(t["peers"][m][f] - t["mean"]) for t in p["targets"] if m in t["peers"] and f in t["peers"][m]]
            if vals:
                s["mae"][f"{m}@{f}"] = float(np.mean(vals))
        for kind, key in (("fixed", "cov_fixed"), ("anytime", "cov_anytime")):
            hits = [r["at"][f][kind][0] <= t["mean"] <= r["at"][f][kind][1] for t in p["targets"] for r in t["runs"]
                    if f in r["at"]]
            s[key][f] = float(np.mean(hits))
    for h in HALF_WIDTHS:
        reached = [t["runs"][0]["stop"][str(h)] for t in p["targets"] if str(h) in t["runs"][0]["stop"]]
        rand = [t["random_cs"].get(str(h), N) for t in p["targets"]]
        fixed = [t["random_fixed"][str(h)] for t in p["targets"]]
        ours = [t["runs"][0]["stop"].get(str(h), {"n": N})["n"] for t in p["targets"]]
        s["stop"][str(h)] = {"items": float(np.mean(ours)), "reached": len(reached) / len(p["targets"]),
                             "coverage": float(np.mean([r["covered"] for r in reached])) if reached else None,
                             "random_cs": float(np.mean(rand)), "random_fixed": float(np.mean(fixed))}
    s["oracle"] = {k: float(np.median([t["oracle"][k] for t in p["targets"]])) for k in ("fit", "residual")}
    s["extrapolation_flag"] = float(np.mean([t["runs"][0]["at"][max(p["marks"])]["extrapolation"]
                                             for t in p["targets"] if max(p["marks"]) in t["runs"][0]["at"]] or [0]))
    return s


def _f(v: Any, fmt: str = "{:.2f}") -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else fmt.format(v)


def render(pieces: list[dict[str, Any]]) -> str:
    lines = [BEGIN, "<!-- written by `python -m bench.sessions.active_design_bench --write docs/RESULTS.md` -->",
             "### `active_design` (the default): coverage at a stop, ESS vs uniform random, items to ±h, MAE "
             "(issue 23)", "",
             "Protocol and full command: `bench/sessions/active_design_bench.py`'s docstring. ESS = exact variance of "
             "the uniform sample mean / the method's MSE at the same n (pooled over targets and seeds); `est` is the "
             "reported estimate (the model's, clipped into the confidence sequence), `design` the terms' weighted "
             "mean. Items to ±h: mean over targets of the first n >= 10 with the 95% half-width <= h (all items "
             "when never: the interval is exact then); `random CS` = uniform sampling with the betting CS of "
             "sampling without replacement (valid at the stop), `random fixed` = the uniform mean's fixed-n normal "
             "interval (not valid at a stop). MAE x100. Oracle ESS: the one-draw ceiling of this design with a "
             "working model fitted to the target's own scores (`fit`), or with probabilities proportional to "
             "the true residuals (`resid`).", ""]
    head = ["data set", "regime", "N", "targets", "refs", "cov ±0.02 stop", "cov ±0.01 stop", "cov fixed-n 5%/10%",
            "cov anytime 5%/10%", "ESS est 5%/10%", "ESS design 5%/10%", "ESS oracle fit/resid",
            "items ±0.02: ours / random CS / random fixed", "items ±0.01: ours / random CS",
            "MAE 5%: ours / refgp_v3 / proeval_bq / fluid_irt", "MAE 10%: ours / refgp_v3 / proeval_bq / fluid_irt"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    summaries = []
    for p in pieces:
        s = summarize(p)
        summaries.append((p, s))
        st2, st1 = s["stop"]["0.02"], s["stop"]["0.01"]

        def cov(st: dict[str, Any]) -> str:
            return f"{_f(st['coverage'], '{:.0%}')} ({st['reached']:.0%} reached)"

        mae = [" / ".join(_f(100 * s["mae"][f"{m}@{f}"]) if f"{m}@{f}" in s["mae"] else "n/a"
                          for m in ("active_design",) + PEERS) for f in ("0.05", "0.1")]
        lines.append("| " + " | ".join([
            p["dataset"], p["regime"], str(p["n_items"]), str(p["n_targets"]), str(p["n_references"]),
            cov(st2), cov(st1), f"{s['cov_fixed']['0.05']:.0%} / {s['cov_fixed']['0.1']:.0%}",
            f"{s['cov_anytime']['0.05']:.0%} / {s['cov_anytime']['0.1']:.0%}",
            f"{s['ess']['estimate@0.05']:.2f} / {s['ess']['estimate@0.1']:.2f}",
            f"{s['ess']['design@0.05']:.2f} / {s['ess']['design@0.1']:.2f}",
            f"{s['oracle']['fit']:.2f} / {s['oracle']['residual']:.2f}",
            f"{st2['items']:.0f} / {st2['random_cs']:.0f} / {st2['random_fixed']:.0f}",
            f"{st1['items']:.0f} / {st1['random_cs']:.0f}"] + mae) + " |")
    lines += ["", "#### Goals of issue 23 on these pieces", ""] + goals(summaries)
    lines += ["", "Pieces: " + "; ".join(f"{p['dataset']} {p['regime']} ({p['n_targets']} targets x {p['reps']} "
                                         f"seeds, {p['seconds']:.0f} s, {p['date']})" for p in pieces) + ".",
              "", "<!-- interpretation -->", "<!-- /interpretation -->", END]
    return "\n".join(lines)


def goals(summaries: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[str]:
    out = []
    covs = [(p, h, s["stop"][h]["coverage"]) for p, s in summaries for h in ("0.02", "0.01")
            if s["stop"][h]["coverage"] is not None]
    low = [f"{p['dataset']} {p['regime']} ±{h}: {c:.0%}" for p, h, c in covs if c < 0.93]
    out.append(f"* Coverage at a precision stop >= 93%: {len(covs) - len(low)} of {len(covs)} (piece, rule) cells"
               + (f"; below: {', '.join(low)}" if low else "") + ".")
    fixed = [(p, f, s["cov_fixed"][f]) for p, s in summaries for f in ("0.05", "0.1")]
    out.append(f"* Coverage of the fixed-n interval at 5% / 10% within 93-97%: "
               f"{sum(0.93 <= c <= 0.97 for _, _, c in fixed)} of {len(fixed)} cells (>= 93%: "
               f"{sum(c >= 0.93 for _, _, c in fixed)}).")
    ess_open = [s["ess"][f"estimate@{f}"] for p, s in summaries if p["dataset"].startswith("openllm")
                for f in ("0.05", "0.1")]
    ess_all = [s["ess"][f"estimate@{f}"] for _, s in summaries for f in ("0.05", "0.1")]
    if ess_open:
        out.append(f"* ESS vs uniform random (reported estimate), median over the OpenLLM v2 cells: "
                   f"{np.median(ess_open):.2f} (goal >= 5); over all cells: median {np.median(ess_all):.2f}, "
                   f"min {min(ess_all):.2f} (goal: never below 1; below 1 in {sum(e < 1 for e in ess_all)} of "
                   f"{len(ess_all)}). Oracle ceilings (median over targets, per piece above) show what this design "
                   "family could reach.")
    big = [(p, s["stop"]["0.02"]) for p, s in summaries if p["n_items"] >= 756]
    if big:
        out.append("* Items to ±2 points (N >= 756), ours / random with the anytime-valid CS (goal <= 1/4): "
                   + ", ".join(f"{p['dataset']} {p['regime']} {st['items'] / st['random_cs']:.2f}" for p, st in big)
                   + "; ours / random's fixed-n interval: "
                   + ", ".join(f"{st['items'] / st['random_fixed']:.2f}" for _, st in big) + ".")
    worse, cells, beat, pcells = [], 0, 0, 0
    for p, s in summaries:
        for f in ("0.05", "0.1"):
            ours = s["mae"][f"active_design@{f}"]
            if f"refgp_v3@{f}" in s["mae"]:
                cells += 1
                if ours > s["mae"][f"refgp_v3@{f}"]:
                    worse.append(f"{p['dataset']} {p['regime']} {f}: {100 * ours:.2f} vs "
                                 f"{100 * s['mae'][f'refgp_v3@{f}']:.2f}")
            for m in ("proeval_bq", "fluid_irt"):
                if f"{m}@{f}" in s["mae"]:
                    pcells += 1
                    beat += ours < s["mae"][f"{m}@{f}"]
    out.append(f"* MAE no worse than refgp_v3 (the previous default): {cells - len(worse)} of {cells} cells"
               + (f"; worse: {'; '.join(worse)}" if worse else "") + f". Below proeval_bq / fluid_irt: {beat} of "
               f"{pcells} cells (goal >= 90%).")
    return out


def stored() -> list[dict[str, Any]]:
    pieces = []
    for d in DATASETS:
        for r in REGIMES:
            f = STORE / f"{d}_{r}.json"
            if f.exists():
                pieces.append(json.loads(f.read_text()))
    return pieces


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="*", default=[])
    ap.add_argument("--regimes", nargs="*", default=list(REGIMES))
    ap.add_argument("--targets", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ref-cap", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="rerun pieces already stored")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--write", type=Path, help="render every stored piece into this markdown file")
    args = ap.parse_args()
    STORE.mkdir(parents=True, exist_ok=True)
    for name in args.datasets:
        for regime in args.regimes:
            path = STORE / f"{name}_{regime}.json"
            if path.exists() and not args.force:
                continue
            piece = run_piece(name, regime, args)
            path.write_text(json.dumps(piece))
            print(f"{name} {regime}: {piece['seconds']:.0f} s", flush=True)
    pieces = stored()
    text = render(pieces) if pieces else ""
    if args.write and pieces:
        write_section(args.write, text, BEGIN, END)
    print(text)


if __name__ == "__main__":
    main()
