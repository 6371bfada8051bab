"""Fidelity (MRE, paper eq. 5) and interval coverage of text-embedding coresets on AlpacaEval 1.

The only shared score matrix with item text is ``alpacaeval1`` (53 models x 805 items, scores
0 / 0.5 / 1, some missing); ``gsm8k_text`` has text but no scores, the other matrices have scores
but no text, so neither can be used here.

What it does:

1. Builds each item's text exactly like the service (``item_text(prompt, target, fields,
   embedding_fields=[])``) and embeds it with the packaged all-MiniLM-L6-v2. The embedding matrix
   is cached in ``/tmp/evalplan_text_fidelity_<hash>.npz``, keyed by a SHA-256 over the model name
   and the text hashes, so reruns skip the model.
2. For k in {20, 40, 80}, selects coresets with the service's selectors (``TEXT_METHODS``) and
   reports MRE (eq. 5) on held-out models with a 3-fold split over the 53 models (paper §4.1):
   facility location with the paper default alpha = 1 and with alpha tuned by ``tune_alpha`` on the
   two calibration folds; random (20 seeds; plus 1000 draws as a reference distribution), DPP
   (cov / cos / cov-MI), k-center, k-means (5 seeds). One benchmark, so Cap-MRE (eq. 4) = MRE.
   Missing scores: a model's true score is its mean over its observed items, its coreset estimate
   the mean over its observed coreset items (``evalplan.core.coresets.metrics``).
3. Interval coverage: for every model the 95% interval of
   ``evalplan.core.coresets.prediction.estimate_from_coreset`` from its coreset scores, called as the predict
   endpoint calls it (N = 805 items, range [0, 1], not binary); coverage = fraction of models whose
   true full-benchmark score lies inside; mean width.

Usage: HF_HUB_OFFLINE=1 python -m bench.coresets.fidelity_text_coresets [--write docs/RESULTS.md]
Data: ``$EVALPLAN_DATA_DIR`` (default ``../shared/data`` next to the repository), read in place.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.markdown_sections import write_section as write_marked_section
from bench.common.shared_data import data_dir
from evalplan.core.coresets.metrics import coreset_errors
from evalplan.core.coresets.prediction import estimate_from_coreset
from evalplan.core.embedding.embedder import PACKAGED_MODEL, load_embedder
from evalplan.core.embedding.embedding_text import item_text, text_hash
from evalplan.core.selection import TEXT_METHODS
from evalplan.core.selection.tuning import DEFAULT_GRID, tune_alpha

ROOT = Path(__file__).resolve().parents[2]
DATASET = "alpacaeval1"
KS = (20, 40, 80)
N_FOLDS = 3
FOLD_SEED = 0
RANDOM_SEEDS = 20
RANDOM_REFERENCE_DRAWS = 1000
KMEANS_SEEDS = 5
LEVEL = 0.95
CAPS = ["alpacaeval"]  # one benchmark -> one capability: Cap-MRE == MRE
START, END = "<!-- text-fidelity", "<!-- /text-fidelity -->"


# --------------------------------------------------------------------------- data and embeddings

def load_alpacaeval(folder: Path) -> tuple[list[dict[str, Any]], list[str], np.ndarray]:
    items = [json.loads(line) for line in (folder / "items.jsonl").read_text().splitlines() if line.strip()]
    with (folder / "scores.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    col = {item_id: j for j, item_id in enumerate(header[1:])}
    order = [col[str(it["id"])] for it in items]  # score columns in item order
    models = [r[0] for r in body]
    Y = np.array([[float(x) if x != "" else np.nan for x in r[1:]] for r in body], dtype=np.float64)[:, order]
    return items, models, Y


def embed_cached(texts: list[str]) -> tuple[np.ndarray, dict[str, Any]]:
    key = hashlib.sha256((PACKAGED_MODEL + "\n" + "\n".join(text_hash(t) for t in texts)).encode()).hexdigest()
    path = Path("/tmp") / f"evalplan_text_fidelity_{key[:24]}.npz"
    if path.exists():
        z = np.load(path)
        return z["X"], {"cache": f"hit ({path})", "truncated": int(z["truncated"]),
                        "max_seq_length": int(z["max_seq_length"]), "seconds": 0.0}
    t0 = time.perf_counter()
    emb = load_embedder(PACKAGED_MODEL)
    counts = emb.token_counts(texts)
    X = emb.encode(texts, lengths=counts)
    truncated = int(emb.truncated(counts).sum())
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, X=X, truncated=truncated, max_seq_length=emb.max_seq_length or 0)
    os.replace(tmp, path)
    return X, {"cache": f"miss, written to {path}", "truncated": truncated,
               "max_seq_length": int(emb.max_seq_length or 0), "seconds": time.perf_counter() - t0,
               "device": emb.device}


# --------------------------------------------------------------------------- evaluation helpers

def fold_mres(Y: np.ndarray, folds: list[np.ndarray], labels: np.ndarray, sel: np.ndarray) -> np.ndarray:
    return np.array([coreset_errors(Y[f], labels, CAPS, sel)["mre"] for f in folds])


def intervals(Y: np.ndarray, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per model: covered (bool) and width of the 95% interval, as the predict endpoint computes it."""
    n_items = Y.shape[1]
    true = np.nanmean(Y, axis=1)
    covered = np.zeros(Y.shape[0], dtype=bool)
    width = np.full(Y.shape[0], np.nan)
    for m in range(Y.shape[0]):
        v = Y[m, sel]
        v = v[~np.isnan(v)]
        if v.size == 0:
            continue
        r = estimate_from_coreset(v, np.zeros(v.size, dtype=np.int64), [n_items], CAPS, level=LEVEL,
                                  score_range=(0.0, 1.0), binary=False)["overall"]
        lo, hi = r["interval"]
        covered[m] = lo <= true[m] <= hi
        width[m] = hi - lo
    return covered, width


def signed_bias(Y: np.ndarray, sel: np.ndarray) -> float:
    """Mean over models of (coreset estimate - true score): a shared offset from the items chosen."""
    return float(np.nanmean(np.nanmean(Y[:, sel], axis=1) - np.nanmean(Y, axis=1)))


def mean_se(x: np.ndarray) -> tuple[float, float]:
    x = np.asarray(x, dtype=np.float64)
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else float("nan")


def knn_difficulty_r2(X: np.ndarray, Y: np.ndarray, nn: int = 10) -> float:
    """Leave-one-out R^2 of an item's mean score (over models) predicted by the mean of its ``nn``
    nearest neighbours (cosine): how much item difficulty the embedding space carries."""
    d = np.nanmean(Y, axis=0)
    S = X @ X.T
    np.fill_diagonal(S, -np.inf)
    nbrs = np.argsort(-S, axis=1)[:, :nn]
    pred = d[nbrs].mean(axis=1)
    return float(1 - ((d - pred) ** 2).sum() / ((d - d.mean()) ** 2).sum())


# --------------------------------------------------------------------------- main

def run() -> dict[str, Any]:
    t_start = time.perf_counter()
    folder = data_dir() / DATASET
    items, models, Y = load_alpacaeval(folder)
    texts = [item_text(it["prompt"], it.get("target"), it.get("fields"), embedding_fields=[]) for it in items]
    X, emb_info = embed_cached(texts)
    n = X.shape[0]
    labels = np.zeros(n, dtype=np.int64)
    perm = np.random.default_rng(FOLD_SEED).permutation(len(models))
    folds = [np.sort(f) for f in np.array_split(perm, N_FOLDS)]
    print(f"{len(models)} models x {n} items, missing {int(np.isnan(Y).sum())}; embeddings {X.shape}, "
          f"cache {emb_info['cache']}", flush=True)

    deterministic: dict[str, tuple[str, dict[str, Any]]] = {
        "FL, alpha = 1 (paper default)": ("facility_location", {"alpha": 1.0}),
        "DPP-Cov": ("dpp", {"kernel": "cov"}),
        "DPP-Cos": ("dpp", {"kernel": "cos"}),
        "DPP-Cov-MI": ("dpp", {"kernel": "cov", "mi": True}),
        "k-center": ("k_center", {}),
    }
    res: dict[str, Any] = {"k": {}, "emb": emb_info, "n_models": len(models), "n_items": n,
                           "n_missing": int(np.isnan(Y).sum()), "fold_sizes": [len(f) for f in folds],
                           "knn_r2": knn_difficulty_r2(X, Y)}
    for k in KS:
        t_k = time.perf_counter()
        rows: dict[str, dict[str, Any]] = {}
        # --- random: 20 seeds (reported) and 1000 draws (reference distribution)
        rand_mre, rand_cov, rand_w = [], [], []
        for seed in range(RANDOM_REFERENCE_DRAWS):
            sel = TEXT_METHODS["random"](k=k, seed=seed).fit(X, labels).ranking_
            rand_mre.append(fold_mres(Y, folds, labels, sel).mean())
            cov, w = intervals(Y, sel)
            rand_cov.append(cov.mean())
            rand_w.append(np.nanmean(w))
        rand_mre, rand_cov, rand_w = map(np.asarray, (rand_mre, rand_cov, rand_w))
        s = slice(0, RANDOM_SEEDS)
        rows["random (20 seeds)"] = {
            "mre": float(rand_mre[s].mean()), "mre_std": float(rand_mre[s].std(ddof=1)),
            "mre_min": float(rand_mre[s].min()), "mre_max": float(rand_mre[s].max()),
            "cov": float(rand_cov[s].mean()), "cov_min": float(rand_cov[s].min()), "cov_max": float(rand_cov[s].max()),
            "width": float(rand_w[s].mean()), "kind": "random"}
        rows[f"random ({RANDOM_REFERENCE_DRAWS} draws, reference)"] = {
            "mre": float(rand_mre.mean()), "mre_std": float(rand_mre.std(ddof=1)),
            "mre_min": float(rand_mre.min()), "mre_max": float(rand_mre.max()),
            "mre_q": [float(q) for q in np.quantile(rand_mre, [0.1, 0.5, 0.9])],
            "cov": float(rand_cov.mean()), "cov_min": float(rand_cov.min()), "cov_max": float(rand_cov.max()),
            "width": float(rand_w.mean()), "kind": "reference"}

        def pct(v: float, rand_mre: np.ndarray = rand_mre) -> float:  # share of random draws at least as good
            return float((rand_mre <= v).mean())

        # --- deterministic selectors (all 53 models; MRE per held-out fold)
        for name, (method, params) in deterministic.items():
            sel = TEXT_METHODS[method](k=k, **params).fit(X, labels).ranking_
            fm = fold_mres(Y, folds, labels, sel)
            cov, w = intervals(Y, sel)
            m, se = mean_se(fm)
            rows[name] = {"mre": m, "mre_se": se, "cov": float(cov.mean()), "width": float(np.nanmean(w)),
                          "pct": pct(fm.mean()), "bias": signed_bias(Y, sel), "kind": "det"}
        # --- k-means: seed-dependent, 5 seeds
        km_mre, km_cov, km_w, km_bias = [], [], [], []
        for seed in range(KMEANS_SEEDS):
            sel = TEXT_METHODS["k_means"](k=k, seed=seed).fit(X, labels).ranking_
            km_mre.append(fold_mres(Y, folds, labels, sel).mean())
            cov, w = intervals(Y, sel)
            km_cov.append(cov.mean())
            km_w.append(np.nanmean(w))
            km_bias.append(signed_bias(Y, sel))
        rows[f"k-means ({KMEANS_SEEDS} seeds)"] = {
            "mre": float(np.mean(km_mre)), "mre_std": float(np.std(km_mre, ddof=1)),
            "mre_min": float(np.min(km_mre)), "mre_max": float(np.max(km_mre)),
            "cov": float(np.mean(km_cov)), "cov_min": float(np.min(km_cov)), "cov_max": float(np.max(km_cov)),
            "width": float(np.mean(km_w)), "pct": pct(float(np.mean(km_mre))),
            "bias": float(np.mean(km_bias)), "kind": "seeds"}
        # --- FL with alpha tuned on the calibration folds, evaluated on the held-out fold
        tuned_mre, alphas, tuned_cov, tuned_w, tuned_bias = [], [], [], [], []
        for i, test in enumerate(folds):
            calib = np.concatenate([f for j, f in enumerate(folds) if j != i])
            alpha, _ = tune_alpha(X, labels, k, Y[calib], CAPS, grid=DEFAULT_GRID)
            sel = TEXT_METHODS["facility_location"](k=k, alpha=alpha).fit(X, labels).ranking_
            tuned_mre.append(coreset_errors(Y[test], labels, CAPS, sel)["mre"])
            cov, w = intervals(Y[test], sel)
            tuned_cov.append(cov)
            tuned_w.append(w)
            tuned_bias.append(signed_bias(Y[test], sel))
            alphas.append(alpha)
        m, se = mean_se(np.array(tuned_mre))
        rows["FL, alpha tuned on calibration folds"] = {
            "mre": m, "mre_se": se, "cov": float(np.concatenate(tuned_cov).mean()),
            "width": float(np.nanmean(np.concatenate(tuned_w))), "pct": pct(m), "alphas": alphas,
            "bias": float(np.mean(tuned_bias)), "kind": "det"}
        res["k"][k] = rows
        print(f"k={k} done in {time.perf_counter() - t_k:.1f}s", flush=True)
    res["seconds"] = time.perf_counter() - t_start
    return res


ORDER = ["FL, alpha = 1 (paper default)", "FL, alpha tuned on calibration folds", "random (20 seeds)",
         "DPP-Cov", "DPP-Cos", "DPP-Cov-MI", "k-center", f"k-means ({KMEANS_SEEDS} seeds)",
         f"random ({RANDOM_REFERENCE_DRAWS} draws, reference)"]


def fmt_mre(r: dict[str, Any]) -> str:
    if r["kind"] == "det":
        return f"{r['mre']:.4f} ± {r['mre_se']:.4f}"
    return f"{r['mre']:.4f} (std {r['mre_std']:.4f}; {r['mre_min']:.4f}–{r['mre_max']:.4f})"


def markdown(res: dict[str, Any], command: str) -> str:
    e = res["emb"]
    L = [
        f"{START}: written by `{command}` -->",
        "## Text coresets on real scores: fidelity (MRE) and interval coverage — AlpacaEval 1",
        "",
        f"Data: `shared/data/{DATASET}` ({res['n_models']} models x {res['n_items']} items, scores 0 / 0.5 / 1, "
        f"{res['n_missing']} missing cells), read in place. It is the only shared score matrix with item text "
        "(`gsm8k_text` has text but no scores; `helm_lite_*`, `openllm_v2_*` have scores but no text). "
        "Item text exactly as the service builds it (`item_text(prompt, target, fields, embedding_fields=[])`: "
        "the instruction, then the GPT-4 reference answer), embedded with the packaged all-MiniLM-L6-v2 "
        f"({e['truncated']} of {res['n_items']} texts exceed its {e['max_seq_length']}-token limit and are cut, "
        "so mostly the instruction and the start of the answer are seen). Embeddings are cached in "
        f"`/tmp/evalplan_text_fidelity_<sha256 of model + text hashes>.npz` (this run: cache {e['cache'].split(' ')[0].rstrip(',')}).",
        "",
        "Protocol (paper §3.2, §4.1): one benchmark, so Cap-MRE (eq. 4) equals MRE (eq. 5) and only MRE is shown. "
        "A model's true score is its mean over its observed items, its coreset estimate the mean over its observed "
        f"coreset items. Models are split once (seed {FOLD_SEED}) into 3 folds of {'/'.join(map(str, res['fold_sizes']))}; "
        "MRE is computed on each held-out fold and averaged. *FL tuned*: `tune_alpha` (grid "
        f"{', '.join(f'{a:g}' for a in DEFAULT_GRID)}; calibration missing cells filled with the model's mean) on the "
        "two other folds, evaluated on the held-out one. Deterministic methods: mean ± SE over the 3 folds "
        "(this SE reflects which models are held out, not the luck of the coreset: one greedy coreset is one draw). "
        f"Random: mean over 20 seeds of the fold-averaged MRE, with its std and min–max; a {RANDOM_REFERENCE_DRAWS}-draw "
        f"reference gives the percentile of each method among random coresets. k-means: {KMEANS_SEEDS} seeds. "
        "(`stratified_random` is left out: with a single benchmark it has the same distribution as random.) "
        "*pct vs random* = share of the random draws with an MRE at least as low (small = better than random). "
        "*bias* = mean over models of (estimate − truth): a greedy coreset's items are shared by all models, so "
        "an offset in their difficulty shifts every model the same way and does not average out over models.",
        "",
        "### MRE (lower is better)",
        "",
        "| method | " + " | ".join(f"k = {k}" for k in KS) + " |",
        "|---|" + "---|" * len(KS),
    ]
    for name in ORDER:
        L.append(f"| {name} | " + " | ".join(fmt_mre(res["k"][k][name]) for k in KS) + " |")
    L += ["", "### Against random, and shared bias", "",
          "| method | " + " | ".join(f"k = {k}: pct vs random / bias" for k in KS) + " |",
          "|---|" + "---|" * len(KS)]
    for name in ORDER:
        r0 = res["k"][KS[0]][name]
        if "pct" not in r0:
            continue
        L.append(f"| {name} | " + " | ".join(
            f"{res['k'][k][name]['pct']:.0%} / {res['k'][k][name]['bias']:+.4f}" for k in KS) + " |")
    tuned = " ; ".join(f"k = {k}: " + ", ".join(f"{a:g}" for a in res['k'][k]['FL, alpha tuned on calibration folds']['alphas'])
                       for k in KS)
    q = " ; ".join(f"k = {k}: {', '.join(f'{v:.4f}' for v in res['k'][k][ORDER[-1]]['mre_q'])}" for k in KS)
    L += ["", f"Alphas chosen per fold: {tuned}. Random MRE 10% / 50% / 90% quantiles ({RANDOM_REFERENCE_DRAWS} draws): {q}.",
          "", "### 95% interval coverage of `estimate_from_coreset` (real coverage, all 53 models)", "",
          "Called as `POST /v1/coresets/{id}/predict` calls it: N = 805, range [0, 1], not binary (sample variance with "
          "finite-population correction, normal interval). The interval assumes the coreset is a simple random sample; "
          "greedy coresets (FL, DPP, k-center, k-means) are not, so their coverage carries no guarantee and is shown as measured. "
          "Cells: coverage (fraction of models whose true score lies in the interval) / mean interval width; "
          "random and k-means: mean over seeds [min–max].", "",
          "| method | " + " | ".join(f"k = {k}" for k in KS) + " |", "|---|" + "---|" * len(KS)]
    for name in ORDER:
        cells = []
        for k in KS:
            r = res["k"][k][name]
            extra = f" [{r['cov_min']:.0%}–{r['cov_max']:.0%}]" if "cov_min" in r else ""
            cells.append(f"{r['cov']:.1%}{extra} / {r['width']:.3f}")
        L.append(f"| {name} | " + " | ".join(cells) + " |")
    L += ["", f"Embedding-space signal: leave-one-out R² of an item's mean score (over the 53 models) predicted by the mean "
          f"of its 10 nearest neighbours in embedding space = {res['knn_r2']:.3f}.",
          "", f"Machine: 2 CPU cores, no GPU. Run time: {res['seconds']:.0f} s"
          + (f" (embedding {e['seconds']:.0f} s)" if e['seconds'] else " (embeddings from the cache)") + f". Command: `{command}`.",
          "", "**Interpretation.** " + interpretation(res), END]
    return "\n".join(L)


def interpretation(res: dict[str, Any]) -> str:
    """A short reading of the numbers, generated from them so that it matches every rerun."""
    fl, tuned = "FL, alpha = 1 (paper default)", "FL, alpha tuned on calibration folds"
    ref = f"random ({RANDOM_REFERENCE_DRAWS} draws, reference)"
    ks = "/".join(map(str, KS))

    def pcts(name: str) -> str:
        return "/".join(f"{res['k'][k][name]['pct']:.0%}" for k in KS)

    all_fl = [res["k"][k][n]["pct"] for k in KS for n in (fl, tuned)]
    if min(all_fl) >= 0.2:
        verdict = "does not beat random selection"
    elif max(all_fl) <= 0.2:
        verdict = "beats random selection"
    else:
        verdict = "is not consistently better than random selection"
    det = [n for n in ORDER if "pct" in res["k"][KS[0]][n]]
    best = "; ".join(f"k = {k}: {min(det, key=lambda n: res['k'][k][n]['mre'])}" for k in KS)
    swing = max(det, key=lambda n: max(res["k"][k][n]["pct"] for k in KS) - min(res["k"][k][n]["pct"] for k in KS))
    r2 = max(res["knn_r2"], 0.0)
    gain = 1 - math.sqrt(1 - min(r2, 0.999))
    bias_name, bias_k = max(((n, k) for n in det for k in KS), key=lambda t: abs(res["k"][t[1]][t[0]]["bias"]))
    cov_name, cov_k = min(((n, k) for n in det for k in KS), key=lambda t: res["k"][t[1]][t[0]]["cov"])
    covs = [res["k"][k][n]["cov"] for n in det for k in KS]
    alphas = "; ".join(f"k = {k}: " + ", ".join(f"{a:g}" for a in res["k"][k][tuned]["alphas"]) for k in KS)
    tuned_vs = ", ".join(f"{res['k'][k][tuned]['mre']:.3f} vs {res['k'][k][fl]['mre']:.3f}" for k in KS)
    return (
        f"On this single 805-item benchmark, facility location {verdict}: with alpha = 1 its MRE sits at the "
        f"{pcts(fl)} percentile of {RANDOM_REFERENCE_DRAWS} random coresets at k = {ks} (50% = a typical random draw, "
        f"small = better), with alpha tuned on calibration models at {pcts(tuned)}. Tuning is unstable (alphas chosen "
        f"per fold: {alphas}) and does not help consistently (tuned vs alpha = 1 MRE: {tuned_vs}). No embedding-based "
        f"selector is reliably better than random either (lowest MRE {best}); each deterministic method is one "
        f"coreset, so its rank is a single draw, not a trend ({swing} moves between the "
        f"{pcts(swing)} percentiles). Why: item difficulty carries little embedding structure here: an item's mean "
        f"score is predicted by its 10 nearest neighbours with R² = {res['knn_r2']:.2f}, so even a perfectly "
        f"representative coreset in embedding space could remove only about that share of the sampling variance "
        f"(about {gain:.0%} of the MRE, which scales like a standard deviation), less than the spread between random "
        f"draws. What remains is which items happen to be picked, and a greedy coreset picks the same items for every "
        f"model, so their difficulty offset shifts all estimates the same way (bias column; largest: "
        f"{res['k'][bias_k][bias_name]['bias']:+.3f} for {bias_name} at k = {bias_k}). The paper's advantage for FL "
        f"comes from a suite of 35 heterogeneous benchmarks and 5 capabilities, where coverage decides which "
        f"benchmarks are represented at all; inside one homogeneous instruction-following benchmark, embedded by a "
        f"small model that sees truncated texts ({res['emb']['truncated']} of {res['n_items']} cut at "
        f"{res['emb']['max_seq_length']} tokens), there is little to cover, and this result says nothing against FL on "
        f"multi-benchmark suites. Intervals: for random coresets the 95% interval covers "
        f"{'/'.join(format(res['k'][k][ref]['cov'], '.1%') for k in KS)} of the models on average over "
        f"{RANDOM_REFERENCE_DRAWS} draws (k = {ks}), close to nominal, but a single draw ranges from "
        f"{min(res['k'][k][ref]['cov_min'] for k in KS):.0%} to 100%: all models share one coreset, so their errors "
        f"are correlated and the 95% holds over coreset draws, not over the models of one coreset. Greedy coresets "
        f"have no such guarantee; measured coverage runs from {min(covs):.0%} ({cov_name}, k = {cov_k}) to "
        f"{max(covs):.0%}, with the lowest where the shared bias is large, while their widths are about random's "
        f"(the interval only sees the spread of the coreset scores). On a single benchmark like this one, a random "
        f"coreset with its interval is the defensible choice; an interval from a greedy coreset is a random-sample "
        f"approximation only."
    )


def write_section(path: Path, section: str) -> None:
    write_marked_section(path, section, START, END)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, default=None, help="markdown file whose text-fidelity section is replaced")
    args = parser.parse_args()
    res = run()
    command = "HF_HUB_OFFLINE=1 python -m bench.coresets.fidelity_text_coresets --write docs/RESULTS.md"
    section = markdown(res, command)
    print(section)
    json_path = Path("/tmp/evalplan_text_fidelity_results.json")
    json_path.write_text(json.dumps(res, indent=1, default=float))
    print(f"raw results: {json_path}", file=sys.stderr)
    if args.write:
        write_section(args.write, section)


if __name__ == "__main__":
    main()
