"""Shared linear algebra: one jittered Cholesky factorisation.

A covariance or precision built from data is positive definite in exact arithmetic but may not be
numerically (near-duplicate items, a tiny noise term). The usual remedy (Rasmussen & Williams 2006,
GPML §A.4 / the GPML toolbox's ``chol`` fallback) adds a small multiple of the identity to the diagonal,
scaled by the mean diagonal, and escalates it until the factorisation succeeds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.linalg import LinAlgError, cholesky

__all__ = ["jittered_cholesky"]

#: the default escalation: no jitter, then 1e-10, 1e-9, ... times the mean diagonal (8 tries in all)
DEFAULT_TRIES = 8


def jittered_cholesky(a: np.ndarray, *, what: str = "matrix", jitters: Sequence[float] | None = None,
                      check_finite: bool = False) -> np.ndarray:
    """Lower factor ``L`` with ``L Lᵀ = a + j·s·I`` for the first jitter ``j`` that factorises, where ``s``
    is the mean diagonal of ``a``.

    ``jitters``: the relative jitters to try in order (``s`` taken as 1 when the diagonal's mean is not
    positive); default ``0`` then ``1e-10``, growing tenfold, ``DEFAULT_TRIES`` tries in all. Raises
    ``LinAlgError`` naming ``what`` when none works.
    """
    if jitters is not None:
        a = np.asarray(a, dtype=float)
        base = float(np.mean(np.diag(a))) if a.size else 1.0
        base = base if base > 0 else 1.0
        for eps in jitters:
            try:
                return np.asarray(cholesky(a + eps * base * np.eye(len(a)), lower=True, check_finite=check_finite))
            except LinAlgError:
                continue
        raise LinAlgError(f"{what} is not positive definite even with jitter {jitters[-1]:g}")
    jitter = 0.0
    scale = float(np.mean(np.diag(a))) if a.size else 1.0
    for _ in range(DEFAULT_TRIES):
        try:
            return np.asarray(cholesky(a if jitter == 0.0 else a + jitter * np.eye(a.shape[0]), lower=True,
                                       check_finite=check_finite))
        except LinAlgError:
            jitter = scale * (1e-10 if jitter == 0.0 else 10 * jitter / scale)
    raise LinAlgError(f"{what} is not positive definite")
