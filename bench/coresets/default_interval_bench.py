"""Which interval should a static score-based coreset answer by default? The best held-out models apart
(issue 35 item 1).

``nice -n 10 python -m bench.coresets.default_interval_bench [--datasets a,b] [--seeds 20] [--level 0.95]
--write docs/RESULTS.md`` runs every data set (pieces in ``bench/results/default_interval/``; ``--render`` only
reassembles them).

Protocol, per data set and seed: :func:`evalplan.core.backtest.backtest.split_models` (30 stratified references, every
other model held out), a 10% coreset chosen on the references, 95% intervals. Per held-out model the bench
keeps the *ingredients* (:func:`ingredients`) from which every candidate rule (:data:`RULES`) is computed:

* ``calibrated`` (the default before issue 35): mRMR's k items, kernel ridge, the ``calibrated`` rule on the
  references' cross-fitted and fixed-coreset errors with the top-decile widening, and the extrapolation guard
  (AIPW with its leave-one-reference-out conformal interval for a target whose coreset mean is outside the
  references'), exactly as ``score_predictions.predict_many``;
* ``design``: ``params.interval: "design"`` (:mod:`evalplan.core.coresets.design_coreset`, the whole budget drawn);
* ``hybrid``: the method selects
  ``1 - share`` of the budget and a stratified draw adds the rest (inclusion probabilities recorded, the
  method's items a take-all stratum); kernel ridge on all k items with the ``calibrated`` rule answers unless
  the draw's difference estimate (the design interval at the same level, method items taken whole) excludes
  the model's estimate, in which case the design interval answers;
* ``difference``: the same coreset, the kernel-ridge prediction as the working model's level and the draw's
  inverse-probability-weighted mean residual as its correction (the AIPW / difference estimator), with the
  design's variance;
* ``extended`` (``params.interval: "extended"``, the default since issue 35): ``calibrated`` on mRMR's k items,
  then :func:`evalplan.core.coresets.intervals.shrinkage_extended_interval` (the interval also holds itself moved to the
  classical calibration estimate given by the references' shrinkage line); the point estimate is unchanged;
* ``mrmr 75% + draw 25%, calibrated`` / ``..., extended``: kernel ridge on the hybrid coreset with either rule.

Reported: coverage over all held-out models, over the top 5 held-out of each seed and the top decile, mean
width and RMSE in points.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize

from bench.common.markdown_sections import INTERPRETATION, write_section
from bench.common.shared_data import load_scores as load
from evalplan.core.backtest.backtest import split_models
from evalplan.core.coresets.design_coreset import design_coreset, design_estimate
from evalplan.core.coresets.intervals import (
    calibrated_half_width,
    coreset_cross_fitted_errors,
    extrapolation_flags,
    fixed_coreset_errors,
    loo_conformal_interval,
    shrinkage_extended_interval,
    top_widened_interval,
)
from evalplan.core.coresets.predictors import AIPWPredictor, KernelRidgePredictor, RidgePredictor
from evalplan.core.selection.score_based import SCORE_METHODS

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "bench" / "results" / "default_interval"
START, END = "<!-- default-interval -->", "<!-- /default-interval -->"
DATASETS = ("openllm_v2_musr", "openllm_v2_math_hard", "helm_lite_mmlu", "helm_lite_gsm", "helm_lite_math",
            "helm_lite_med_qa", "helm_lite_commonsense", "alpacaeval1")
SHARES = (0.25,)
N_REF = 30
TOP = 5


def score_range(Y: np.ndarray) -> tuple[float, float]:
    lo, hi = float(Y.min()), float(Y.max())
    return (0.0, 1.0) if lo >= 0.0 and hi <= 1.0 else (lo, hi)


def _select_mrmr(Y: np.ndarray, k: int, seed: int, method: str) -> np.ndarray:
    if method == "random":
        return np.sort(np.random.default_rng([seed, 7919]).choice(Y.shape[1], size=k, replace=False))
    return np.asarray(SCORE_METHODS[method](k=k, seed=seed).fit(Y).ranking_, dtype=np.int64)


def model_part(Yr: np.ndarray, Yt: np.ndarray, select: Callable[[np.ndarray], np.ndarray], seed: int,
               level: float) -> dict[str, np.ndarray]:
    """Kernel ridge on the coreset ``select`` picks, the calibrated rule with the top-decile widening, the guard."""
    sr = Yr.mean(axis=1)
    idx = select(Yr)
    krr = KernelRidgePredictor().fit(Yr[:, idx], sr)
    center = np.asarray(krr.predict(Yt[:, idx]), dtype=float)
    cf = coreset_cross_fitted_errors(lambda Ytr: (select(Ytr), None), lambda w: KernelRidgePredictor, Yr, sr,
                                     n_folds=10, seed=seed)
    fixed = fixed_coreset_errors(KernelRidgePredictor, Yr[:, idx], sr)
    lo, hi, _ = top_widened_interval(center, cf, level, fixed, "calibrated", sr)
    flags = extrapolation_flags(Yt[:, idx].mean(axis=1), Yr[:, idx].mean(axis=1))
    aipw = loo_conformal_interval(AIPWPredictor, Yr[:, idx], sr, Yt[:, idx], level=level)
    means_r, means_t = Yr[:, idx].mean(axis=1, keepdims=True), Yt[:, idx].mean(axis=1, keepdims=True)
    lin = loo_conformal_interval(RidgePredictor, means_r, sr, means_t, level=level)
    return {"center": center, "lower": lo, "upper": hi, "flag": flags.astype(float), "aipw": aipw.center,
            "cf": cf, "fixed": fixed, "sr": sr,
            "lin": lin.center, "lin_lower": lin.lower, "lin_upper": lin.upper,
            "aipw_lower": aipw.lower, "aipw_upper": aipw.upper,
            "h": np.full(center.size, calibrated_half_width(cf, fixed, level)),
            "coreset_mean": Yt[:, idx].mean(axis=1),
            "ref_top": np.full(center.size, float(np.quantile(Yr[:, idx].mean(axis=1), 0.9)))}


def level_estimate(design: Any, y: np.ndarray, level_value: float, level: float) -> tuple[float, float, float]:
    """The difference estimator whose working model's mean over every item is ``level_value`` (the model
    prediction): the logit shift solved for that mean, then :func:`design_estimate` with that shift."""
    lo, hi = design.lo, design.hi
    span = hi - lo if hi > lo else 1.0
    target = min(max(level_value, lo + 1e-6 * span), hi - 1e-6 * span)

    def gap(d: float) -> float:
        return float(np.mean(lo + span / (1.0 + np.exp(-(design.logits + d))))) - target

    delta = optimize.brentq(gap, -40.0, 40.0)
    e = design_estimate(design, y, level=level, delta=delta)
    return e.estimate, e.lower, e.upper


def ingredients(Y: np.ndarray, seed: int, level: float, method: str = "mrmr") -> dict[str, list[float]]:
    s = Y.mean(axis=1)
    ref, test = split_models(s, N_REF, "stratified", np.random.default_rng(seed))
    Yr, Yt = Y[ref], Y[test]
    k = max(2, int(round(0.1 * Y.shape[1])))
    rng = score_range(Y)
    out: dict[str, np.ndarray] = {"truth": Yt.mean(axis=1)}
    base = model_part(Yr, Yt, lambda Ytr: _select_mrmr(Ytr, k, seed, method), seed, level)
    out.update({f"base_{key}": v for key, v in base.items() if key not in ("cf", "fixed", "sr")})
    refs = {key: np.asarray(base[key], dtype=float).tolist() for key in ("cf", "fixed", "sr")}
    d = design_coreset(Yr, k, seed=seed, score_range=rng)
    est = [design_estimate(d, y[d.items], level=level) for y in Yt]
    out["design"] = np.array([e.estimate for e in est])
    out["design_lower"] = np.array([e.lower for e in est])
    out["design_upper"] = np.array([e.upper for e in est])
    for share in SHARES:
        k1 = k - int(round(share * k))

        def select(Ytr: np.ndarray, k1: int = k1) -> np.ndarray:
            fixed = _select_mrmr(Ytr, k1, seed, method)
            dd = design_coreset(Ytr, k, seed=seed, score_range=rng, take_all=fixed.tolist())
            return np.asarray(dd.items, dtype=np.int64)

        tag = f"s{int(round(100 * share))}"
        hyb = model_part(Yr, Yt, select, seed, level)
        out.update({f"{tag}_{key}": v for key, v in hyb.items() if key in ("center", "lower", "upper", "h")})
        refs[tag] = {key: np.asarray(hyb[key], dtype=float).tolist() for key in ("cf", "fixed")}
        fixed = _select_mrmr(Yr, k1, seed, method)
        dd = design_coreset(Yr, k, seed=seed, score_range=rng, take_all=fixed.tolist())
        est = [design_estimate(dd, y[dd.items], level=level) for y in Yt]
        out[f"{tag}_design"] = np.array([e.estimate for e in est])
        out[f"{tag}_design_lower"] = np.array([e.lower for e in est])
        out[f"{tag}_design_upper"] = np.array([e.upper for e in est])
        diff = [level_estimate(dd, y[dd.items], c, level) for y, c in zip(Yt, hyb["center"])]
        out[f"{tag}_diff"] = np.array([x[0] for x in diff])
        out[f"{tag}_diff_lower"] = np.array([x[1] for x in diff])
        out[f"{tag}_diff_upper"] = np.array([x[2] for x in diff])
    return {**{key: np.asarray(v, dtype=float).tolist() for key, v in out.items()}, "refs": refs}


RULES = ("calibrated", "extended", "design", "hybrid", "difference", "mrmr 75% + draw 25%, calibrated",
         "mrmr 75% + draw 25%, extended")


def rules(r: dict[str, Any]) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """(truth, {rule: (estimate, lower, upper)}) of one seed's ingredients, clipped to the score range [0, 1]."""
    g = {key: np.asarray(v, dtype=float) for key, v in r.items() if key != "refs"}
    refs = r["refs"]
    sr, cf = np.asarray(refs["sr"], dtype=float), np.asarray(refs["cf"], dtype=float)
    flag = g["base_flag"] > 0
    out: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    # the service's default before issue 35: the guard's AIPW (LOO conformal) for a flagged target
    c = np.where(flag, g["base_aipw"], g["base_center"])
    lo = np.where(flag, g["base_aipw_lower"], g["base_lower"])
    hi = np.where(flag, g["base_aipw_upper"], g["base_upper"])
    out["calibrated"] = (c, lo, hi)
    ext = shrinkage_extended_interval(g["base_center"], g["base_lower"], g["base_upper"], cf, sr)
    out["extended"] = (c, np.where(flag, lo, ext.lower), np.where(flag, hi, ext.upper))
    out["design"] = (g["design"], g["design_lower"], g["design_upper"])
    tag = "s25"
    switch = (g[f"{tag}_center"] < g[f"{tag}_design_lower"]) | (g[f"{tag}_center"] > g[f"{tag}_design_upper"])
    out["hybrid"] = tuple(np.where(switch, g[f"{tag}_design{suffix}"], g[f"{tag}_{name}"])  # type: ignore[assignment]
                          for suffix, name in (("", "center"), ("_lower", "lower"), ("_upper", "upper")))
    out["difference"] = (g[f"{tag}_diff"], g[f"{tag}_diff_lower"], g[f"{tag}_diff_upper"])
    out["mrmr 75% + draw 25%, calibrated"] = (g[f"{tag}_center"], g[f"{tag}_lower"], g[f"{tag}_upper"])
    ext2 = shrinkage_extended_interval(g[f"{tag}_center"], g[f"{tag}_lower"], g[f"{tag}_upper"],
                                       np.asarray(refs[tag]["cf"], dtype=float), sr)
    out["mrmr 75% + draw 25%, extended"] = (g[f"{tag}_center"], ext2.lower, ext2.upper)
    return g["truth"], {key: (np.clip(a, 0, 1), np.clip(b, 0, 1), np.clip(u, 0, 1)) for key, (a, b, u) in out.items()}


def seed_counts(r: dict[str, Any]) -> dict[str, dict[str, float]]:
    """One seed reduced to what the tables need, per rule: models, hits, top-5 and top-decile hits, summed width
    and squared error (what a piece stores)."""
    truth, out = rules(r)
    top5 = np.argsort(-truth, kind="stable")[:TOP]
    decile = truth >= np.quantile(truth, 0.9)
    counts = {}
    for rule, (e, lo, hi) in out.items():
        hit = (lo <= truth + 1e-12) & (truth <= hi + 1e-12)
        counts[rule] = {"n": int(truth.size), "hits": int(hit.sum()), "n_top5": int(top5.size),
                        "top5_hits": int(hit[top5].sum()), "n_decile": int(decile.sum()),
                        "decile_hits": int(hit[decile].sum()), "width": float((hi - lo).sum()),
                        "sq_error": float(np.square(e - truth).sum())}
    return counts


def summarize(pieces: list[dict[str, dict[str, float]]], rule: str) -> dict[str, float]:
    rows = [p[rule] for p in pieces]
    tot = {key: sum(r[key] for r in rows) for key in rows[0]}
    return {"coverage": tot["hits"] / tot["n"], "top5": tot["top5_hits"] / tot["n_top5"], "n_top5": tot["n_top5"],
            "decile": tot["decile_hits"] / tot["n_decile"], "n_decile": tot["n_decile"],
            "width": 100 * tot["width"] / tot["n"], "rmse": 100 * math.sqrt(tot["sq_error"] / tot["n"])}


def render(level: float) -> str:
    pieces = [json.loads(p.read_text()) for p in sorted(CACHE.glob("*.json"))]
    pieces = [p for p in pieces if p["level"] == level]
    lines = [START, f"## The default interval of a static score-based coreset: the best held-out models (issue 35 "
             f"item 1), {level:.0%} intervals", "",
             "`nice -n 10 python -m bench.coresets.default_interval_bench --write docs/RESULTS.md` (pieces in "
             "`bench/results/default_interval/`). Per seed: 30 stratified references, every other model held out, "
             "10% coresets chosen on the references (mRMR; on alpacaeval1 random, mRMR being too slow on its "
             "scores), kernel ridge. `calibrated` = the service's default before issue 35 (top-decile widening, "
             "the extrapolation guard's AIPW for a target outside the references' coreset means); `extended` = "
             "the same with `evalplan.core.coresets.intervals.shrinkage_extended_interval` (the new default); `design` = "
             "`params.interval: \"design\"` (the whole budget drawn); the last four use a coreset of mRMR's 75% "
             "plus a stratified draw of 25% (`design_coreset` with the method's items as take-all stratum): "
             "`hybrid` answers kernel ridge on all its items with `calibrated` unless the draw's difference "
             "estimate excludes that estimate at the same level, then the draw's design interval; `difference` = "
             "kernel ridge's estimate as the working model's level plus the draw's inverse-probability-weighted "
             "residuals, with the design variance (AIPW); `..., calibrated` / `..., extended` = kernel ridge on "
             "that coreset with either rule. Coverage over all held-out models, over the 5 best held-out of each "
             "seed (n = 5 x seeds) and the top decile by true score; mean width and RMSE in points.", "",
             "| data set | seeds | rule | coverage | top-5 coverage (n) | top-10% coverage (n) | width | RMSE |",
             "|---|---|---|---|---|---|---|---|"]
    goal = []
    for piece in pieces:
        for rule in RULES:
            s = summarize(piece["seeds_out"], rule)
            bold = "**" if rule == "extended" else ""
            lines.append(f"| {piece['dataset']} | {len(piece['seeds_out'])} | {bold}{rule}{bold} | "
                         f"{s['coverage']:.3f} | {s['top5']:.3f} ({s['n_top5']}) | {s['decile']:.3f} "
                         f"({s['n_decile']}) | {s['width']:.1f} | {s['rmse']:.2f} |")
        new, old, des = (summarize(piece["seeds_out"], r) for r in ("extended", "calibrated", "design"))
        goal.append(f"| {piece['dataset']} | {old['top5']:.3f} -> {new['top5']:.3f} | "
                    f"{'yes' if new['top5'] >= 0.9 else '**no**'} | {old['coverage']:.3f} -> {new['coverage']:.3f} | "
                    f"{'yes' if 0.93 <= new['coverage'] <= 0.97 else '**no**'} | {old['rmse']:.2f} / {new['rmse']:.2f} | "
                    f"{old['width']:.1f} -> {new['width']:.1f} (design {des['width']:.1f}) |")
    lines += ["", "### Goal check (issue 35): the new default `extended` against `calibrated`", "",
              "| data set | top-5 coverage | >= 0.90 | coverage | 0.93-0.97 | RMSE before / after | width (design) |",
              "|---|---|---|---|---|---|---|", *goal, "",
              "Pieces (wall time on 2 shared cores, when): "
              + "; ".join(f"{p['dataset']} {p['seconds']:.0f} s ({p['ran']})" for p in pieces) + ".", "",
              INTERPRETATION[0], INTERPRETATION[1], END]
    return "\n".join(lines)


def run(name: str, seeds: int, level: float, keep: Path | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    Y = load(name)
    method = "random" if name == "alpacaeval1" else "mrmr"
    raw = [ingredients(Y, seed, level, method) for seed in range(seeds)]
    seconds = time.perf_counter() - t0
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"{name}.json").write_text(json.dumps({"dataset": name, "level": level, "seconds": seconds,
                                                       "seeds": raw}))
    return piece_of(name, level, raw, seconds)


def piece_of(name: str, level: float, raw: list[dict[str, Any]], seconds: float,
             ran: str | None = None) -> dict[str, Any]:
    return {"dataset": name, "level": level, "seconds": seconds,
            "ran": ran or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "seeds_out": [seed_counts(r) for r in raw]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--level", type=float, default=0.95)
    ap.add_argument("--keep", default=None, help="also keep each seed's ingredients (per held-out model) here")
    ap.add_argument("--from-ingredients", default=None,
                    help="build the pieces from ingredients kept by an earlier run's --keep instead of running")
    ap.add_argument("--render", action="store_true", help="only assemble the stored pieces")
    ap.add_argument("--write", default=None)
    args = ap.parse_args()
    if not args.render:
        CACHE.mkdir(parents=True, exist_ok=True)
        for name in args.datasets.split(","):
            if args.from_ingredients:
                path = Path(args.from_ingredients) / f"{name}.json"
                if not path.exists():
                    continue
                kept = json.loads(path.read_text())
                piece = piece_of(name, kept["level"], kept["seeds"], kept["seconds"],
                                 time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(path.stat().st_mtime)))
            else:
                piece = run(name, args.seeds, args.level, Path(args.keep) if args.keep else None)
            (CACHE / f"{name}.json").write_text(json.dumps(piece))
            print(name, f"{piece['seconds']:.0f} s", flush=True)
    section = render(args.level)
    print(section)
    if args.write:
        write_section(ROOT / args.write, section, START, END)


if __name__ == "__main__":
    main()
