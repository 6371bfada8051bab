"""Coreset fidelity (paper §3.2): predicted benchmark/capability/overall scores (eq. 3) and the
relative errors Cap-MRE (eq. 4) and MRE (eq. 5).

``Y`` is a models x items score matrix (NaN = missing, ignored in means), ``labels`` the benchmark
index of each item (``0..B-1``) and ``capabilities`` maps a benchmark index to its capability name.
A benchmark without selected (observed) items has no prediction and is excluded from every
average (eq. 3); a capability none of whose benchmarks is covered has no prediction and is left
out of Cap-MRE (``coreset_errors`` reports how many were covered). Relative errors divide by
``|true|``; models whose true score is 0 (undefined relative error) are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp


def _check_y_labels(Y: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim == 1:
        Y = Y[None, :]
    labels = np.asarray(labels)
    if Y.ndim != 2 or labels.ndim != 1 or labels.shape[0] != Y.shape[1]:
        raise ValueError(f"Y must be (models, items) and labels (items,), got {Y.shape} and {labels.shape}")
    if labels.size and (labels.dtype.kind not in "iu" or labels.min() < 0):
        raise ValueError("labels must be non-negative integer benchmark indices")
    return Y, labels.astype(np.int64)


def benchmark_scores(Y: Any, labels: Any, selected: Any = None, n_benchmarks: int | None = None) -> np.ndarray:
    """``(M, B)`` mean score of each model on each benchmark over the ``selected`` items (all items
    if ``None``), ignoring NaN; NaN where a benchmark has no (observed) selected item."""
    Y, labels = _check_y_labels(Y, labels)
    B = int(n_benchmarks) if n_benchmarks is not None else (int(labels.max()) + 1 if labels.size else 0)
    if selected is not None:
        sel = np.asarray(selected, dtype=np.int64)
        Y, labels = Y[:, sel], labels[sel]
    observed = ~np.isnan(Y)
    H = sp.csr_matrix((np.ones(labels.size), (np.arange(labels.size), labels)), shape=(labels.size, B))
    sums = np.asarray(H.T @ np.where(observed, Y, 0.0).T).T
    counts = np.asarray(H.T @ observed.T.astype(np.float64)).T
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _nanmean(a: np.ndarray, axis: int) -> np.ndarray:
    ok = ~np.isnan(a)
    counts = ok.sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, np.where(ok, a, 0.0).sum(axis=axis) / np.maximum(counts, 1), np.nan)


def capability_names(capabilities: Sequence[str]) -> list[str]:
    """Distinct capability names in order of first appearance."""
    return list(dict.fromkeys(capabilities))


def capability_scores(bench: np.ndarray, capabilities: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """``(M, C)`` mean over each capability's covered benchmarks (§3.2), and the capability names."""
    bench = np.asarray(bench, dtype=np.float64)
    if len(capabilities) != bench.shape[1]:
        raise ValueError(f"capabilities has {len(capabilities)} entries for {bench.shape[1]} benchmarks")
    names = capability_names(capabilities)
    caps = np.asarray(capabilities, dtype=object)
    out = np.column_stack([_nanmean(bench[:, caps == c], axis=1) for c in names]) if names \
        else np.empty((bench.shape[0], 0))
    return out, names


def overall_scores(bench: np.ndarray) -> np.ndarray:
    """``(M,)`` mean over covered benchmarks (eq. 3)."""
    return _nanmean(np.asarray(bench, dtype=np.float64), axis=1)


def _relative_errors(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.abs(pred - true) / np.abs(true)
    err[~np.isfinite(err)] = np.nan  # no prediction, or true score 0
    return np.asarray(err)


def mre(pred_overall: Any, true_overall: Any) -> float:
    """MRE (eq. 5): mean over models of ``|s_hat_m - s_m| / s_m``."""
    pred, true = np.asarray(pred_overall, dtype=np.float64), np.asarray(true_overall, dtype=np.float64)
    if pred.shape != true.shape:
        raise ValueError(f"shapes differ: {pred.shape} vs {true.shape}")
    err = _relative_errors(pred, true)
    return float(np.nanmean(err)) if np.any(~np.isnan(err)) else float("nan")


def cap_mre(pred_cap: Any, true_cap: Any) -> float:
    """Cap-MRE (eq. 4): mean over capabilities of the mean over models of ``|s_hat - s| / s``;
    ``pred_cap``/``true_cap`` are ``(M, C)``."""
    pred, true = np.asarray(pred_cap, dtype=np.float64), np.asarray(true_cap, dtype=np.float64)
    if pred.ndim == 1:
        pred, true = pred[None, :], true[None, :]
    if pred.shape != true.shape:
        raise ValueError(f"shapes differ: {pred.shape} vs {true.shape}")
    per_cap = _nanmean(_relative_errors(pred, true), axis=0)
    per_cap = per_cap[~np.isnan(per_cap)]
    return float(per_cap.mean()) if per_cap.size else float("nan")


def coreset_errors(Y: Any, labels: Any, capabilities: Sequence[str], selected: Any) -> dict[str, Any]:
    """MRE and Cap-MRE of the coreset ``selected`` against the full items (§3.2).

    Returns ``{"mre", "cap_mre", "n_benchmarks_covered", "n_benchmarks", "n_capabilities_covered",
    "n_capabilities"}``.
    """
    Y, labels = _check_y_labels(Y, labels)
    B = len(capabilities)
    if labels.size and labels.max() >= B:
        raise ValueError(f"labels reach {labels.max()} but capabilities names only {B} benchmarks")
    true_b = benchmark_scores(Y, labels, None, B)
    pred_b = benchmark_scores(Y, labels, selected, B)
    true_c, names = capability_scores(true_b, capabilities)
    pred_c, _ = capability_scores(pred_b, capabilities)
    covered_b = ~np.all(np.isnan(pred_b), axis=0)
    covered_c = ~np.all(np.isnan(pred_c), axis=0)
    return {
        "mre": mre(overall_scores(pred_b), overall_scores(true_b)),
        "cap_mre": cap_mre(pred_c, true_c),
        "n_benchmarks_covered": int(covered_b.sum()),
        "n_benchmarks": B,
        "n_capabilities_covered": int(covered_c.sum()),
        "n_capabilities": len(names),
    }
