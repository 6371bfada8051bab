"""Driver run by bench/sessions/faq_side_by_side.py: FAQ's own code (Wu, Nair, Candès 2026, "Efficiently
Evaluating LLM Performance with Statistical Guarantees", github skbwu/efficiently-evaluating-llms) on one
(data set, regime) piece passed as an .npz. Nothing of FAQ is in the project: its folder is given by
``--faq-path`` and its scripts are run from there, unmodified.

``python faq_driver.py --faq-path DIR IN.npz OUT.json WORKDIR``

Steps, each with the authors' code:

1. factor model: their ``factor_models_final.py`` is run as a script (``runpy``) in WORKDIR, laid out as
   their repository expects (``data/processed/<piece>/M1_nfobs=None_p=1.0.csv`` = the reference matrix,
   ``logs/factor_model_selected_settings.csv`` = one row with K and lambda); it writes
   ``factor_models/final/<piece>/{U,V}_nfobs=None_p=1.0.pt`` (2000 epochs of AdamW on the logistic loss).
   With ``cv`` in the input, K and lambda are first chosen as they chose them: their
   ``assemble_sim_df`` (``factor_models_cv.py``, 5-fold entrywise CV over the grid ``Ks x lmbdas``) writes
   ``logs/factor_model_cv_logs.csv`` and their ``analyzing_factor_models.py`` (one-standard-error rule)
   writes the selected setting.
2. FAQ: the function ``trial`` of their ``faq_final.py`` (active sampling from a uniform-floored mixture of
   their oracle and active-learning scores, online Bayesian update of the target's factor, AIPW
   estimate and its 95% interval), called once per (budget, seed) on all targets at once, with
   ``MU0, SIGMA0 = U.mean(0), cov(U)`` as they set them. ``trial`` returns only the mean width and the
   coverage over targets; the per-target estimate and interval are read from its frame when it
   returns (``sys.setprofile``), so their function runs exactly as published.

Only the module-level imports, ``device``/``ALPHA`` and the function definitions of their scripts are
executed for step 2 and the CV (their script bodies loop over their own data sets and read ``sys.argv``).

Output JSON: per budget and seed the per-target ``estimate``, ``lo``, ``hi``; the factor setting; and the
per-target variances of :func:`oracle` (our code; an oracle for FAQ's factor model, kept in the stored
pieces; the report's oracle is ``faq_side_by_side.perfect_probability_oracle``).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import runpy
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def load_defs(path: Path, names: tuple[str, ...] = ("device", "ALPHA")) -> dict[str, Any]:
    """Namespace with a script's top-level imports, the assignments of ``names`` and its functions."""
    tree = ast.parse(path.read_text(), filename=str(path))
    keep = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef)):
            keep.append(node)
        elif isinstance(node, ast.Assign):
            targets = [t for tgt in node.targets for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])]
            if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                keep.append(node)
    ns: dict[str, Any] = {"__name__": "faq_" + path.stem, "__file__": str(path)}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(path), "exec"), ns)
    return ns


def call_capturing(fn: Any, *args: Any) -> tuple[Any, dict[str, Any]]:
    """``fn(*args)`` and the local variables of its frame when it returns."""
    captured: dict[str, Any] = {}
    code = fn.__code__

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code is code:
            captured.update(frame.f_locals)

    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        out = fn(*args)
    finally:
        sys.setprofile(old)
    return out, captured


def write_m1(path: Path, R: np.ndarray) -> None:
    """Their matrix layout: three leading columns (dropped by ``.iloc[:, 3:]``), then the items."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        f.write("model,a,b," + ",".join(f"q{j}" for j in range(R.shape[1])) + "\n")
        for i, row in enumerate(R):
            f.write(f"m{i},0,0," + ",".join("" if np.isnan(v) else repr(float(v)) for v in row) + "\n")


def fit_factor_model(faq: Path, work: Path, name: str, R: np.ndarray, K: int, lmbda: float,
                     cv: dict[str, Any] | None) -> tuple[Any, Any, dict[str, Any]]:
    import pandas as pd
    import torch

    (work / "logs").mkdir(parents=True, exist_ok=True)
    (work / "factor_models" / "final" / name).mkdir(parents=True, exist_ok=True)
    write_m1(work / "data" / "processed" / name / "M1_nfobs=None_p=1.0.csv", R)
    cols = ["dataset", "n_full_obs", "mcar_obs_prob", "K", "lmbda", "split", "train_loss", "val_loss", "train_acc",
            "val_acc"]
    setting: dict[str, Any] = {"K": K, "lmbda": lmbda, "selected_by": "given"}
    old = os.getcwd()
    os.chdir(work)
    try:
        if cv:
            ns = load_defs(faq / "factor_models_cv.py")
            ns.update(Ks=list(cv["Ks"]), lmbdas=list(cv["lmbdas"]), MAX_EPOCHS=2000, columns=cols)
            df = ns["assemble_sim_df"](name, None, 1.0, 858)
            df.to_csv("logs/factor_model_cv_logs.csv", index=False)
            runpy.run_path(str(faq / "analyzing_factor_models.py"), run_name="__main__")
            sel = pd.read_csv("logs/factor_model_selected_settings.csv")
            setting = {"K": int(sel.K.iloc[0]), "lmbda": float(sel.lmbda.iloc[0]), "selected_by": "their CV",
                       "grid": {"Ks": list(cv["Ks"]), "lmbdas": list(cv["lmbdas"])}}
        else:
            pd.DataFrame([[name, np.nan, 1.0, K, lmbda, 0, 0, 0, 0, 0]], columns=cols).to_csv(
                "logs/factor_model_selected_settings.csv", index=False)
        runpy.run_path(str(faq / "factor_models_final.py"), run_name="__main__")
        U = torch.load(f"factor_models/final/{name}/U_nfobs=None_p=1.0.pt")
        V = torch.load(f"factor_models/final/{name}/V_nfobs=None_p=1.0.pt")
    finally:
        os.chdir(old)
    return U, V, setting


def _map_factor(z: np.ndarray, V: np.ndarray, mu0: np.ndarray, P0: np.ndarray) -> np.ndarray:
    """MAP of a target's factor given its scores ``z`` on items ``V`` (logistic, prior N(mu0, P0^-1))."""
    from scipy.special import expit

    u = mu0.copy()
    for _ in range(100):
        p = expit(V @ u)
        g = V.T @ (z - p) - P0 @ (u - mu0)
        H = (V * (p * (1 - p))[:, None]).T @ V + P0
        step = np.linalg.solve(H, g)
        u = u + step
        if np.max(np.abs(step)) < 1e-8:
            break
    return u


def oracle(T: np.ndarray, U: np.ndarray, V: np.ndarray, floor: float = 0.05) -> dict[str, list[float]]:
    """Per target (our code, for the report's oracle ESS): ``sigma2`` = the per-draw variance of uniform
    sampling with replacement; ``var_phi_sd`` = the per-draw variance of FAQ's AIPW term
    sum(p)/N + (z_I - p_I) / (N q_I) with a fixed design q = (1 - floor) sd / sum(sd) + floor / N,
    sd = sqrt(p (1 - p)), p = the factor model with the target's factor fitted on the target's own
    scores, cross-fitted on two halves of the items; ``var_phi_abs`` = the same with q proportional to the
    actual |z - p| (perfect per-item residual spreads: the best design for that prediction, up to the floor)."""
    from scipy.special import expit

    mu0 = U.mean(axis=0)
    P0 = np.linalg.inv(np.cov(U.T) + 1e-6 * np.eye(U.shape[1]))
    N = T.shape[1]
    halves = np.arange(N) % 2 == 0
    out: dict[str, list[float]] = {"sigma2": [], "var_phi_sd": [], "var_phi_abs": []}
    for z in T:
        p = np.empty(N)
        for h in (halves, ~halves):
            u = _map_factor(z[~h], V[~h], mu0, P0)
            p[h] = expit(V[h] @ u)
        r = z - p
        sd = np.sqrt(p * (1 - p))
        for key, w in (("var_phi_sd", sd), ("var_phi_abs", np.abs(r))):
            q = (1 - floor) * w / w.sum() + floor / N if w.sum() > 0 else np.full(N, 1.0 / N)
            out[key].append(float(np.sum(r ** 2 / q) / N ** 2 - (r.mean()) ** 2))
        out["sigma2"].append(float(np.var(z)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--faq-path", type=Path, required=True)
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("work", type=Path)
    a = ap.parse_args()
    faq = a.faq_path.resolve()
    z = np.load(a.src, allow_pickle=False)
    spec = json.loads(str(z["spec"]))
    R, T = z["R"], z["T"]
    import torch

    torch.set_num_threads(int(spec.get("threads", 1)))
    t0 = time.perf_counter()
    U, V, setting = fit_factor_model(faq, a.work, spec["name"], R, int(spec["K"]), float(spec["lmbda"]),
                                     spec.get("cv"))
    fit_s = time.perf_counter() - t0
    ns = load_defs(faq / "faq_final.py")
    trial, device = ns["trial"], "cpu"
    V = V.to(device)
    MU0, SIGMA0 = U.mean(axis=0), torch.cov(U.T)
    M2 = torch.tensor(T.astype(np.float32), device=device)
    N_NEW, N_QUESTIONS = M2.shape
    runs = []
    for b in spec["budgets"]:
        N_B = int(b["n"])
        beta0, rho, gamma, tau = (float(b[k]) for k in ("beta0", "rho", "gamma", "tau"))
        for seed in spec["seeds"]:
            t1 = time.perf_counter()
            (width, coverage), loc = call_capturing(trial, M2, V, MU0, SIGMA0, N_NEW, N_QUESTIONS, N_B, beta0, rho,
                                                    gamma, tau, int(seed), device, 0)
            runs.append({"n": N_B, "seed": int(seed), "beta0": beta0, "rho": rho, "gamma": gamma, "tau": tau,
                         "estimate": loc["thetahats_T"].flatten().tolist(), "lo": loc["lb"].flatten().tolist(),
                         "hi": loc["ub"].flatten().tolist(), "mean_width": float(width), "coverage": float(coverage),
                         "seconds": time.perf_counter() - t1})
    orc = oracle(T.astype(np.float64), U.numpy().astype(np.float64), V.numpy().astype(np.float64))
    a.out.write_text(json.dumps({"factor": setting, "fit_seconds": fit_s, "runs": runs, "oracle": orc}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
