"""RepCore estimation accuracy on SYNTHETIC suites (paper 003 §3: Spearman and MAE of the
full-benchmark estimate over held-out target models; Agreement as in Appendix C.1).

Per seed: ``make_synthetic_suite(n_items, n_sources=10, n_targets, seed)`` (SYNTHETIC data,
see ``src/evalplan/core/repcore/synthetic.py``), ``AlignmentTrainer(seed=seed)`` at its defaults on the
10 sources, then for each K in {10, 20, 30, 40, 50}:

* ``RepCore``: consensus embeddings (eq. 3) -> ``SphericalKMeansAnchors(K)`` -> ridge eq. 8;
* ``0/1 k-means + ridge``: the Table 4 ablation, ``SphericalKMeansAnchors(K,
  input="correctness")`` on the items x sources 0/1 matrix -> the same ridge eq. 8;
* ``AnchorPoints-style``: the same 0/1 k-means anchors, estimate = cluster-size-weighted mean
  of the target's anchor correctness (the AnchorPoints estimator, with k-means instead of
  k-medoids on correlations);
* ``Random + ridge``: uniform random K items -> the same ridge eq. 8 (mean over ``--draws``);
* ``Random (coreset mean)``: the same random items, estimate = the target's mean on them (the
  paper's Random baseline, which "does not extrapolate");
* diagnostics (not methods): ``k-means on true latent`` clusters the generator's true item
  factors [difficulty, v_i] (z-scored, Euclidean) -> ridge: what a perfect item representation
  could give with this selector and extrapolator; ``RepCore, no normalization`` clusters the
  unnormalized consensus mean with Euclidean k-means (eq. 3 without the L2 step).

Spearman and MAE are over the held-out targets of one seed, then averaged over seeds (sd over
seeds alongside). Agreement is the mean over targets of the item-level agreement of
``item_predictions_`` (threshold 0.5) with the target's 0/1 vector.

Usage: python -m bench.coresets.repcore_accuracy_bench [--seeds 5] [--items 2000] [--targets 40]
                                              [--draws 20] [--write docs/RESULTS.md]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

from bench.common.markdown_sections import write_section as write_marked_section
from evalplan.core.repcore.alignment import AlignmentTrainer
from evalplan.core.repcore.anchors import SphericalKMeansAnchors, consensus_embeddings
from evalplan.core.repcore.extrapolation import RepCoreExtrapolator, agreement, source_mean_correctness
from evalplan.core.repcore.synthetic import make_synthetic_suite

START, END = "<!-- repcore-accuracy -->", "<!-- /repcore-accuracy -->"
KS = (10, 20, 30, 40, 50)
METHODS = ("RepCore", "0/1 k-means + ridge", "AnchorPoints-style", "Random + ridge",
           "Random (coreset mean)", "k-means on true latent (diagnostic)",
           "RepCore, no normalization (diagnostic)")

INTERPRETATION = (  # written by hand after the 5-seed run of these defaults
    "**Interpretation (honest).** On this SYNTHETIC suite RepCore does not reliably beat the Table 4 ablation or random selection: every selector lies within about one seed-sd of the others (Spearman sd over seeds 0.02-0.10). RepCore is ahead at K = 50 (ρ 0.943 vs 0.927 for 0/1 k-means, MAE 0.045 vs 0.049) and on MAE at K >= 30, behind at K = 10-20; the paper's gaps (Table 12: +0.01 to +0.03 in ρ) are of the same size as our seed noise, so 5 seeds cannot confirm or refute them. Why the hidden states' extra signal does not show up: (1) the ceiling is low here: clustering the generator's *true* latent factors (diagnostic row) gains only 0.01-0.03 in ρ over random, because the eq. 8 extrapolator sees each item only through x_i and each target only through K binary anchor outcomes, whose binomial noise dominates; (2) the alignment bottleneck keeps what predicts the 10 sources' correctness: the consensus embedding carries difficulty (R² 0.81) and x_i (R² 0.60) but recovers the task clusters no better than the 0/1 vectors (ARI 0.09 vs 0.14), so the cluster structure that the raw states contain is mostly lost by the correctness-supervised projection, and L2 normalization (eq. 3) removes magnitude (the unnormalized diagnostic is mixed: better at K = 20-30, worse at K = 10 and 40). Alignment test AUC 0.86 here (paper: about 0.9 on real data; the generator's Bernoulli noise caps it near 0.88). These are properties of this generator, not evidence about real LLM hidden states."
)


def write_section(path: Path, section: str) -> None:
    write_marked_section(path, section, START, END, new_file="")


def ridge_eval(anchors: np.ndarray, Yt: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, float]:
    est, agr = [], []
    for y in Yt:
        ext = RepCoreExtrapolator().fit(anchors, y[anchors], x)
        est.append(ext.estimate_)
        agr.append(agreement(ext.item_predictions_, y))
    return np.array(est), float(np.mean(agr))


def scores(est: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    return float(spearmanr(est, truth)[0]), float(np.mean(np.abs(est - truth)))


def run_seed(seed: int, n_items: int, n_targets: int, draws: int) -> tuple[dict, dict]:
    s = make_synthetic_suite(n_items=n_items, n_sources=10, n_targets=n_targets, seed=seed)
    truth = s.target_scores
    Yt = s.target_correctness
    x = source_mean_correctness(s.source_correctness)
    t0 = time.perf_counter()
    tr = AlignmentTrainer(seed=seed).fit(s.source_states, s.source_correctness)
    info = {"auc": tr.test_auc_, "epochs": tr.n_epochs_, "fit_s": time.perf_counter() - t0}
    e = consensus_embeddings(tr.embeddings_)
    e_raw = np.mean(np.stack(tr.embeddings_), axis=0)
    latent = np.concatenate([s.difficulty[:, None], s.item_factors], axis=1)
    latent = (latent - latent.mean(0)) / latent.std(0)
    Ysrc = s.source_correctness.T
    rng = np.random.default_rng(10_000 + seed)
    out: dict = {}
    for K in KS:
        r: dict = {}
        a = SphericalKMeansAnchors(K, seed=seed).fit(e).ranking_
        est, ag = ridge_eval(a, Yt, x); r["RepCore"] = (*scores(est, truth), ag)
        km01 = SphericalKMeansAnchors(K, seed=seed, input="correctness").fit(Ysrc)
        est, ag = ridge_eval(km01.ranking_, Yt, x); r["0/1 k-means + ridge"] = (*scores(est, truth), ag)
        w = km01.weights_ / km01.weights_.sum()
        est = Yt[:, km01.ranking_] @ w
        r["AnchorPoints-style"] = (*scores(est, truth), np.nan)
        rr, rm = [], []
        for _ in range(draws):
            a = rng.choice(s.n_items, K, replace=False)
            est, ag = ridge_eval(a, Yt, x); rr.append((*scores(est, truth), ag))
            rm.append((*scores(Yt[:, a].mean(1), truth), np.nan))
        r["Random + ridge"] = tuple(np.mean(rr, axis=0))
        r["Random (coreset mean)"] = tuple(np.nanmean(rm, axis=0)) if draws else (np.nan,) * 3
        a = SphericalKMeansAnchors(K, seed=seed, input="correctness").fit(latent).ranking_
        est, ag = ridge_eval(a, Yt, x); r["k-means on true latent (diagnostic)"] = (*scores(est, truth), ag)
        a = SphericalKMeansAnchors(K, seed=seed, input="correctness").fit(e_raw).ranking_
        est, ag = ridge_eval(a, Yt, x); r["RepCore, no normalization (diagnostic)"] = (*scores(est, truth), ag)
        out[K] = r
    # how much item structure the consensus embedding carries (diagnostics)
    from sklearn.linear_model import LinearRegression
    from sklearn.metrics import adjusted_rand_score
    info["r2_difficulty_from_e"] = LinearRegression().fit(e, s.difficulty).score(e, s.difficulty)
    info["r2_x_from_e"] = LinearRegression().fit(e, x).score(e, x)
    info["ari_e_clusters"] = adjusted_rand_score(
        s.clusters, SphericalKMeansAnchors(8, seed=seed).fit(e).labels_)
    info["ari_01_clusters"] = adjusted_rand_score(
        s.clusters, SphericalKMeansAnchors(8, seed=seed, input="correctness").fit(Ysrc).labels_)
    return out, info


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--targets", type=int, default=40)
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--write", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    per_seed, infos = [], []
    for seed in range(args.seeds):
        o, info = run_seed(seed, args.items, args.targets, args.draws)
        per_seed.append(o); infos.append(info)
        print(f"seed {seed}: AUC {info['auc']:.3f}, {info['epochs']} epochs, "
              f"{info['fit_s']:.1f} s; " + "; ".join(
                  f"K={K} " + ", ".join(f"{m[:12]} {o[K][m][0]:.3f}/{o[K][m][1]:.4f}"
                                        for m in METHODS[:4]) for K in (10, 30)), flush=True)
    elapsed = time.perf_counter() - t0

    def cell(m: str, K: int, j: int, fmt: str) -> str:
        v = np.array([o[K][m][j] for o in per_seed], dtype=float)
        if np.all(np.isnan(v)):
            return "-"
        return f"{np.nanmean(v):{fmt}} ± {np.nanstd(v):{fmt}}"

    lines = [
        START,
        "<!-- written by `python -m bench.coresets.repcore_accuracy_bench --write docs/RESULTS.md` -->",
        "### RepCore (paper 003) on SYNTHETIC suites: Spearman / MAE / Agreement vs K",
        "",
        f"Data: SYNTHETIC (`make_synthetic_suite`: 8 task clusters, 16-d latent item factors + difficulty, "
        f"logistic correctness, each source sees the latent factors through its own random projection of "
        f"width 64-256 plus noise 0.5), {args.items:,} items, 10 source models, {args.targets} held-out target "
        f"models, {args.seeds} seeds (each seed: new suite, new alignment training, new k-means seeds). "
        f"Random: {args.draws} draws per seed and K, metrics averaged over draws. Ridge alpha 1.0 "
        "(`RepCoreExtrapolator` default; the paper gives none). Values: mean ± sd over seeds; Spearman and MAE "
        "over the targets of one seed (§3), Agreement = item-level match of thresholded predictions (App. C.1). "
        f"Alignment test AUC (20% test items): {np.mean([i['auc'] for i in infos]):.3f} mean "
        f"({', '.join(format(i['auc'], '.3f') for i in infos)}); epochs run "
        f"{', '.join(str(i['epochs']) for i in infos)}. Machine: {os.cpu_count()} CPU cores, torch "
        f"{torch.__version__}, device cpu; run time {elapsed:.0f} s.",
        "",
    ]
    for j, (name, fmt) in enumerate((("Spearman ρ (↑)", ".3f"), ("MAE (↓)", ".4f"), ("Agreement (↑)", ".3f"))):
        lines += [f"**{name}**", "", "| method | " + " | ".join(f"K={K}" for K in KS) + " |",
                  "|---|" + "---|" * len(KS)]
        for m in METHODS:
            lines.append(f"| {m} | " + " | ".join(cell(m, K, j, fmt) for K in KS) + " |")
        lines.append("")
    lines += [
        "Item-structure diagnostics (mean over seeds): R² of difficulty from the consensus embedding "
        f"{np.mean([i['r2_difficulty_from_e'] for i in infos]):.2f}, R² of x_i (mean source correctness) "
        f"from it {np.mean([i['r2_x_from_e'] for i in infos]):.2f}; adjusted Rand index of 8-cluster "
        f"k-means vs the true task clusters: consensus embedding {np.mean([i['ari_e_clusters'] for i in infos]):.2f}, "
        f"0/1 vectors {np.mean([i['ari_01_clusters'] for i in infos]):.2f}.",
        "",
    ]
    if INTERPRETATION:
        lines += [INTERPRETATION, ""]
    lines.append(END)
    section = "\n".join(lines)
    print(section)
    if args.write:
        write_section(args.write, section)


if __name__ == "__main__":
    main()
