"""``refgp``: the reference-score GP family, one class with its components as parameters
(docs/SEQUENTIAL.md, "The ``refgp`` family"); the presets are the former method names ``refgp_ivr``,
``refgp_v2``, ``refgp_v3``, ``refgp_cal`` and ``refgp_dr``.

The model (every parameter set): a Bayesian linear model (a Gaussian process with a low-rank linear kernel)
over the target's item scores, whose item features are the reference models' scores on the item:

    f_i = mu_i + phi_i^T (beta - m0) + e_i,   phi_i = [1, u_i - u_bar, z_i],   e_i ~ N(0, nu_i),
    nu_i = r2 w_i + rho2,   beta ~ N(m0, diag(tau0, tau1, s2 I_K)),  m0 = [u_bar, 1, 0, ..., 0],

with ``u_i`` the reference mean of item i and ``z_i`` its centred reference scores
(``(x_i - u_i) / sqrt(M - 1)``, ProEval's linear-kernel features) projected on the top ``K`` principal
directions over items (the structure shared by models; ``K <= directions``); ``w_i`` is what the references'
variance on the item leaves unexplained by those K directions, so the residual is heteroscedastic (an item
every reference solves has little residual), ``rho2`` a floor. ``mu_i`` is the prior mean (``mean``:
``u_i`` itself for ``reference``, so ``f_i = phi_i^T beta + e_i``). The constant lets the target sit above
or below every reference (extrapolation), the item-mean slope lets it spread difficulty more or less.
Observed scores are exact (continuous scores are used as such); the benchmark mean is

    R = (sum_{observed} y_i + sum_{unobserved} f_i) / N,
    E[R] = (sum y + sum_U (mu_i - u_i) + S^T m) / N,  Var[R] = (S^T Sigma S + sum_{unobserved} nu_i) / N^2,
    S = sum_U phi_i,

so the variance goes to 0 as the benchmark is exhausted (finite population). ``(m, Sigma)`` is the
posterior of ``beta`` (D = K + 2 dimensions; Woodbury in feature space). Each observation is a rank-one
update, O(B D) with B distinct reference-score vectors (buckets). Hyperparameters ``(tau0, tau1, s2, r2,
rho2)`` are the MAP of the marginal likelihood under weak log-normal priors centred on values read off the
references; they are refit on a geometric schedule (n grows by 25%, at most ``refit_every`` apart) from
warm starts with a bounded number of L-BFGS steps, each evaluation O(n_b D^2 + D^3) over the n_b observed
buckets (at most ``max_fit_buckets``), then one O(B D^2) refresh.

The components (:class:`RefGPEstimator`'s parameters):

* ``mean``: ``reference`` (``mu_i = u_i``); ``logit_shift`` (``mu_i(delta)``, the references' item mean
  shifted by one ability offset in logit space, :mod:`.refgp_means`; ``delta`` refit before the
  hyperparameters); ``evidence_mix`` (both means, sharing the hyperparameters and so the covariance, each with
  its posterior mean of ``beta``; before each observation both predict it and the cumulative one-step-ahead
  Gaussian log predictive densities, the prequential form of the marginal likelihood, give the posterior
  weight ``w`` of the shifted mean, prior 1/2: ``E = w E_shift + (1 - w) E_ref``, the variance adds
  ``w (1 - w) (E_shift - E_ref)^2``, and the hyperparameters are refit under the favoured mean; the shift's
  prior sd is read off the references).
* ``selection``: ``ivr`` (integral variance reduction: the next item maximizes the reduction of Var[R],
  observing j removes ``Delta_j = (phi_j^T Sigma S + nu_j)^2 / (phi_j^T Sigma phi_j + nu_j)``, greedy with
  fantasized updates for batches; ties by a seeded draw within the bucket); ``random`` (uniform over the
  unobserved items, seeded by the session seed and n).
* ``variance``: ``model`` (the posterior variance above); ``calibrated`` (``c(n)^2`` times it, ``c(n) >= 1``
  measured by replaying held-out references as pseudo-targets through the same parameter set with
  ``variance="model"``, :mod:`.calibration`; the estimate and the items are the uncalibrated model's);
  ``design_loo`` (the difference / GREG estimator of survey sampling, Saerndal, Swensson & Wretman 1992
  §6.3, with the model assisting: ``R_hat = (sum_obs y + sum_unobs mu) / N + (1 - n/N) e_bar`` and
  ``Var = (1 - n/N) s_e^2 / n``, ``e_i = (y_i - mu_i) / (1 - h_i)`` the leave-one-out residual of each
  observed item with leverage ``h_i = phi_i^T Sigma phi_i / nu_i``, ``s_e^2`` their variance shrunk towards
  ``rs_mean``'s per-item variance of the raw scores by ``PSEUDO_COUNT`` pseudo-observations; valid under a
  random design only, so it needs ``selection="random"``; with ``evidence_mix`` the residuals are those of
  the weighted prediction, ``w`` held at its current value).
* ``directions``: the number ``K`` of reference directions kept (and with it the residual floor's prior and
  the refit cap, :class:`RefGPEstimator`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, solve_triangular
from scipy.optimize import minimize

from evalplan.core.linalg import jittered_cholesky

from .base import ItemEstimator, derived, one_blas_thread, store_derived
from .calibration import calibration, factor_at
from .config import REFGP_VARIANTS, SessionConfig, refgp_params
from .estimator import rs_mean_s2
from .prior import BucketPrior
from .refgp_means import DELTA_SD, delta_scale, fit_delta, logit_means

K_MAX = 16  # principal directions of the reference scores kept as features (the default ``directions``)
PRIOR_SD = 2.0  # sd of the log-normal hyperpriors of tau0, tau1, s2, r2
RHO_SD = 0.5  # rho2's is tighter: the items selection favours say little about the floor
PRIOR_SDS = np.array([PRIOR_SD] * 4 + [RHO_SD])
RHO_FACTOR = 0.1  # rho2's centre, x the mean item variance over references
# more than K_MAX directions: the wide floor (centred on the mean item variance, log-sd 1) and capped refits
WIDE_RHO_FACTOR = 1.0
WIDE_RHO_SD = 1.0
WIDE_MAX_FIT_BUCKETS = 384
PSEUDO_COUNT = 5.0  # design_loo: weight, in observations, of the raw scores' variance in s_e^2
REFIT_GROWTH = 0.25
REFIT_MAXITER = 30
LOG_2PI = math.log(2.0 * math.pi)


@dataclass(frozen=True)
class RefFeatures:
    """Item features of a reference set, by bucket (shared by all sessions of a prior)."""

    phi: np.ndarray  # (B, D) = [1, u - u_bar, z @ U_K]
    omega: np.ndarray  # (B,) reference variance left unexplained by the K directions
    m0: np.ndarray  # (D,) prior mean of beta
    centers: np.ndarray  # (5,) log hyperprior centres: tau0, tau1, s2, r2, rho2
    u_bar: float

    @property
    def dim(self) -> int:
        return int(self.phi.shape[1])


def ref_features(prior: BucketPrior, k_max: int = K_MAX, rho_factor: float = RHO_FACTOR) -> RefFeatures:
    """The features of ``prior`` with at most ``k_max`` reference directions (computed once per prior,
    settings and process: O(B M^2 + M^3))."""
    key = "refgp_features" if (k_max, rho_factor) == (K_MAX, RHO_FACTOR) else f"refgp_features:{k_max}:{rho_factor}"
    cached = derived(prior, key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    V = prior.bucket_vectors
    Nb = prior.bucket_sizes.astype(np.float64)
    N = float(Nb.sum())
    M = V.shape[1]
    u = V.mean(axis=1)
    u_bar = float(Nb @ u / N)
    Z = (V - u[:, None]) / math.sqrt(max(M - 1, 1))
    gram = Z.T @ (Z * Nb[:, None])  # item-weighted (M, M)
    lam, U = np.linalg.eigh(gram)
    order = np.argsort(lam)[::-1]
    lam, U = lam[order], U[:, order]
    keep = int(np.sum(lam > max(float(lam[0]), 1e-300) * 1e-9)) if lam.size and lam[0] > 0 else 0
    keep = min(keep, k_max)
    F = Z @ U[:, :keep]
    phi = np.column_stack([np.ones_like(u), u - u_bar, F])
    item_var = np.einsum("ij,ij->i", Z, Z)
    omega = np.maximum(item_var - np.einsum("ij,ij->i", F, F), 0.0)
    mean_item_var = max(float(Nb @ item_var / N), 1e-8)
    model_means = Nb @ V / N
    var_models = float(np.var(model_means, ddof=1)) if M > 1 else 0.0
    centers = np.log([max(4.0 * var_models, 1e-4), 0.25, 1.0, 1.0, rho_factor * mean_item_var])
    m0 = np.zeros(phi.shape[1])
    m0[0], m0[1] = u_bar, 1.0
    return store_derived(prior, key,  # type: ignore[no-any-return]
                         RefFeatures(np.ascontiguousarray(phi), omega, m0, centers, u_bar))


def _chol(A: np.ndarray) -> np.ndarray:
    return jittered_cholesky(A, what="posterior precision")


def prior_precision(theta: np.ndarray, n_feat: int) -> np.ndarray:
    t0, t1, s2 = np.exp(theta[:3])
    return np.concatenate([[1.0 / t0, 1.0 / t1], np.full(n_feat, 1.0 / s2)])


def residual_variance(theta: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """``nu = r2 omega + rho2`` per bucket."""
    return np.asarray(math.exp(theta[3]) * omega + math.exp(theta[4]))


def neg_log_evidence(theta: np.ndarray, phi: np.ndarray, omega: np.ndarray, cnt: np.ndarray, ysum: np.ndarray,
                     yysum: np.ndarray, m0: np.ndarray, centers: np.ndarray, sds: np.ndarray = PRIOR_SDS) -> float:
    """-log p(y_C | theta) - log p(theta) over the observed buckets (``phi``, ``omega`` their rows;
    ``cnt``, ``ysum``, ``yysum`` the count, sum and sum of squares of their scores): matrix
    determinant lemma and Woodbury in feature space, O(n_b D^2 + D^3)."""
    p0 = prior_precision(theta, phi.shape[1] - 2)
    nu = residual_variance(theta, omega)
    wt = cnt / nu
    pm = phi @ m0
    r = ysum - cnt * pm  # per-bucket sum of (y - phi m0)
    rr = yysum - 2.0 * ysum * pm + cnt * pm ** 2  # per-bucket sum of (y - phi m0)^2
    c = phi.T @ (r / nu)
    Lam = (phi * wt[:, None]).T @ phi
    Lam.flat[::Lam.shape[0] + 1] += p0
    try:
        L = _chol(Lam)
    except LinAlgError:
        return 1e30
    a = solve_triangular(L, c, lower=True, check_finite=False)
    quad = float((rr / nu).sum()) - float(a @ a)
    logdet = 2.0 * float(np.log(np.diag(L)).sum()) - float(np.log(p0).sum()) + float((cnt * np.log(nu)).sum())
    penalty = 0.5 * float((((theta - centers) / sds) ** 2).sum())
    return float(0.5 * (quad + logdet + float(cnt.sum()) * LOG_2PI) + penalty)


def floor_settings(directions: int) -> tuple[float, float, int | None]:
    """(rho_factor, rho_sd, max_fit_buckets) that follow from ``directions``: up to ``K_MAX`` directions the
    narrow floor (``RHO_FACTOR``, ``RHO_SD``) and refits on every observed bucket; beyond, the wide floor
    (``WIDE_RHO_FACTOR``, ``WIDE_RHO_SD``) and refits on at most ``WIDE_MAX_FIT_BUCKETS`` buckets."""
    if directions <= K_MAX:
        return RHO_FACTOR, RHO_SD, None
    return WIDE_RHO_FACTOR, WIDE_RHO_SD, WIDE_MAX_FIT_BUCKETS


class RefGPEstimator(ItemEstimator):
    """The reference-score GP (the module docstring), its components chosen by parameters (sklearn style: all
    keyword, kept in ``params``; ``RefGPEstimator(prior, config)`` is the ``refgp_ivr`` preset):

    * ``mean``: ``"reference"`` | ``"logit_shift"`` | ``"evidence_mix"``;
    * ``variance``: ``"model"`` | ``"calibrated"`` | ``"design_loo"`` (needs ``selection="random"``);
    * ``selection``: ``"ivr"`` | ``"random"``;
    * ``directions``: at most this many reference directions as features (1..128);
    * ``rho_factor``, ``rho_sd``, ``max_fit_buckets``: the residual floor's prior (centre, x the mean item
      variance over references; log-sd) and the cap on the observed buckets a refit evaluates (0: no cap).
      ``None`` (the default) follows ``directions`` (:func:`floor_settings`): with up to 16 directions
      ``(0.1, 0.5, no cap)``, with more ``(1.0, 1.0, 384)`` (more directions leave a smaller residual, and a
      tiny floor then lets the posterior fit the selected items one by one; a refit costs O(cap D^2)).

    Every combination runs, except ``design_loo`` without random items (ValueError naming
    ``method_params``). The presets (``config.REFGP_VARIANTS``) with their floor following ``directions`` are
    exactly the former classes; ``method`` is the preset's name (``refgp_ivr``, ``refgp_v2``, ``refgp_v3``,
    ``refgp_cal``, ``refgp_dr``; it names the calibration curve in the prior's cache) or ``"refgp"`` for
    another combination. ``variance="calibrated"`` replays this class with ``variance="model"`` and the other
    parameters equal, once per (prior, parameter set, process)."""

    def __init__(self, prior: BucketPrior, config: SessionConfig, *, mean: str = "reference",
                 variance: str = "model", selection: str = "ivr", directions: int = K_MAX,
                 rho_factor: float | None = None, rho_sd: float | None = None,
                 max_fit_buckets: int | None = None) -> None:
        public = refgp_params({"mean": mean, "variance": variance, "selection": selection,
                               "directions": directions})
        auto = floor_settings(directions)
        floor = (auto[0] if rho_factor is None else float(rho_factor), auto[1] if rho_sd is None else float(rho_sd),
                 auto[2] if max_fit_buckets is None else (int(max_fit_buckets) or None))
        if not (floor[0] > 0 and floor[1] > 0 and math.isfinite(floor[0]) and math.isfinite(floor[1])):
            raise ValueError(f"rho_factor, rho_sd: must be finite and > 0, got {floor[0]!r}, {floor[1]!r}")
        if floor[2] is not None and floor[2] < 1:
            raise ValueError(f"max_fit_buckets: must be >= 0 (0: no cap), got {max_fit_buckets!r}")
        super().__init__(prior, config)
        self.params: dict[str, Any] = {**public, "rho_factor": floor[0], "rho_sd": floor[1],
                                       "max_fit_buckets": floor[2] or 0}
        preset = next((name for name, p in REFGP_VARIANTS.items() if p == public), None)
        self.method = preset if preset is not None and floor == auto else "refgp"
        self.max_fit_buckets = floor[2]
        self.prior_sds = np.array([PRIOR_SD] * 4 + [floor[1]])
        self._shifted = mean in ("logit_shift", "evidence_mix")
        self._mix = mean == "evidence_mix"
        self._curve: np.ndarray | None = None
        if variance == "calibrated":
            model = {**self.params, "variance": "model"}
            tag = self.method if self.method != "refgp" else "refgp[" + ",".join(
                f"{k}={v}" for k, v in sorted(model.items()) if k != "variance") + "]"
            self._curve = calibration(prior, partial(RefGPEstimator, **model), self.method, seed=0, tag=tag)
        self.features = feats = ref_features(prior, directions, floor[0])
        self._phi = feats.phi
        self._n_feat = feats.dim - 2
        B = prior.n_buckets
        self._w = prior.bucket_sizes.astype(np.float64)  # unobserved items per bucket
        self._S = self._phi.T @ self._w
        self._cnt = np.zeros(B)  # observed: count, sum and sum of squares of the scores per bucket
        self._ysum = np.zeros(B)
        self._yysum = np.zeros(B)
        self._off = np.zeros(B)  # the prior mean's offset from the references' mean per bucket (mu - u)
        self._off_U = 0.0  # sum of the offsets over the unobserved items
        self.delta = 0.0  # the logit shift (logit_shift, evidence_mix)
        self.delta_sd = delta_scale(prior) if self._mix else DELTA_SD  # its prior sd
        self._m_alt = np.zeros(0)  # evidence_mix: the posterior mean of beta under the references' mean
        self._logscore = np.zeros(2)  # cumulative one-step-ahead log predictive: [shifted, unshifted]
        if self._shifted:
            self._logits, self._lo, self._hi = logit_means(prior)
            self._set_offsets()
        self._theta = feats.centers.copy()
        self._next_refit = 3
        self._install()
        self._set_estimate()

    # ------------------------------------------------------------------ posterior
    @property
    def hyperparameters(self) -> dict[str, Any]:
        t0, t1, s2, r2, rho2 = (float(v) for v in np.exp(self._theta))
        out: dict[str, Any] = {"tau0": t0, "tau1": t1, "s2": s2, "r2": r2, "rho2": rho2,
                               "n_features": int(self._n_feat)}
        if self._shifted:
            out["delta"] = float(self.delta)
        return out

    @property
    def weight_shifted(self) -> float:
        """Posterior weight of the shifted mean: its prequential likelihood ratio (prior 1/2) for
        ``evidence_mix``; 1 for ``logit_shift``, 0 for ``reference``."""
        if not self._mix:
            return 1.0 if self._shifted else 0.0
        d = float(self._logscore[1] - self._logscore[0])
        return 1.0 / (1.0 + math.exp(min(d, 700.0)))

    @property
    def variance_inflation(self) -> float:
        """``c(n)`` now (``variance="calibrated"``; 1 otherwise). Not in ``hyperparameters``: it moves with
        every observation, they at refits."""
        return 1.0 if self._curve is None else factor_at(self._curve, self.n_observed)

    def _set_offsets(self) -> None:
        mu = self._lo + (self._hi - self._lo) / (1.0 + np.exp(-(self._logits + self.delta)))
        self._off = mu - self.prior.bucket_means
        self._off_U = float(self._w @ self._off)

    def _install(self) -> None:
        """Posterior (m, Sigma), residuals nu and per-bucket variances d from the per-bucket
        statistics: O(n_b D^2 + D^3 + B D^2)."""
        p0 = prior_precision(self._theta, self._n_feat)
        self._nu = residual_variance(self._theta, self.features.omega)
        obs = np.flatnonzero(self._cnt)
        phi_o = self._phi[obs]
        Lam = (phi_o * (self._cnt[obs] / self._nu[obs])[:, None]).T @ phi_o
        Lam[np.diag_indices_from(Lam)] += p0
        L = _chol(Lam)
        Sigma = cho_solve((L, True), np.eye(Lam.shape[0]), check_finite=False)
        self._Sigma = 0.5 * (Sigma + Sigma.T)
        ysum, _ = self._ystats(obs, self._off)
        self._m = self._Sigma @ (p0 * self.features.m0 + phi_o.T @ (ysum / self._nu[obs]))
        self._d = np.einsum("ij,ij->i", self._phi @ self._Sigma, self._phi)
        self._nu_U = float(self._w @ self._nu)
        if self._mix:  # the unshifted mean's posterior (same covariance)
            b = p0 * self.features.m0 + phi_o.T @ (self._ysum[obs] / self._nu[obs])
            self._m_alt = self._Sigma @ b

    def _update(self, item: int, score: float) -> None:
        b = int(self.prior.bucket_of_item[item])
        phi = self._phi[b]
        nu = float(self._nu[b])
        g = self._Sigma @ phi
        den = nu + float(phi @ g)
        if self._mix:  # score both means' predictions of the item before seeing it (the common log(den) cancels)
            r_shift = score - float(self._off[b]) - float(phi @ self._m)
            r_alt = score - float(phi @ self._m_alt)
            self._logscore -= 0.5 * np.array([r_shift, r_alt]) ** 2 / den
            self._m_alt = self._m_alt + g * (r_alt / den)
        self._m = self._m + g * ((score - float(self._off[b]) - float(phi @ self._m)) / den)
        self._Sigma -= np.outer(g, g) / den
        self._d -= (self._phi @ g) ** 2 / den
        np.maximum(self._d, 0.0, out=self._d)
        self._w[b] -= 1.0
        self._S = self._S - phi
        self._nu_U -= nu
        self._off_U -= float(self._off[b])
        self._cnt[b] += 1.0
        self._ysum[b] += score
        self._yysum[b] += score * score

    def _after_observe(self) -> None:
        n = self.n_observed
        if self.config.refit_every == 0 or n < self._next_refit or n >= self.n_items:
            return
        self.refit()
        gap = max(1, math.ceil(REFIT_GROWTH * n))
        if self.config.refit_every > 0:
            gap = min(gap, self.config.refit_every)
        self._next_refit = n + gap

    def refit(self) -> None:
        """MAP hyperparameters (the logit shift first) from the current observations (warm start, bounded
        L-BFGS)."""
        with one_blas_thread():
            self._refit_offset()
            self._theta = self._map_theta(self._fit_buckets())
            self.n_refits += 1
            self._install()

    def _map_theta(self, obs: np.ndarray) -> np.ndarray:
        """MAP hyperparameters on the buckets ``obs``, warm-started at the current ones (bounded L-BFGS); the
        current ones if the fit is not finite. The prior mean is the current one, for ``evidence_mix`` the one
        the prequential evidence favours (the shifted one, or the references' own)."""
        off = self._off
        if self._mix and self.weight_shifted < 0.5:
            off = np.zeros_like(off)
        c = self.features.centers
        ysum, yysum = self._ystats(obs, off)
        args = (self._phi[obs], self.features.omega[obs], self._cnt[obs], ysum, yysum, self.features.m0, c,
                self.prior_sds)
        res = minimize(neg_log_evidence, self._theta, args=args, method="L-BFGS-B",
                       bounds=[(ci - 4 * sd, ci + 4 * sd) for ci, sd in zip(c, self.prior_sds)],
                       options={"maxiter": REFIT_MAXITER})
        if np.all(np.isfinite(res.x)):
            return np.asarray(res.x, dtype=np.float64)
        return self._theta

    def _ystats(self, obs: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-bucket sum and sum of squares of the observed scores minus the offset ``off``, on ``obs``."""
        o, c, ys = off[obs], self._cnt[obs], self._ysum[obs]
        return ys - c * o, self._yysum[obs] - 2.0 * o * ys + c * o * o

    def _refit_offset(self) -> None:
        """The MAP of the logit shift (``logit_shift``, ``evidence_mix``): Newton on per-bucket sums, O(n_b)."""
        if not self._shifted:
            return
        obs = np.flatnonzero(self._cnt)
        cnt = self._cnt[obs]
        span = self._hi - self._lo
        y01 = np.clip((self._ysum[obs] - cnt * self._lo) / span, 0.0, cnt)
        d = fit_delta(self._logits[obs], cnt, y01, self.delta, self.delta_sd)
        if math.isfinite(d):
            self.delta = d
            self._set_offsets()

    def _fit_buckets(self) -> np.ndarray:
        """The observed buckets a refit uses: all, or a seeded uniform subset of ``max_fit_buckets``
        of them (bounds a refit's cost at O(max_fit_buckets D^2) per evaluation)."""
        obs = np.flatnonzero(self._cnt)
        cap = self.max_fit_buckets
        if cap is None or obs.size <= cap:
            return obs
        rng = np.random.default_rng([self.config.seed, self.n_observed, 7])
        return np.sort(rng.choice(obs, size=cap, replace=False))

    def predicted_means(self, rows: Any = slice(None)) -> np.ndarray:
        """The posterior mean of an item of each bucket in ``rows`` (all by default): ``evidence_mix``'s
        weighted between its two means."""
        P = self._phi[rows]
        mu = self._off[rows] + P @ self._m
        if self._mix and self._m_alt.size:
            w = self.weight_shifted
            mu = w * mu + (1.0 - w) * (P @ self._m_alt)
        return np.asarray(mu)

    # ------------------------------------------------------------------ estimate
    def _set_estimate(self) -> None:
        N = float(self.n_items)
        S = self._S
        self.estimate = float((self._sum_s + self._off_U + float(S @ self._m)) / N)
        var = (float(S @ self._Sigma @ S) + max(self._nu_U, 0.0)) / (N * N)
        self.variance = float(max(var, 0.0))
        if self._mix and self._m_alt.size:
            e_alt = float((self._sum_s + float(self._S @ self._m_alt)) / N)
            w = self.weight_shifted
            e_shift = self.estimate
            self.estimate = w * e_shift + (1.0 - w) * e_alt
            self.variance += w * (1.0 - w) * (e_shift - e_alt) ** 2
        if self._curve is not None:
            c = factor_at(self._curve, self.n_observed)
            self.variance *= c * c
        elif self.params["variance"] == "design_loo":
            self._set_design_estimate()

    def loo_residuals(self) -> tuple[float, float]:
        """(sum, sum of squares) of the observed items' leave-one-out residuals (``design_loo``; the module
        docstring): exact for fixed hyperparameters, O(n_b D^2)."""
        obs = np.flatnonzero(self._cnt)
        P = self._phi[obs]
        pm = self.predicted_means(obs)
        leverage = np.einsum("ij,ij->i", P @ self._Sigma, P) / self._nu[obs]
        inv = 1.0 / np.maximum(1.0 - leverage, 1e-6)
        cnt, ysum, yysum = self._cnt[obs], self._ysum[obs], self._yysum[obs]
        total = float(((ysum - cnt * pm) * inv).sum())
        squares = float(((yysum - 2.0 * ysum * pm + cnt * pm * pm) * inv * inv).sum())
        return total, squares

    def _set_design_estimate(self) -> None:
        """``design_loo``: the difference estimator over the model's estimate (what n = 0 reports)."""
        n = self.n_observed
        if n == 0:
            return
        N = float(self.n_items)
        total, squares = self.loo_residuals()
        mean = total / n
        ss = max(squares - n * mean * mean, 0.0)
        s2 = (ss + PSEUDO_COUNT * rs_mean_s2(np.asarray(self._scores))) / (n - 1 + PSEUDO_COUNT)
        fpc = max(1.0 - n / N, 0.0)
        self.estimate = float(self.estimate + fpc * mean)
        self.variance = float(fpc * s2 / n) if math.isfinite(s2) else float(self.variance)

    # ------------------------------------------------------------------ selection
    def variance_reduction(self) -> np.ndarray:
        """Delta per bucket (N^2 units; -inf for buckets with no unobserved item)."""
        return self._scores_of(self._Sigma, self._S, self._d, self._w)

    def _scores_of(self, Sigma: np.ndarray, S: np.ndarray, d: np.ndarray, w: np.ndarray) -> np.ndarray:
        t = self._phi @ (Sigma @ S)
        score = (t + self._nu) ** 2 / (d + self._nu)
        score[w <= 0] = -np.inf
        return np.asarray(score)

    def _select(self, k: int) -> list[int]:
        rng = np.random.default_rng([self.config.seed, self.n_observed])
        if self.params["selection"] == "random":
            unobserved = np.flatnonzero(~self._observed)
            return [int(i) for i in rng.choice(unobserved, size=k, replace=False)]
        p = self.prior
        Sigma, S, d, w = self._Sigma, self._S, self._d, self._w
        picked: list[int] = []
        for j in range(k):
            b = int(np.argmax(self._scores_of(Sigma, S, d, w)))
            items = p.items_by_bucket[p.bucket_offsets[b]:p.bucket_offsets[b + 1]]
            cand = items[~self._observed[items]]
            if picked:
                cand = cand[~np.isin(cand, picked)]
            picked.append(int(rng.choice(cand)))
            if j + 1 < k:  # fantasized: the posterior covariance does not depend on the score
                if j == 0:
                    Sigma, S, d, w = Sigma.copy(), S.copy(), d.copy(), w.copy()
                phi = self._phi[b]
                g = Sigma @ phi
                den = float(self._nu[b]) + float(phi @ g)
                Sigma -= np.outer(g, g) / den
                d = np.maximum(d - (self._phi @ g) ** 2 / den, 0.0)
                w[b] -= 1.0
                S = S - phi
        return picked
