"""Benchmark-level subset selection on real leaderboards (paper 000 §4.4, Figs. 4-5).

Data (read in place from EVALPLAN_DATA_DIR, default ../shared/data relative to the repo root):
``mmlu_leaderboard_summary`` (82 models x 57 subjects) and ``mteb_leaderboard_summary``
(83 models x 7 task-family averages). For each of 20 seeded 70/30 train/test model splits:
standardize with the train mean/std, Σ̂ = train correlation matrix, select k benchmarks with
facility location (on max(Σ̂, 0)), greedy entropy and greedy mutual information (on Σ̂ + 1e-3 I),
impute the test models' unselected benchmarks by eq. 8 and report test R² (eq. 9, standardized
space) and the residual variance fraction RV (eqs. 10-11, on the train Σ̂). A random-subset
reference (10 random subsets per split) is added.

Usage: python -m bench.coresets.benchmark_selection_bench [--splits 20] [--write docs/RESULTS.md]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import numpy as np

from bench.common.markdown_sections import write_section
from bench.common.shared_data import data_dir
from evalplan.core.benchmarks.benchmark_selection import BenchmarkSelector, residual_variance_fraction, test_r2

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- benchmark-selection -->", "<!-- /benchmark-selection -->"
DATASETS = (("mmlu_leaderboard_summary", "MMLU", 10), ("mteb_leaderboard_summary", "MTEB", 6))
METHODS = (
    ("facility_location", "FL on max(Σ̂, 0)", {}),
    ("entropy", "greedy entropy (DPP-Cov)", {}),
    ("mutual_information", "greedy MI (DPP-Cov-MI)", {}),
    ("entropy", "greedy entropy, ridge 1e-1", {"ridge": 1e-1}),
    ("mutual_information", "greedy MI, ridge 1e-1", {"ridge": 1e-1}),
)
N_RANDOM = 10


def load(name: str) -> tuple[list[str], np.ndarray]:
    path = data_dir() / name / "scores.csv"
    with path.open() as fh:
        header = fh.readline().rstrip("\n").split(",")
    S = np.genfromtxt(path, delimiter=",", skip_header=1, dtype=float)[:, 1:]
    # header fields may contain commas inside quotes (MTEB: no; MMLU: no) -- check the shape
    assert S.shape[1] == len(header) - 1, (S.shape, len(header))
    return header[1:], S


def run_dataset(S: np.ndarray, kmax: int, splits: int) -> dict:
    M, B = S.shape
    n_train = int(round(0.7 * M))
    labels = [m[1] for m in METHODS] + [f"random ({N_RANDOM} subsets / split)"]
    r2 = {lab: np.zeros((splits, kmax)) for lab in labels}
    rv = {lab: np.zeros((splits, kmax)) for lab in labels}
    firsts = {lab: Counter() for lab in labels[:-1]}
    for s in range(splits):
        rng = np.random.default_rng(1000 + s)
        perm = rng.permutation(M)
        tr, te = perm[:n_train], perm[n_train:]
        S_tr, S_te = S[tr], S[te]
        for method, lab, kw in METHODS:
            sel = BenchmarkSelector(k=kmax, method=method, seed=s, **kw).fit(S_tr)
            firsts[lab][int(sel.ranking_[0])] += 1
            for k in range(1, kmax + 1):
                A = sel.ranking_[:k]
                pred = sel.predict(S_te[:, A], k=k)
                r2[lab][s, k - 1] = test_r2(S_te, pred, sel.mean_, A, scale=sel.scale_)
                rv[lab][s, k - 1] = residual_variance_fraction(sel.cov_, A)
        ref = BenchmarkSelector(k=1).fit(S_tr)  # only for mean_/scale_/cov_
        lab = labels[-1]
        for k in range(1, kmax + 1):
            vals_r2, vals_rv = [], []
            for _ in range(N_RANDOM):
                A = rng.choice(B, size=k, replace=False)
                ref.ranking_ = A
                ref._imputers = {}
                pred = ref.predict(S_te[:, A], k=k)
                vals_r2.append(test_r2(S_te, pred, ref.mean_, A, scale=ref.scale_))
                vals_rv.append(residual_variance_fraction(ref.cov_, A))
            r2[lab][s, k - 1] = np.mean(vals_r2)
            rv[lab][s, k - 1] = np.mean(vals_rv)
    return {"M": M, "B": B, "n_train": n_train, "labels": labels, "r2": r2, "rv": rv, "firsts": firsts}


def table(res: dict, key: str, kmax: int, higher_better: bool) -> str:
    lines = ["| method | " + " | ".join(f"k = {k}" for k in range(1, kmax + 1)) + " |",
             "|---|" + "---|" * kmax]
    main = res["labels"][:3]
    means = {lab: res[key][lab].mean(axis=0) for lab in res["labels"]}
    best = [(max if higher_better else min)(means[lab][k] for lab in main) for k in range(kmax)]
    n = res[key][main[0]].shape[0]
    for lab in res["labels"]:
        m, se = means[lab], res[key][lab].std(axis=0, ddof=1) / np.sqrt(n)
        cells = []
        for k in range(kmax):
            c = f"{m[k]:.3f} ± {se[k]:.3f}"
            cells.append(f"**{c}**" if lab in main and np.isclose(m[k], best[k]) else c)
        lines.append(f"| {lab} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def first_picks(res: dict, names: list[str]) -> str:
    parts = []
    for lab in res["labels"][:3]:
        c = res["firsts"][lab]
        top = ", ".join(f"{names[j]} ({n})" for j, n in c.most_common(3))
        parts.append(f"{lab}: {top}; {len(c)} distinct")
    return "; ".join(f"*{p.split(':')[0]}*:{p.split(':', 1)[1]}" for p in parts)


def render(results: dict, splits: int, seconds: float) -> str:
    out = [
        START,
        "## Benchmark-level subset selection (paper 000 §4.4): FL vs greedy entropy vs greedy MI",
        "",
        f"Written by `python -m bench.coresets.benchmark_selection_bench --write docs/RESULTS.md` "
        f"({splits} splits, {seconds:.0f} s on 2 CPU cores). Code: `src/evalplan/core/benchmarks/benchmark_selection.py`.",
        "",
        "Protocol: models split 70/30 into train/test ({splits} seeded random splits, the same for all methods). "
        "Each benchmark is standardized with its *train* mean and std (ddof 1); Σ̂ is the covariance of the "
        "standardized train scores, i.e. the train correlation matrix, used for selection, imputation and RV. "
        "FL maximizes Σ_i max_{j∈A} Σ⁺_ij on Σ⁺ = max(Σ̂, 0); greedy entropy maximizes ½ log det Σ_AA and "
        "greedy MI maximizes I(A; Ā) = ½ log det Σ_AA + ½ log det Σ_ĀĀ − ½ log det Σ, both on Σ̂ + λI "
        "(λ = 1e-3 by default; needed because on MMLU 57 train models give a rank-≤56 57 x 57 Σ̂, so "
        "log det Σ_ĀĀ would be −∞; rows with λ = 1e-1 show the sensitivity). Ties (the first entropy pick: "
        "every σ²(v | ∅) = 1 on a correlation matrix) are broken at random with the split's seed. "
        "Test models' unselected benchmarks are imputed by the Gaussian conditional mean (eq. 8, unregularized Σ̂). "
        "*Test R²* is eq. 9 in standardized space (x̄_j = train mean, pooled over test models and unselected "
        "benchmarks; the constant predictor x̄ scores 0). *RV* is tr(Σ̂_Ā|A) / tr(Σ̂) on the train Σ̂ (eqs. 10-11). "
        "Cells: mean ± SE over splits (splits share models, so the SE understates the uncertainty); bold = best "
        "of the three paper methods. The random row averages 10 random k-subsets per split.".replace("{splits}", str(splits)),
        "",
    ]
    for (name, short, kmax), (res, names) in results.items():
        out += [
            f"### {short} (`{name}`: {res['M']} models x {res['B']} benchmarks; {res['n_train']} train / "
            f"{res['M'] - res['n_train']} test models)",
            "",
            "Test R² (higher is better)",
            "",
            table(res, "r2", kmax, True),
            "",
            "Residual variance fraction RV (lower is better; on the train Σ̂)",
            "",
            table(res, "rv", kmax, False),
            "",
            f"First pick over the {splits} splits (benchmark (count)): {first_picks(res, names)}.",
            "",
        ]
    out.append("### Interpretation")
    out.append("")
    out.append(interpretation(results))
    out.append(END)
    return "\n".join(out)


def interpretation(results: dict) -> str:
    # filled in from the numbers so the text stays true if the bench is rerun
    lines = []
    for (_name, short, kmax), (res, _) in results.items():
        lab = res["labels"]
        m = {l: res["r2"][l].mean(axis=0) for l in lab}
        v = {l: res["rv"][l].mean(axis=0) for l in lab}
        fl, en, mi, rnd = lab[0], lab[1], lab[2], lab[-1]
        wins_r2 = sum(m[fl][k] >= max(m[en][k], m[mi][k]) - 1e-12 for k in range(kmax))
        wins_rv = sum(v[fl][k] <= min(v[en][k], v[mi][k]) + 1e-12 for k in range(kmax))
        d_mi = res["r2"][fl] - res["r2"][mi]
        d_en = res["r2"][fl] - res["r2"][en]
        n = d_mi.shape[0]
        def fmt(d: np.ndarray, n: int = n) -> str:
            return ", ".join(f"{a:+.3f} ± {b:.3f}" for a, b in zip(d.mean(0), d.std(0, ddof=1) / np.sqrt(n)))
        lines.append(
            f"- **{short}**, paired test-R² differences (mean ± SE over splits, k = 1..{kmax}): "
            f"FL − greedy MI: {fmt(d_mi)}; FL − greedy entropy: {fmt(d_en)}."
        )
        lines.append(
            f"- **{short}**: FL R² {m[fl][0]:.3f} at k = 1, {m[fl][min(3, kmax - 1)]:.3f} at k = {min(4, kmax)}, "
            f"{m[fl][-1]:.3f} at k = {kmax}; greedy entropy {m[en][0]:.3f} / {m[en][min(3, kmax - 1)]:.3f} / "
            f"{m[en][-1]:.3f}; greedy MI {m[mi][0]:.3f} / {m[mi][min(3, kmax - 1)]:.3f} / {m[mi][-1]:.3f}; "
            f"random {m[rnd][0]:.3f} / {m[rnd][min(3, kmax - 1)]:.3f} / {m[rnd][-1]:.3f}. "
            f"FL has the best mean test R² at {wins_r2} of {kmax} budgets and the lowest RV at {wins_rv} of {kmax}."
        )
    lines += [
        "",
        "Reading (text written for the run above; the numbers in the bullets are regenerated on each run):",
        "",
        "- **We do not reproduce the paper's MMLU level.** Paper 000 Fig. 4 reports FL R² ≈ 0.86 at k = 1 and "
        "≥ 0.9 by k = 4 on an MMLU table of 5451 models; here FL gives ≈ 0.34 at k = 1 and ≈ 0.37 at k = 4, and "
        "no method passes 0.48 by k = 10. The data explain most of this: `mmlu_leaderboard_summary` holds only "
        "82 models whose mean accuracy lies in a narrow band (0.70–0.79, a top-of-leaderboard slice), the first "
        "principal component carries only 48% of the correlation matrix (mean off-diagonal correlation 0.43), so a "
        "large share of each subject's between-model variance is subject-specific or sampling noise that no other "
        "subject predicts. With 57 train models, the 57 x 57 Σ̂ is rank-deficient and noisy: the in-sample RV keeps "
        "falling (≈ 0.22 at k = 10) while test R² plateaus at ≈ 0.43, i.e. the eq.-8 regression starts to "
        "overfit. A 5451-model table spanning random-to-frontier ability has a much stronger common factor.",
        "- **k = 1 agrees with the paper qualitatively:** FL's first pick is a representative subject (elementary "
        "mathematics / professional psychology) and beats greedy entropy, whose first pick is a pure tie on a "
        "correlation matrix (all σ² = 1; 18 distinct first picks over 20 splits) and scores at random-subset level "
        "-- the paper's 'first element can be arbitrarily bad'.",
        "- **From k = 2 on, FL does not dominate here.** On MMLU greedy MI is ahead of FL by ≈ 0.05 test R² at "
        "k = 3–5 (≈ 2–2.5 paired SE; the SE over overlapping splits is optimistic) and level with it (within 1 SE) "
        "at k = 2 and 6–10, with a slightly lower RV throughout k ≥ 2; "
        "greedy MI with λ = 1e-1 is better still, but λ was not tuned on held-out data, so that row is a "
        "sensitivity check, not a result. On MTEB (7 task-family averages, not the paper's 56 sub-benchmarks; at "
        "k = 6 a single benchmark is imputed) FL and greedy entropy are level within noise for k ≥ 2 and clearly "
        "beat random subsets from k = 3, while greedy MI is erratic: best at k = 1 and 4, but at or below random "
        "at k = 2–3 (FL − MI = +0.17 R² at k = 3). The paper's claim 'FL best across the entire range' is therefore not "
        "confirmed on these small tables; it is not refuted either, because both tables are far smaller and "
        "narrower than the paper's.",
        "- RV is computed on the train Σ̂ (in-sample) and is optimistic relative to test R².",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=20)
    parser.add_argument("--write", type=Path, default=None, help="markdown file whose benchmark-selection section is replaced")
    args = parser.parse_args()
    t0 = time.perf_counter()
    results = {}
    for name, short, kmax in DATASETS:
        names, S = load(name)
        results[(name, short, kmax)] = (run_dataset(S, kmax, args.splits), names)
    section = render(results, args.splits, time.perf_counter() - t0)
    print(section)
    if args.write:
        write_section(args.write, section, START, END)


if __name__ == "__main__":
    main()
