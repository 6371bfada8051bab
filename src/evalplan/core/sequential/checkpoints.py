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

import math
from typing import Any

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


# ---------------------------------------------------------------------- the default's working model (issue 33)
FLIP_PRIOR = (math.log(0.15 / 0.85), 0.0, 0.0, 0.0, 0.0)  # flip model's prior mean: 15% flips whatever the item
FLIP_PRIOR_SD = (1.5, 3.0, 3.0, 3.0, 3.0)  # its ridge prior sd: (intercept, |c - u|, |c - g|, 4 u (1 - u), 4 g (1 - g))
LINE_PRIOR, LINE_PRIOR_SD = (0.0, 0.0, 1.0), (2.0, 2.0, 1.0)  # bounded scores: y ~ (1, c, g), centred on g
RIDGE_VARIANCE_PSEUDO = 2.0  # bounded scores: pseudo-observations of the residual variance at its prior value
BLEND_PRIOR, BLEND_PSEUDO = 0.0, 10.0  # the blend weight starts on the reference model; pseudo-observations there
NEWTON_STEPS = 8


def previous_by_bucket(bucket_vectors: np.ndarray, bucket_sizes: np.ndarray, previous: list[dict[str, Any]] | None,
                       score_range: tuple[float, float], binary: bool
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Per bucket of a prior built by :func:`with_previous`: the newest checkpoint's *observed* score, whether
    there is one, and the references' mean, ``(value, has, u)``; None when ``previous``
    (``SessionConfig.previous``: each entry's ``weight`` is its row's multiplicity, ``n_scores`` its observed
    items) does not match the prior.

    The checkpoints' rows are the last ``sum(weight)`` columns, oldest first. A partial checkpoint's missing
    items were imputed (:func:`impute_checkpoint`): an imputed cell is ``clip(u + shift)``, ``u`` the
    references' mean, and ``shift`` is the most frequent ``c - u`` among cells inside the score range (by
    item count); an observed score equal to its item's imputation is counted as imputed (the reference model
    then predicts it). Binary scores: only 0/1 cells are observed."""
    if not previous:
        return None
    V = np.asarray(bucket_vectors, dtype=np.float64)
    sizes = np.asarray(bucket_sizes, dtype=np.float64)
    try:
        weights = [int(p["weight"]) for p in previous]
        scored = [int(p.get("n_scores", sizes.sum())) for p in previous]
    except (KeyError, TypeError, ValueError):
        return None
    total, K = sum(weights), V.shape[1]
    if min(weights) < 1 or total >= K:
        return None
    u = V[:, :K - total].mean(axis=1)
    lo, hi = score_range
    value = np.full(V.shape[0], np.nan)
    has = np.zeros(V.shape[0], dtype=bool)
    col = K - total
    for w, n_scores in zip(weights, scored):
        block = V[:, col:col + w]
        col += w
        if not np.all(block == block[:, :1]):
            return None
        c = block[:, 0]
        real = np.ones(c.shape, dtype=bool)
        inner = (c > lo) & (c < hi)
        if n_scores < sizes.sum() and inner.any():  # partial: the imputed cells are clip(u + shift)
            keys, inverse = np.unique(np.round(c[inner] - u[inner], 9), return_inverse=True)
            shift = float(keys[int(np.argmax(np.bincount(inverse, weights=sizes[inner])))])
            real = np.abs(c - np.clip(u + shift, lo, hi)) > 1e-9
        if binary:
            real &= (c == lo) | (c == hi)
        value = np.where(real, c, value)  # newer checkpoints (later) overwrite older ones
        has |= real
    return value, has, u


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.exp(-np.logaddexp(0.0, -x)))


def _ridge_logistic(X: np.ndarray, y: np.ndarray, wt: np.ndarray, start: np.ndarray, mean: np.ndarray,
                    prec: np.ndarray) -> np.ndarray:
    """MAP of a weighted logistic regression under N(mean, 1/prec): Newton with backtracking (warm start)."""
    def objective(beta: np.ndarray) -> float:  # the penalised log-likelihood (concave)
        eta = X @ beta
        return float((wt * (y * eta - np.logaddexp(0.0, eta))).sum() - 0.5 * (prec * (beta - mean) ** 2).sum())

    b = start.copy()
    f = objective(b)
    for _ in range(NEWTON_STEPS):
        p = _sigmoid(X @ b)
        grad = X.T @ (wt * (y - p)) - prec * (b - mean)
        H = (X * (wt * p * (1.0 - p))[:, None]).T @ X + np.diag(prec)
        step = np.linalg.solve(H, grad)
        t = 1.0
        while t > 1e-4 and objective(b + t * step) < f:  # Newton alone can overshoot
            t *= 0.5
        b = b + t * step
        f = objective(b)
        if float(np.abs(t * step).max()) < 1e-6:
            break
    return b


class PreviousModel:
    """The target's item score from the newest checkpoint's observed score ``c``, the references' mean ``u``
    and the reference model's prediction ``g`` (all per item), fitted on the items observed so far (it never
    sees an unobserved score, so the design's terms stay unbiased whatever it predicts). Rows are weighted by
    their inverse inclusion probability: the draw favours flip-prone items, an unweighted fit would
    overstate the flip rate.

    Binary scores: a **flip model**, the probability that the item's score differs from the checkpoint's,
    ``f = sigmoid(a + b |c - u| + d |c - g| + e 4 u (1 - u) + k 4 g (1 - g))`` (ridge logistic regression, prior
    a 15% flip rate everywhere): an item is likely to flip where the checkpoint disagrees with the references
    or with the reference model, or where the references (or the reference model) are unsure of it.
    Its prediction ``c (1 - f) + (1 - c) f`` and the reference model's ``g`` are **blended**,
    ``mu = w p + (1 - w) g``, ``w`` in [0, 1] the least-squares weight of the two models' earlier predictions
    of the observed items (each made before the item was seen; ``BLEND_PSEUDO`` pseudo-observations hold it at
    ``BLEND_PRIOR`` = 0, the reference model alone, until the checkpoint model has predicted better): a
    checkpoint far from the target costs little. The design's spread is then
    ``sqrt(mu (1 - mu))``, large for flip-prone items (the Neyman allocation of a difference estimator).
    Bounded scores: the ridge least-squares line ``y ~ (1, c, g)`` centred on ``g``, and its residual
    variance (shrunk to the reference model's ``nu`` by ``RIDGE_VARIANCE_PSEUDO`` pseudo-observations)."""

    def __init__(self, binary: bool, score_range: tuple[float, float]) -> None:
        self.binary = binary
        self.lo, self.hi = score_range
        self.coef = np.array(FLIP_PRIOR if binary else LINE_PRIOR, dtype=np.float64)
        self.blend = BLEND_PRIOR if binary else 1.0  # the checkpoint model's weight against the reference model's
        self.residual_variance: float | None = None
        # (c, u, g, own prediction made before the item was seen, y, weight) per observed item with a checkpoint
        self._rows: list[tuple[float, float, float, float, float, float]] = []

    def add(self, c: float, u: float, g: float, y: float, weight: float = 1.0, own: float | None = None) -> None:
        """One observed item; ``own``: this model's prediction of it before it was seen (default: now's)."""
        if own is None:
            own = float(self.predict_own(np.array([c]), np.array([u]), np.array([g]))[0])
        self._rows.append((float(c), float(u), float(g), float(own), float(y), float(weight)))

    @property
    def n(self) -> int:
        return len(self._rows)

    def _features(self, c: np.ndarray, u: np.ndarray, g: np.ndarray) -> np.ndarray:
        span = self.hi - self.lo
        if self.binary:
            gc = np.clip(g, 0.0, 1.0)
            return np.column_stack([np.ones_like(c), np.abs(c - u), np.abs(c - g), 4.0 * u * (1.0 - u),
                                    4.0 * gc * (1.0 - gc)])
        return np.column_stack([np.ones_like(c), (c - self.lo) / span, (g - self.lo) / span])

    def fit(self, nu: float | None = None) -> None:
        """Refit on every row added (warm-started Newton for the flip model; closed form for the line)."""
        if not self._rows:
            return
        a = np.array(self._rows)
        c, u, g, own, y = a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4]
        wt = a[:, 5] / a[:, 5].mean()  # weights of mean 1: the prior keeps its strength
        X = self._features(c, u, g)
        if self.binary:
            mean, prec = np.array(FLIP_PRIOR), 1.0 / np.square(np.array(FLIP_PRIOR_SD))
            self.coef = _ridge_logistic(X, (y != c).astype(np.float64), wt, self.coef, mean, prec)
            dev = own - g
            num = float((wt * (y - g) * dev).sum()) + BLEND_PSEUDO * BLEND_PRIOR * float(np.mean(dev * dev))
            den = float((wt * dev * dev).sum()) + BLEND_PSEUDO * float(np.mean(dev * dev))
            self.blend = min(max(num / den, 0.0), 1.0) if den > 0 else BLEND_PRIOR
            return
        span = self.hi - self.lo
        ys = (y - self.lo) / span
        mean, prec = np.array(LINE_PRIOR), 1.0 / np.square(np.array(LINE_PRIOR_SD))
        H = (X * wt[:, None]).T @ X + np.diag(prec)
        b = np.linalg.solve(H, X.T @ (wt * ys) + prec * mean)
        self.coef = b
        rss = float((wt * np.square(ys - X @ b)).sum()) * span * span
        v0 = float(nu) if nu is not None else rss / max(len(y), 1)
        self.residual_variance = (rss + RIDGE_VARIANCE_PSEUDO * v0) / (len(y) + RIDGE_VARIANCE_PSEUDO)

    def flip_probability(self, c: np.ndarray, u: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Binary scores: the predicted probability that each item's score differs from the checkpoint's."""
        return _sigmoid(self._features(c, u, g) @ self.coef)

    def predict_own(self, c: np.ndarray, u: np.ndarray, g: np.ndarray) -> np.ndarray:
        """The checkpoint model's prediction alone (binary: from the flip model; bounded: the line)."""
        c, u, g = (np.asarray(x, dtype=np.float64) for x in (c, u, g))
        if self.binary:
            f = self.flip_probability(c, u, g)
            return np.asarray(c * (1.0 - f) + (1.0 - c) * f)
        eta = self._features(c, u, g) @ self.coef
        return np.asarray(np.clip(self.lo + (self.hi - self.lo) * eta, self.lo, self.hi))

    def predict(self, c: np.ndarray, u: np.ndarray, g: np.ndarray) -> np.ndarray:
        """The working model's prediction: the checkpoint model blended with the reference model's."""
        own = self.predict_own(c, u, g)
        if not self.binary:
            return own
        return np.asarray(self.blend * own + (1.0 - self.blend) * np.asarray(g, dtype=np.float64))
