"""Earlier checkpoints of the target in the prior (``previous: [model names]``, issue 11 §5).

Every session method builds its prior from the rows of the reference matrix (BayesAME's bucket
kernel and bucket means, the default's item features, ProEval's linear kernel, the IRT fit). An
earlier checkpoint of the same training run predicts the target's item scores far better than an
unrelated reference, so its row joins the reference matrix with a *multiplicity*: it is repeated
``r_j`` times, which is the same as a reference weight ``r_j`` in every mean over references, every
squared distance and every Gram matrix, and keeps the estimators unchanged.

* Weights: the checkpoints together weigh ``SHARE / (1 - SHARE)`` times the references (``SHARE`` =
  1/2: as much as all references together); among them, each newer checkpoint (later in the list,
  oldest first) weighs twice the one before; a checkpoint's weight is scaled by the fraction of the
  items it has scores for. ``r_j = max(1, round(K_r * SHARE / (1 - SHARE) * w_j * coverage_j))``.
* Partial checkpoints (scores on some items, e.g. from earlier sessions): a missing item gets the
  references' mean on it shifted by the checkpoint's mean offset from the references on the items
  it has, ``u_i + mean_{observed}(p - u)``, clipped to the score range.
"""

from __future__ import annotations

import numpy as np

SHARE = 0.5  # the checkpoints' share of the prior's reference weight
MAX_PREVIOUS = 16


def impute_checkpoint(scores: np.ndarray, reference: np.ndarray,
                      score_range: tuple[float, float] = (0.0, 1.0)) -> np.ndarray:
    """A checkpoint's complete row: its scores, and the shifted reference mean where it has none."""
    scores = np.asarray(scores, dtype=np.float64)
    have = ~np.isnan(scores)
    if not have.any():
        raise ValueError("previous: a checkpoint needs at least one score")
    u = np.asarray(reference, dtype=np.float64).mean(axis=0)
    shift = float(np.mean(scores[have] - u[have]))
    lo, hi = score_range
    return np.where(have, scores, np.clip(u + shift, lo, hi))


def multiplicities(n_references: int, coverages: list[float], share: float = SHARE) -> list[int]:
    """How many times each checkpoint row (oldest first) is repeated in the reference matrix."""
    if not coverages:
        return []
    w = np.power(2.0, np.arange(len(coverages)))
    w /= w.sum()
    total = n_references * share / (1.0 - share)
    return [max(1, int(round(total * wj * float(c)))) for wj, c in zip(w, coverages)]


def with_previous(reference: np.ndarray, previous: list[np.ndarray],
                  score_range: tuple[float, float] = (0.0, 1.0)) -> tuple[np.ndarray, list[int]]:
    """The reference matrix (complete, K_r x N) with each checkpoint's row (NaN = no score) appended
    ``multiplicities`` times; returns (matrix, multiplicities)."""
    reference = np.asarray(reference, dtype=np.float64)
    if len(previous) > MAX_PREVIOUS:
        raise ValueError(f"previous: at most {MAX_PREVIOUS} checkpoints")
    rows = [impute_checkpoint(p, reference, score_range) for p in previous]
    cover = [float(np.mean(~np.isnan(np.asarray(p, dtype=np.float64)))) for p in previous]
    mult = multiplicities(reference.shape[0], cover)
    blocks = [reference] + [np.repeat(r[None, :], m, axis=0) for r, m in zip(rows, mult)]
    return np.vstack(blocks), mult
