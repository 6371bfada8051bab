"""``active_design``: the default session method: items drawn at random with recorded probabilities, a
working model's prediction plus inverse-probability-weighted residuals, and an anytime-valid confidence
sequence (docs/SEQUENTIAL.md, "active_design").

The design (active statistical inference, Zrnic & Candes 2024; FAQ, Wu, Nair & Candes 2026):

* Before each draw the working model (the reference-score GP, :class:`~.refgp.RefGPEstimator` with
  ``refgp_v3``'s parameters, ``working_model: reference_gp_evidence_mix``, and the model's own variance by
  default, or ``refgp_ivr``'s, ``reference_gp``; fitted on what was
  observed before the draw only) predicts every unobserved item, ``mu_j``, and its residual spread ``sigma_j``
  (binary scores: ``sqrt(mu (1 - mu) + d_j)``, ``d_j`` the model's own uncertainty; bounded scores: the
  GP's predictive sd capped by the bound ``(mu - lo)(hi - mu)``). ``working_model: factor`` uses instead the
  logistic factor model of :mod:`.factor_model` (after FAQ; bounded scores only, fitted on the observed items
  only), ``working_model: prequential`` whichever of the two has the smaller summed squared error on the items
  observed so far, each item predicted by both before it was observed (a predictable choice: the design stays
  valid; ``design.answered_by`` names the model the next draw uses). The next item is drawn from the
  unobserved set ``R`` with probability ``q_j = (1 - gamma) sigma_j / sum_R sigma + gamma / |R|``: a share
  proportional to the predicted spread (Neyman allocation) and a uniform floor ``gamma``.
* Term of a draw ``t`` of item ``i`` from ``R_t`` (sequential sampling without replacement, the
  Horvitz-Thompson / difference estimator of the remainder):
  ``theta_t = (sum_{j not in R_t} y_j + sum_{j in R_t} mu_j + (y_i - mu_i) / q_i) / N``. Whatever the
  model, ``E[theta_t | past] = mu``, the benchmark mean: ``theta_t - mu`` is a martingale difference
  sequence, bounded by predictable ``[A_t, B_t]`` (``y`` in the score range, ``q >= gamma / |R|``).
* Interval: a betting confidence sequence for the common conditional mean (Waudby-Smith & Ramdas 2023,
  hedged capital with predictable plug-in bets, generalised to predictable bounds): for each candidate
  ``m`` on a grid, ``K_t(m) = 1/2 prod (1 + l+_s (theta_s - m)) + 1/2 prod (1 - l-_s (theta_s - m))`` is a
  nonnegative martingale when ``m = mu``; Ville's inequality makes ``{m : K_t(m) < 1/alpha}`` valid at every
  t at once, so at a data-dependent stop. Intersected with the logical bounds (observed items are known
  exactly, the rest lie in the score range) and with its own past (running intersection: the half-width
  never grows): ``interval_kind="anytime"``, for callers who look after every item and may stop at any
  time. ``interval_kind="sequential"`` (the default) reports the fixed-width sequential interval of Chow &
  Robbins (1965) on the terms: their mean weighted by ``(N / |R_t|)^2`` (predictable), the weighted mean's
  martingale-CLT variance plus the floor ``(hi - lo)^2 / n`` per term, and at least half the betting
  sequence's half-width (an outer guard against a lucky small variance and rare large terms): valid at the
  session's precision stop (asymptotically, Chow & Robbins Thm 2; measured in docs/RESULTS.md "Precision
  stops valid at the stop") with about 0.6x the items of the betting sequence. ``interval_kind="fixed_n"`` reports
  the martingale-CLT interval of the terms' mean (narrowest; valid at a fixed n only, not at a precision stop).
* Point estimate: the working model's estimate ``(sum_observed y + sum_unobserved mu) / N`` clipped into
  the valid interval (``point="model"``, the default), or the weighted mean of the terms
  (``point="design"``); both are reported.
* Extrapolation: when the terms' mean says the target sits outside the references' range (its fixed-n
  interval excludes every reference's mean), the uniform share rises to ``extrapolation_share``.

Items the caller posts without their being proposed are known exactly (they leave the remainder) but
enter no term; validity needs the caller to evaluate the proposed items (not to skip some by their
content). Core entry point for benches (FAQ side by side): :func:`run_active_design`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import ItemEstimator, one_blas_thread, paper_converged, z_of
from .checkpoints import PreviousModel, previous_by_bucket, with_previous
from .config import REFGP_VARIANTS, WORKING_MODEL_ALIASES, SessionConfig
from .config import WORKING_MODELS as WORKING_MODEL_PRESETS
from .factor_model import FactorModel, fit_factor
from .prior import BucketPrior
from .refgp import RefGPEstimator
from .stopping import StopRule, sequential_half_width

UNIFORM_SHARE = 0.25  # gamma: the uniform floor of the draw probabilities
EXTRAPOLATION_SHARE = 0.6  # gamma once the terms say the target is outside the references
GRID = 2000  # candidate means of the confidence sequence over the score range
TRUNCATION = 0.5  # bets at most this fraction of the way to ruin (WSR's hedged-capital default)
BINARY_CLIP = 0.02  # predicted probabilities are kept in [c, 1 - c] for the spread
INTERVAL_KINDS = ("sequential", "anytime", "fixed_n")
INTERVAL_KIND = "sequential"  # the default: valid at the precision stop, cheaper than the betting sequence
SEQUENTIAL_GUARD = 2.0  # the sequential interval is at least the betting CS's half-width / this
# the sequential interval's term weights (N / |R_t|)^p (predictable: a term's spread shrinks with the remainder
# |R_t|, so p = 2 is inverse-variance for equal residuals); measured against p = 0 and 1 (stop_rule_bench)
REMAINDER_POWER = 2.0
# the floor scaled by 4 m (1 - m) at the smoothed estimate: measured, it under-covered (50% on AlpacaEval's best
# models at ±0.02), so off: the floor is span^2 / n
BERNOULLI_FLOOR = False
#: what stops a session on precision, per interval kind (the response's ``design.stop_rule``)
STOP_RULES = {"sequential": "chow_robbins_floor_cs_guard", "anytime": "betting_cs", "fixed_n": "fixed_n_clt"}
# readable names of refgp presets (config.WORKING_MODELS), run with variance="model" (the design needs no other);
# the former values refgp_v3 and refgp_ivr are accepted (config.WORKING_MODEL_ALIASES)
WORKING_MODELS = tuple(WORKING_MODEL_PRESETS)
WORKING_MODEL = "reference_gp_evidence_mix"  # refgp_v3: shifted / unshifted means by evidence, the better predictions
FACTOR = "factor"  # the logistic factor model (factor_model.py); needs a bounded score range
PREQUENTIAL = "prequential"  # before each draw: whichever of WORKING_MODEL and FACTOR predicted the past items better
SHARES = (0.25, 0.5, 1.0)  # the uniform shares the adaptive rule chooses among
MIN_ADAPT = 10  # draws before the adaptive rule may move the share
POINTS = ("model", "design", "compromise")


@dataclass
class _Draw:
    """One random draw: what its term needs (all fixed when it was drawn)."""

    item: int
    q: float  # its inclusion probability
    mu: float  # the working model's prediction of the item
    pred_sum: float  # sum of predictions over the remainder R it was drawn from
    known_sum: float  # sum of the scores observed before its batch was drawn
    mates: list[int]  # earlier draws of the same batch (not in R, their scores join the known sum)
    low: float  # min over R of (lo - mu_j) / q_j
    high: float  # max over R of (hi - mu_j) / q_j
    pred_var: float  # the model's expected variance of the term (N^2 units)
    active: float  # the item's share of the spread, sigma_i / sum_R sigma (what q mixes with 1/|R|)
    n_remaining: int  # |R|
    gp: float = math.nan  # the reference model's prediction of the item when it was drawn (the previous model's input)
    own: float = math.nan  # the checkpoint model's prediction of the item when it was drawn (its blend weight's input)
    score: float | None = None


class DesignCS:
    """Betting confidence sequence for the common conditional mean of bounded martingale terms with
    predictable bounds (the module docstring), plus the fixed-n (martingale CLT) interval."""

    def __init__(self, level: float, lo: float, hi: float, grid: int = GRID, equal_weights: bool = False) -> None:
        self.equal_weights = equal_weights
        self.alpha = 1.0 - level
        self.lo, self.hi = lo, hi
        self.grid = np.linspace(lo, hi, grid + 1)
        self.step = (hi - lo) / grid
        self._log_pos = np.zeros(grid + 1)
        self._log_neg = np.zeros(grid + 1)
        self._alive = np.ones(grid + 1, dtype=bool)
        self.t = 0
        self._ratio_num = 1.0  # realized / predicted variance of the terms, shrunk to 1 (1 pseudo-term)
        self._wsum = self._wtheta = 0.0
        self._terms: list[tuple[float, float]] = []  # (theta, weight)
        # remainder-weighted sums of the terms, w = (N / |R_t|)^REMAINDER_POWER (predictable): sum w, w^2, w theta,
        # w^2 theta, w^2 theta^2 (the sequential interval)
        self._rsum = [0.0, 0.0, 0.0, 0.0, 0.0]
        self.low, self.high = lo, hi  # the running intersection

    def mean(self) -> float | None:
        return self._wtheta / self._wsum if self._wsum > 0 else None

    def scaled_variance(self, pred_var: float) -> float:
        """The predicted variance of the next term, scaled by the realized / predicted ratio so far."""
        return max(pred_var, 1e-12) * self._ratio_num / (1.0 + self.t)

    def update(self, theta: float, a: float, b: float, pred_var: float, remainder_weight: float = 1.0) -> None:
        """Add the term ``theta`` with predictable bounds ``a <= theta <= b``, predicted variance and the
        sequential interval's (predictable) weight."""
        t = self.t + 1
        v = self.scaled_variance(pred_var)
        lam = math.sqrt(2.0 * math.log(2.0 / self.alpha) / (v * t * math.log(1.0 + t)))
        m = self.grid
        self._alive &= (m >= a - 1e-12) & (m <= b + 1e-12)
        with np.errstate(divide="ignore", invalid="ignore"):
            lp = np.minimum(lam, TRUNCATION / np.maximum(m - a, 1e-300))
            ln = np.minimum(lam, TRUNCATION / np.maximum(b - m, 1e-300))
            self._log_pos += np.log(np.maximum(1.0 + lp * (theta - m), 1e-300))
            self._log_neg += np.log(np.maximum(1.0 - ln * (theta - m), 1e-300))
        prev = self.mean()
        centre = prev if prev is not None else theta
        self._ratio_num += (theta - centre) ** 2 / max(pred_var, 1e-12) if prev is not None else 1.0
        w = 1.0 if self.equal_weights else 1.0 / v
        self._wsum += w
        self._wtheta += w * theta
        self._terms.append((theta, w))
        rw = remainder_weight
        for k, v in enumerate((rw, rw * rw, rw * theta, rw * rw * theta, rw * rw * theta * theta)):
            self._rsum[k] += v
        self.t = t
        log_k = np.logaddexp(self._log_pos, self._log_neg) + math.log(0.5)
        keep = np.flatnonzero(self._alive & (log_k < math.log(1.0 / self.alpha)))
        if keep.size:
            lo_, hi_ = float(m[keep[0]]) - self.step, float(m[keep[-1]]) + self.step
        else:  # every candidate rejected (probability <= alpha): keep the last set, do not widen
            lo_, hi_ = self.low, self.high
        self.low, self.high = max(self.low, lo_), min(self.high, hi_)

    def fixed_n(self, level: float) -> tuple[float, float] | None:
        """Martingale-CLT interval of the weighted mean of the terms (valid at a fixed n)."""
        T = len(self._terms)
        if T < 2:
            return None
        mean = self._wtheta / self._wsum
        th = np.array([x for x, _ in self._terms])
        w = np.array([y for _, y in self._terms])
        var = float((w * w * (th - mean) ** 2).sum()) / self._wsum ** 2 * T / (T - 1)
        half = z_of(level) * math.sqrt(max(var, 0.0))
        return mean - half, mean + half

    def sequential(self, level: float, span: float, guard: float,
                   origin: float | None = None) -> tuple[float, float] | None:
        """The fixed-width sequential interval of the terms' mean (``stopping.sequential_half_width``): the
        terms' sample variance plus ``span^2 / n``, at least the betting CS's half-width / ``guard``."""
        T = len(self._terms)
        if T < 2:
            return None
        w1, w2, wt, w2t, w2t2 = self._rsum
        mean = wt / w1
        clt = max(w2t2 - 2.0 * mean * w2t + mean * mean * w2, 0.0) / (w1 * w1) * T / (T - 1)
        n_eff = w1 * w1 / w2
        cs_half = (self.high - self.low) / 2.0 if guard > 0 else None
        unit = (mean - origin) / span if origin is not None else None
        half = sequential_half_width(T, clt * n_eff, span, level, n_eff=n_eff, unit_mean=unit,
                                     guard_half_width=cs_half, guard=guard)
        return mean - half, mean + half

    def sequential_mean(self) -> float | None:
        """The remainder-weighted mean of the terms (the sequential interval's centre)."""
        return self._rsum[2] / self._rsum[0] if self._rsum[0] > 0 else None

    def fixed_n_variance(self) -> float | None:
        T = len(self._terms)
        if T < 2:
            return None
        mean = self._wtheta / self._wsum
        th = np.array([x for x, _ in self._terms])
        w = np.array([y for _, y in self._terms])
        return float((w * w * (th - mean) ** 2).sum()) / self._wsum ** 2 * T / (T - 1)


class ActiveDesignEstimator(ItemEstimator):
    """Active random design, model-assisted terms, anytime-valid confidence sequence (module doc).

    Parameters (sklearn style, all recorded): ``uniform_share`` (gamma), ``extrapolation_share``,
    ``interval_kind`` (``anytime`` | ``fixed_n``), ``point`` (``model`` | ``design``), ``score_range``
    (the bounds of a score; default: [0, 1] when every reference score lies there)."""

    method = "active_design"
    anytime_valid = True  # its own interval is a confidence sequence (PrecisionSession adds none)

    def __init__(self, prior: BucketPrior, config: SessionConfig, *, score_range: tuple[float, float] | None = None,
                 uniform_share: float = UNIFORM_SHARE, extrapolation_share: float = EXTRAPOLATION_SHARE,
                 interval_kind: str | None = None, point: str = "model", working_model: str = WORKING_MODEL,
                 adaptive_share: bool = True, equal_weights: bool = True, use_previous: bool = False) -> None:
        super().__init__(prior, config)
        kind = interval_kind or getattr(config, "interval_kind", None) or INTERVAL_KIND
        if kind not in INTERVAL_KINDS:
            raise ValueError(f"interval_kind: must be one of {INTERVAL_KINDS}, got {kind!r}")
        if point not in POINTS:
            raise ValueError(f"point: must be one of {POINTS}, got {point!r}")
        if not 0.0 < uniform_share <= 1.0 or not uniform_share <= extrapolation_share <= 1.0:
            raise ValueError("uniform_share: need 0 < uniform_share <= extrapolation_share <= 1")
        V = prior.bucket_vectors
        if score_range is None:
            score_range = (0.0, 1.0) if V.size and V.min() >= 0.0 and V.max() <= 1.0 else (-math.inf, math.inf)
        self.lo, self.hi = float(score_range[0]), float(score_range[1])
        self.bounded = math.isfinite(self.lo) and math.isfinite(self.hi) and self.hi > self.lo
        # without bounds there is no confidence sequence: the sequential interval without its guard
        self.interval_kind = kind if self.bounded or kind == "fixed_n" else "sequential"
        self.span = (self.hi - self.lo) if self.bounded else (float(V.max() - V.min()) if V.size else 1.0)
        self.point = point
        self.base_share = float(uniform_share)
        self.extrapolation_share = float(extrapolation_share)
        self.uniform_share = self.base_share
        self.binary = bool(self.bounded and self.lo == 0.0 and self.hi == 1.0 and np.all((V == 0.0) | (V == 1.0)))
        means = V.T @ prior.bucket_sizes / max(prior.n_items, 1)  # each reference's benchmark mean
        self.ref_range = (float(means.min()), float(means.max())) if means.size else (self.lo, self.hi)
        inner = dataclasses.replace(config, method="refgp_ivr", stop=StopRule(0.0, level=config.level).as_dict(),
                                    max_items=None,
                                    max_items_fraction=None, hyperparameters=None, previous=None,
                                    interval_kind=None, method_params=None)
        working_model = WORKING_MODEL_ALIASES.get(working_model, working_model)
        if working_model not in WORKING_MODELS:
            raise ValueError(f"working_model: must be one of {WORKING_MODELS}, got {working_model!r}")
        self.working_model = working_model
        preset = WORKING_MODEL_PRESETS[working_model]
        self.adaptive_share = bool(adaptive_share)
        self.model = RefGPEstimator(prior, dataclasses.replace(inner, method=preset),
                                    **{**REFGP_VARIANTS[preset], "variance": "model"})
        # factor / prequential: the factor model beside the reference GP (without bounds the GP answers alone)
        self.factor: FactorModel | None = None
        if working_model in (FACTOR, PREQUENTIAL) and self.bounded:
            self.factor = FactorModel(fit_factor(prior, (self.lo, self.hi)), prior.n_buckets, (self.lo, self.hi))
        # prequential: each candidate's summed squared error on the observed items, each predicted before it was
        # observed (from the items observed before it only: the choice is predictable)
        self.prequential_error = {WORKING_MODEL: 0.0, FACTOR: 0.0}
        self.n_prequential = 0
        self._adapt: list[tuple[float, float, float, float]] = []  # per term: e^2, q, active share a, 1/|R|
        self.level = float(config.level)
        self.cs = (DesignCS(self.level, self.lo, self.hi, equal_weights=equal_weights) if self.bounded
                   else DesignCS(self.level, 0.0, 1.0, 1, equal_weights=equal_weights))
        self._draws: list[_Draw] = []  # every draw, in order
        self._pending: dict[int, int] = {}  # item -> index in _draws, drawn and not yet observed
        self._next_final = 0  # first draw whose term is not yet in the confidence sequence
        self._score_of: dict[int, float] = {}
        # earlier checkpoints (``previous``): their observed scores join the working model (checkpoints.PreviousModel)
        found = (previous_by_bucket(V, prior.bucket_sizes, config.previous, (self.lo, self.hi), self.binary)
                 if use_previous and self.bounded else None)
        usable = found is not None and bool(found[1].any())
        self._prev_value: np.ndarray | None = found[0] if found is not None and usable else None
        self._prev_has: np.ndarray | None = found[1] if found is not None and usable else None
        self._prev_u: np.ndarray | None = found[2] if found is not None and usable else None
        self.previous_model = (PreviousModel(self.binary, (self.lo, self.hi)) if self._prev_value is not None
                               else None)
        # (n, mu, sigma, the reference model's and the checkpoint model's predictions) of _predictions
        self._cached: tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self.extrapolation = False
        self.last_probability: float | None = None
        self.model_estimate = float(self.model.estimate)
        self.design_estimate: float | None = None
        self._set_estimate()

    # ------------------------------------------------------------------ public state
    @property
    def hyperparameters(self) -> dict[str, Any]:
        return {**self.model.hyperparameters, "design": self.design_state()}

    def design_state(self) -> dict[str, Any]:
        return {"interval_kind": self.interval_kind, "stop_rule": STOP_RULES[self.interval_kind],
                "uniform_share": self.uniform_share,
                "extrapolation": self.extrapolation, "n_design_terms": self.cs.t,
                "model_estimate": self.model_estimate, "design_estimate": self.design_estimate,
                "point": self.point, "working_model": self.working_model, "answered_by": self.answering(),
                **({} if self.factor is None else {"factor": self.factor.state}),
                **({} if self.working_model != PREQUENTIAL else {"prequential_brier": {
                    k: v / max(self.n_prequential, 1) for k, v in self.prequential_error.items()},
                    "n_prequential": self.n_prequential}),
                **({} if self.previous_model is None else {"previous_model": self.previous_state()})}

    def previous_state(self) -> dict[str, Any]:
        """What the working model takes from ``previous``: items with a checkpoint score, the fit's rows and
        coefficients (intercept, previous score, reference model)."""
        pm, has = self.previous_model, self._prev_has
        assert pm is not None and has is not None
        return {"items_with_previous": int(self.prior.bucket_sizes[has].sum()), "n_fit": pm.n,
                "coefficients": [float(x) for x in pm.coef], "blend": pm.blend}

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        lo, hi = self._logical()
        if self.interval_kind == "anytime" and abs(level - self.level) < 1e-12:
            a, b = max(lo, self.cs.low), min(hi, self.cs.high)
        else:
            if self.interval_kind == "sequential":
                fixed = self.cs.sequential(level, max(self.span, 1e-12), SEQUENTIAL_GUARD if self.bounded else 0.0,
                                           self.lo if self.bounded and BERNOULLI_FLOOR else None)
            else:
                fixed = self.cs.fixed_n(level)
            if fixed is None:
                a, b = lo, hi
                if not self.bounded:  # no terms yet and no bounds: the model's interval
                    half = z_of(level) * math.sqrt(max(self.model.variance, 0.0))
                    a, b = self.model.estimate - half, self.model.estimate + half
            else:
                a, b = max(lo, fixed[0]), min(hi, fixed[1])
        if a > b:  # numerical: the logical bounds win
            a = b = min(max(self.estimate, lo), hi)
        return float(a), float(b)

    def _logical(self) -> tuple[float, float]:
        N, n = float(self.n_items), float(self.n_observed)
        if not self.bounded:
            if n >= N:
                return self._sum_s / N, self._sum_s / N
            return -math.inf, math.inf
        return (self._sum_s + self.lo * (N - n)) / N, (self._sum_s + self.hi * (N - n)) / N

    # ------------------------------------------------------------------ the design
    def _predictions(self) -> tuple[np.ndarray, np.ndarray]:
        """Per bucket: the working model's prediction (in the score range) and predicted residual spread."""
        n = self.n_observed
        if self._cached is None or self._cached[0] != n:
            self._cached = (n, *self._compute_predictions())
        return self._cached[1], self._cached[2]

    def _compute_predictions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(prediction, residual spread, the reference model's and the checkpoint model's predictions) per
        bucket. With ``previous``, items with a checkpoint score get the previous model's prediction
        (``checkpoints.PreviousModel``) and its spread: binary ``sqrt(p (1 - p) + d)`` (``p`` the predicted
        probability: large where a flip is likely; ``d`` the reference model's posterior variance of the item, as
        without previous), bounded ``sqrt(min(s2, (mu - lo)(hi - mu)) + d)``, ``s2`` its residual variance."""
        mu, sig = self._reference_predictions()
        gp = mu.copy()
        own = np.full_like(mu, math.nan)
        pm, has, c, u = self.previous_model, self._prev_has, self._prev_value, self._prev_u
        if pm is not None and has is not None and c is not None and u is not None:
            own[has] = pm.predict_own(c[has], u[has], gp[has])
            p = pm.predict(c[has], u[has], gp[has])
            mu[has] = p
            d = np.maximum(self.model._d[has], 0.0)  # the reference model's own uncertainty, as without previous
            if self.binary:
                pc = np.clip(p, BINARY_CLIP, 1.0 - BINARY_CLIP)
                var = pc * (1.0 - pc) + d
            else:
                span = (self.hi - self.lo) * BINARY_CLIP
                pc = np.clip(p, self.lo + span, self.hi - span)
                s2 = pm.residual_variance if pm.residual_variance is not None else float(np.mean(self.model._nu))
                var = np.minimum(s2, (pc - self.lo) * (self.hi - pc)) + d
            sig[has] = np.sqrt(np.maximum(var, 1e-12))
        return mu, sig, gp, own

    def answering(self) -> str:
        """The working model whose predictions the next draw uses: ``working_model`` itself, or for
        ``prequential`` the candidate with the smaller summed squared one-step-ahead error so far (ties: the
        reference GP); the reference GP where the factor model is not run (no bounded score range)."""
        if self.factor is None:
            return self.working_model if self.working_model not in (FACTOR, PREQUENTIAL) else WORKING_MODEL
        if self.working_model == FACTOR:
            return FACTOR
        e = self.prequential_error
        return FACTOR if e[FACTOR] < e[WORKING_MODEL] else WORKING_MODEL

    def _working_predictions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per bucket: the answering model's prediction, its uncertainty ``d`` and residual variance ``nu``."""
        m = self.model
        if self.factor is not None and self.answering() == FACTOR:
            return self.factor.predict()
        return m.predicted_means(), np.maximum(m._d, 0.0), m._nu

    def _reference_predictions(self) -> tuple[np.ndarray, np.ndarray]:
        """Per bucket: the working model's prediction (in the score range) and predicted residual spread."""
        mu, d, nu = self._working_predictions()
        d = np.maximum(d, 0.0)
        if self.bounded:
            mu = np.clip(mu, self.lo, self.hi)
        if self.binary:
            p = np.clip(mu, BINARY_CLIP, 1.0 - BINARY_CLIP)
            var = p * (1.0 - p) + d
        elif self.bounded:
            span = (self.hi - self.lo) * BINARY_CLIP
            p = np.clip(mu, self.lo + span, self.hi - span)
            var = np.minimum(d + nu, (p - self.lo) * (self.hi - p)) + d
        else:
            var = d + nu
        return mu, np.sqrt(np.maximum(var, 1e-12))

    def _draw_batch(self, k: int) -> None:
        """Draw ``k`` items (without replacement, one after another) from the current design."""
        m = self.model
        p = self.prior
        mu, sig = self._predictions()
        assert self._cached is not None
        gp, own = self._cached[3], self._cached[4]
        w = m._w.copy()
        known = self._sum_s
        rng = np.random.default_rng([self.config.seed, self.n_observed, len(self._draws), 11])
        gamma = self.uniform_share
        mates: list[int] = []
        N = float(self.n_items)
        for _ in range(k):
            n_r = float(w.sum())
            if n_r <= 0:
                break
            tot = float(w @ sig)
            q = (1.0 - gamma) * sig / tot + gamma / n_r if tot > 0 else np.full_like(sig, 1.0 / n_r)
            live = w > 0
            pb = np.where(live, w * q, 0.0)
            b = int(rng.choice(pb.size, p=pb / pb.sum()))
            items = p.items_by_bucket[p.bucket_offsets[b]:p.bucket_offsets[b + 1]]
            cand = items[~self._observed[items]]
            if mates:
                cand = cand[~np.isin(cand, mates)]
            item = int(rng.choice(cand))
            pred_sum = float(w @ mu)
            if self.bounded:
                low = float(((self.lo - mu[live]) / q[live]).min())
                high = float(((self.hi - mu[live]) / q[live]).max())
            else:
                low, high = -math.inf, math.inf
            pred_var = float((w * sig * sig / q).sum() - (w * sig * sig).sum()) / (N * N)
            self._pending[item] = len(self._draws)
            self._draws.append(_Draw(item, float(q[b]), float(mu[b]), pred_sum, known, list(mates), low, high,
                                     max(pred_var, 1e-12), float(sig[b] / tot) if tot > 0 else 1.0 / n_r,
                                     int(n_r), float(gp[b]), float(own[b])))
            mates.append(item)
            w[b] -= 1.0

    def _select(self, k: int) -> list[int]:
        if not self._pending:
            with one_blas_thread():  # small dense products: one BLAS thread is much faster on a loaded machine
                self._draw_batch(k)
        return sorted(self._pending, key=self._pending.__getitem__)[:k]

    def _update(self, item: int, score: float) -> None:
        with one_blas_thread():
            self._update_design(item, score)

    def _update_design(self, item: int, score: float) -> None:
        if not self._pending:
            self._draw_batch(max(1, min(self.config.batch_size, self.n_items - self.n_observed)))
        index = self._pending.pop(item, None)
        self.last_probability = None
        if index is not None:
            self._draws[index].score = score
            self.last_probability = self._draws[index].q
        self._score_of[item] = score
        drawn = self._draws[index] if index is not None else None
        self._add_previous(item, score, drawn)
        if self.factor is not None:
            b = int(self.prior.bucket_of_item[item])
            if self.working_model == PREQUENTIAL:  # both predict the item before either sees it
                ref = float(self.model.predicted_means(np.array([b]))[0])
                if self.bounded:
                    ref = min(max(ref, self.lo), self.hi)
                self.prequential_error[WORKING_MODEL] += (score - ref) ** 2
                self.prequential_error[FACTOR] += (score - self.factor.predict_bucket(b)) ** 2
                self.n_prequential += 1
            self.factor.observe(b, score)
        self.model.observe(item, score)
        self._finalize()

    def _add_previous(self, item: int, score: float, drawn: _Draw | None) -> None:
        """The previous model learns the item (before the reference model sees it: its inputs are the
        predictions made without the item, as for the items it will predict), weighted by 1 / q."""
        pm, has, c, u = self.previous_model, self._prev_has, self._prev_value, self._prev_u
        if pm is None or has is None or c is None or u is None:
            return
        b = int(self.prior.bucket_of_item[item])
        if not has[b]:
            return
        if drawn is not None and math.isfinite(drawn.gp):
            pm.add(float(c[b]), float(u[b]), drawn.gp, score, 1.0 / drawn.q, drawn.own)
        else:  # an item the caller chose: the predictions now, the weight of a uniform draw
            pm.add(float(c[b]), float(u[b]), float(self._reference_predictions()[0][b]), score,
                   float(self.n_items - self.n_observed))
        pm.fit(float(np.mean(self.model._nu)))

    def _finalize(self) -> None:
        """Add to the confidence sequence, in draw order, every draw whose term is now known."""
        N = float(self.n_items)
        while self._next_final < len(self._draws):
            d = self._draws[self._next_final]
            if d.score is None or any(j not in self._score_of for j in d.mates):
                return
            known = d.known_sum + sum(self._score_of[j] for j in d.mates)
            base = known + d.pred_sum
            theta = (base + (d.score - d.mu) / d.q) / N
            a, b = (base + d.low) / N, (base + d.high) / N
            rw = (N / max(d.n_remaining, 1)) ** REMAINDER_POWER
            if self.bounded:
                self.cs.update(theta, a, b, d.pred_var, rw)
            else:
                self.cs.update(theta, -math.inf, math.inf, d.pred_var, rw)
            self._next_final += 1
            self._adapt.append(((d.score - d.mu) ** 2, d.q, d.active, 1.0 / d.n_remaining))
        self._check_extrapolation()
        self._choose_share()

    def _choose_share(self) -> None:
        """Adaptive uniform share: the share in ``SHARES`` (at least the current floor) whose one-draw variance,
        estimated from the past draws by importance weighting (``sum_j e_j^2 / q'_j`` is estimated by
        ``e_i^2 / (q'_i q_i)`` over draws i with probabilities q), is smallest. Uses past draws only
        (predictable): validity is untouched; a working model whose spreads mislead falls back to uniform."""
        if not self.adaptive_share or len(self._adapt) < MIN_ADAPT:
            return
        a = np.array(self._adapt)
        e2, q, act, inv_r = a[:, 0], a[:, 1], a[:, 2], a[:, 3]
        scale = inv_r * inv_r  # terms of small remainders weigh as much as early ones: per-draw normalised
        floor = self.extrapolation_share if self.extrapolation else self.base_share
        best, best_v = self.uniform_share, math.inf
        for g in SHARES:
            if g < floor:
                continue
            qq = (1.0 - g) * act + g * inv_r
            v = float((scale * e2 / (qq * q)).mean())
            if v < best_v * (1.0 - 1e-9):
                best, best_v = g, v
        self.uniform_share = best

    def _check_extrapolation(self) -> None:
        if self.extrapolation or self.cs.t < 10:
            return
        fixed = self.cs.fixed_n(self.level)
        if fixed is not None and (fixed[0] > self.ref_range[1] or fixed[1] < self.ref_range[0]):
            self.extrapolation = True
            self.uniform_share = max(self.uniform_share, self.extrapolation_share)

    # ------------------------------------------------------------------ estimate
    def _set_estimate(self) -> None:
        if not hasattr(self, "cs"):
            return
        # the reference GP's estimate (it carries the checkpoints in its features); with use_previous the blended
        # predictions' sum was measured no better as a point estimate (docs/RESULTS.md "Checkpoint series")
        self.model_estimate = float(self.model.estimate)
        if self.factor is not None and self.answering() == FACTOR:  # the factor model's sum of the remainder
            w = self.model._w
            self.model_estimate = float((self._sum_s + float(w @ self.factor.predict()[0])) / max(self.n_items, 1))
        self.design_estimate = self.cs.mean()
        lo, hi = self.interval(self.level)
        raw = self.model_estimate
        if self.design_estimate is not None and self.point == "design":
            raw = self.design_estimate
        elif self.design_estimate is not None and self.point == "compromise":
            gap = self.design_estimate - self.model_estimate
            v = self.cs.fixed_n_variance()
            if v is not None:  # shrink the model's estimate towards the unbiased one by the evidence of its bias
                raw = self.model_estimate + gap * gap * gap / (gap * gap + v) if gap * gap + v > 0 else raw
        self.estimate = float(min(max(raw, lo), hi))
        fixed_var = self.cs.fixed_n_variance()
        if fixed_var is not None:
            self.variance = float(fixed_var)
        else:
            self.variance = float(self.model.variance)
        if self.n_observed >= self.n_items:
            self.variance = 0.0

    def _check_stop(self) -> None:
        """The paper's rule (App. C.1) on this method's own interval when no ``stop`` rule is given."""
        cfg = self.config
        n = self.n_observed
        if cfg.stop is None and n % cfg.batch_size == 0:
            self._iter_estimates.append(self.estimate)
            lo, hi = self.ci
            if paper_converged(self._iter_estimates, cfg.effective_window, hi - lo, cfg):
                self.stopped, self.stop_reason = True, "converged"
                return
        if cfg.max_items is not None and n >= cfg.max_items:
            self.stopped, self.stop_reason = True, "max_items"
        elif n >= self.n_items:
            self.stopped, self.stop_reason = True, "exhausted"

    def observe(self, item: int, score: float) -> None:
        super().observe(item, score)
        self.trajectory[-1]["probability"] = self.last_probability
        self.trajectory[-1]["design_estimate"] = self.design_estimate


def run_active_design(reference: np.ndarray, target: np.ndarray, *, budget: int | None = None,
                      half_width: float | None = None, level: float = 0.95, seed: int = 0,
                      score_range: tuple[float, float] = (0.0, 1.0), min_items: int = 10,
                      previous: list[np.ndarray] | None = None, **params: Any) -> list[dict[str, Any]]:
    """The core entry point (benches, FAQ side by side): replay ``target`` (N scores) as an
    ``active_design`` session over ``reference`` (M x N, no NaN) until ``budget`` items or until the
    ``level`` interval's half-width is <= ``half_width``. Returns the trajectory: per observation
    ``{n, item, score, probability, estimate, design_estimate, model_estimate, ci, variance}``
    (``probability`` the recorded inclusion probability of that draw). ``params``: the estimator's
    (``uniform_share``, ``extrapolation_share``, ``interval_kind``, ``point``, ``use_previous``). ``previous``:
    earlier checkpoints' scores (oldest first, NaN = not scored), joined to the prior and the working model as
    ``POST /v1/sessions`` does (``checkpoints.with_previous``)."""
    reference = np.asarray(reference, dtype=np.float64)
    stored = None
    if previous:
        reference, weights = with_previous(reference, list(previous), score_range)
        stored = [{"model": f"previous {k}", "n_scores": int(np.sum(~np.isnan(np.asarray(p, dtype=np.float64)))),
                   "weight": int(m)} for k, (p, m) in enumerate(zip(previous, weights))]
    prior = BucketPrior.from_reference_scores(reference)
    config = SessionConfig(method="active_design", seed=seed, level=level,
                           stop=StopRule(0.0, level=level).as_dict(), previous=stored)
    est = ActiveDesignEstimator(prior, config, score_range=score_range, **params)
    y = np.asarray(target, dtype=np.float64)
    cap = est.n_items if budget is None else min(int(budget), est.n_items)
    out: list[dict[str, Any]] = []
    while est.n_observed < cap:
        item = est.propose()[0]
        est.observe(item, float(y[item]))
        lo, hi = est.ci
        out.append({"n": est.n_observed, "item": item, "score": float(y[item]), "probability": est.last_probability,
                    "estimate": est.estimate, "design_estimate": est.design_estimate,
                    "model_estimate": est.model_estimate, "ci": (lo, hi), "variance": est.variance})
        if half_width is not None and est.n_observed >= min_items and (hi - lo) / 2.0 <= half_width:
            break
    return out
