"""tinyBenchmarks IRT, faithful to the authors' code (Maia Polo et al. 2024, "tinyBenchmarks:
evaluating LLMs with fewer examples", §3 and App. B; the gp-IRT baseline of the coreset paper
papers/002 §2.4). The reference is felipemaiapolo/tinyBenchmarks (``tutorials/training_irt.ipynb``,
``anchor_points.ipynb``, ``estimating_performance.ipynb``, ``irt.py``, ``utils.py``) with the IRT
model of its py-irt fork (``py_irt/models/multidim_2pl.py``, ``training.py``); every default below is
theirs, and ``bench/coresets/tinybenchmarks_side_by_side.py`` runs their code next to this module.

The pipeline (``Y`` the references x items matrix, scores in [0, 1]):

1. **Binarize** (:func:`binarize`): a threshold ``c`` in ``linspace(0.01, 0.99, 100)`` minimising the
   mean over models of ``|mean(Y > c) - mean(Y)|`` (0/1 data is unchanged).
2. **IRT model** (:func:`fit_multidim_2pl`): py-irt's ``multidim_2pl`` with ``--priors hierarchical``:
   ``P(y_ij = 1) = sigmoid(sum_d (a_id theta_jd - b_i))`` (the difficulty is subtracted in every
   dimension, as py-irt and ``utils.item_curve`` do), priors ``theta_j ~ N(mu_theta, 1/u_theta)``,
   ``a_i ~ N(mu_a, 1/u_a)``, ``b_i ~ N(mu_b, 1/u_b)``, ``mu ~ N(0, 10)``, ``u ~ Gamma(1, 1)``; fitted by
   stochastic variational inference (mean-field Normal / Gamma guide, one-sample ELBO, Adam with
   ``lr = 0.1`` decayed by 0.9999 per epoch, 2000 epochs, seed 42); the parameters kept are the
   guide means after the epoch with the lowest loss (py-irt's ``best_parameters.json``). The random
   draws are made in py-irt's order (the first model and guide calls included), so that with the
   same seed the fit is py-irt's to float32 round-off.
3. **Dimension** (:func:`select_dimension`): ``D`` in ``(5, 10)`` by their validation heuristic: fit on
   the references except every fifth, estimate each held-out reference's ability on the even items
   and take ``mean |mean_{odd items} P - mean_{odd items} y|``; the smallest wins. That error is also
   ``b_hat``, the bias of the IRT part used by gp-IRT's lambda.
4. **Anchors** (:class:`IRTSelection`): ``KMeans(k, n_init="auto", random_state=seed)`` on the item
   embeddings ``[a_i, b_i]``, the item nearest each centroid, weights = cluster sizes / N.
5. **Estimates** (:class:`IRTPredictor`): a new model's ability by maximum likelihood on its anchor
   scores (``scipy`` BFGS from 0 on ``sum y log(P + eps) + (1 - y) log(1 - P + eps)``, their
   ``estimate_ability_parameters``); then, with ``n`` anchors of ``N`` items,
   p-IRT ``= (n/N) mean_{anchors} y + (1 - n/N) mean_{other items} P(theta)``, and
   gp-IRT ``= lam * sum_i w_i y_i + (1 - lam) * p-IRT`` with
   ``lam = b_hat^2 / (b_hat^2 + v / (4 n))``, ``v`` the mean over references of their score variance
   across items (``training_irt.ipynb``, ``get_lambda``).

Two deliberate departures, both documented in docs/DECISIONS.md "tinyBenchmarks IRT": the anchors
are made distinct by default (their ``argmin`` may pick one item for two centroids; a coreset is a set, so a
taken item yields to the next nearest free one, :func:`irt_anchors`), and torch is
imported only inside :func:`fit_multidim_2pl` (the API process never fits). ``distinct_anchors=False``
(:class:`IRTSelection`) keeps their rule instead: the notebook's ``argmin``, an item picked by ``c``
centroids is one coreset item with the ``c`` clusters' weights summed, and :class:`IRTPredictor`
(``listing``: their anchor list as positions in the coreset) counts it ``c`` times in their list's order,
as their ``Y_test[:, anchor_points]`` does (in the ability likelihood, the anchor mean and p-IRT's
``n/N``, with ``n`` = the number of centroids); issue 35 item 2 found the two rules 0.35 points apart on
one split (docs/RESULTS.md, tinyBenchmarks side by side).
"""

from __future__ import annotations

import hashlib
import numbers
from dataclasses import dataclass
from threading import Lock
from typing import Any, NamedTuple

import numpy as np
from cachetools import LRUCache
from scipy.optimize import minimize
from sklearn.base import BaseEstimator
from sklearn.cluster import KMeans
from sklearn.metrics.pairwise import pairwise_distances

from evalplan.core.coresets.intervals import cross_fitted_errors

__all__ = [
    "DIMS",
    "IRT_CALIBRATION_FOLDS",
    "irt_anchors",
    "irt_cross_fitted_errors",
    "EPOCHS",
    "LR",
    "LR_DECAY",
    "SEED",
    "IRTEstimates",
    "IRTFit",
    "IRTPredictor",
    "IRTSelection",
    "binarize",
    "estimate_theta",
    "fit_multidim_2pl",
    "gp_irt_lambda",
    "irt_predictor_for",
    "merge_repeated_anchors",
    "mirt_item_curve",
    "select_dimension",
]

DIMS = (5, 10)  # training_irt.ipynb: "Ds = [5,10] # Dimensions to try"
EPOCHS = 2000  # py-irt default (the notebook keeps it)
LR = 0.1  # py-irt default
LR_DECAY = 0.9999  # py-irt IrtConfig.lr_decay default
SEED = 42  # the notebooks' random_state and the CLI's --seed
EPS = 1e-10  # estimate_ability_parameters' eps
THRESHOLDS = np.linspace(0.01, 0.99, 100)  # training_irt.ipynb binarisation grid


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------


def _check_responses(Y: Any) -> np.ndarray:
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[0] < 1 or Y.shape[1] < 1:
        raise ValueError(f"Y must be a non-empty 2-D (models x items) array, got shape {Y.shape}")
    if not np.isfinite(Y).all():
        raise ValueError("Y must be finite (impute missing scores first)")
    if np.any((Y < 0) | (Y > 1)):
        raise ValueError("Y must hold scores in [0, 1]")
    return np.asarray(Y)


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def binarize(Y: Any) -> tuple[np.ndarray, float]:
    """``(Y > c, c)`` with tinyBenchmarks' threshold: the ``c`` of ``linspace(0.01, 0.99, 100)`` whose
    binarised model means are closest (mean absolute difference) to the raw ones; first on ties."""
    Y = _check_responses(Y)
    means = Y.mean(axis=1)
    gaps = [float(np.mean(np.abs((Y > c).mean(axis=1) - means))) for c in THRESHOLDS]
    c = float(THRESHOLDS[int(np.argmin(gaps))])
    return (Y > c).astype(np.float64), c


def mirt_item_curve(theta: Any, a: Any, b: Any) -> np.ndarray:
    """The multidimensional 2PL of tinyBenchmarks (``utils.item_curve``): each dimension's logit clipped,
    then summed, ``P[j, i] = sigmoid(sum_d clip(a_id theta_jd - b_i, -30, 30))`` for ``theta (m x D)``,
    ``a (n x D)``, ``b (n,)``; not :func:`evalplan.core.irt.irt_jml.twopl_item_curve` (one unclipped logit)."""
    theta = np.atleast_2d(np.asarray(theta, dtype=np.float64))
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64).ravel()
    z = np.clip(theta[:, None, :] * a[None, :, :] - b[None, :, None], -30.0, 30.0).sum(axis=2)
    return np.asarray(1.0 / (1.0 + np.exp(-z)))


# --------------------------------------------------------------------------------------------
# the IRT model: py-irt multidim_2pl, hierarchical priors, SVI
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IRTFit:
    """Guide means of the best epoch: ``a (n x D)`` (py-irt ``disc``), ``b (n,)`` (``diff``),
    ``theta (m x D)`` (``ability``); ``loss`` the best epoch's ELBO loss."""

    a: np.ndarray
    b: np.ndarray
    theta: np.ndarray
    loss: float


_FIT_CACHE_SIZE = 64
_FIT_CACHE: LRUCache[tuple[Any, ...], IRTFit] = LRUCache(maxsize=_FIT_CACHE_SIZE)
_FIT_CACHE_LOCK = Lock()


def fit_multidim_2pl(Y_bin: Any, dim: int, *, epochs: int = EPOCHS, lr: float = LR,
                     lr_decay: float = LR_DECAY, seed: int = SEED) -> IRTFit:
    """Fit py-irt's ``multidim_2pl`` (hierarchical priors) to a 0/1 matrix by SVI, as
    ``py-irt train multidim_2pl --priors hierarchical --seed S --lr LR --epochs E --dims D`` does.

    Deterministic for given arguments (a private ``torch.Generator`` seeded with ``seed``); results
    are cached by the matrix's hash and the arguments, so a backtest refitting the same references
    for several budgets fits once."""
    Yb = np.asarray(Y_bin, dtype=np.float64)
    if Yb.ndim != 2 or not np.isin(Yb, (0.0, 1.0)).all():
        raise ValueError("Y_bin must be a 2-D matrix of 0/1 responses")
    dim = _check_int("dim", dim, 1)
    epochs = _check_int("epochs", epochs, 1)
    if not (lr > 0 and np.isfinite(lr)) or not (0 < lr_decay <= 1):
        raise ValueError("lr must be positive and lr_decay in (0, 1]")
    key = (hashlib.sha1(np.ascontiguousarray(Yb.astype(np.int8)).tobytes()).hexdigest(), Yb.shape, dim, epochs,
           float(lr), float(lr_decay), int(seed))
    with _FIT_CACHE_LOCK:
        if key in _FIT_CACHE:
            return _FIT_CACHE[key]  # a hit is the most recently used
    fit = _svi(Yb, dim, epochs, float(lr), float(lr_decay), int(seed))
    with _FIT_CACHE_LOCK:
        _FIT_CACHE[key] = fit  # the least recently used leaves beyond _FIT_CACHE_SIZE
    return fit


def _svi(Yb: np.ndarray, dim: int, epochs: int, lr: float, lr_decay: float, seed: int) -> IRTFit:
    import torch  # only the fitting worker needs torch
    from torch.distributions import Gamma, Normal
    from torch.nn.functional import binary_cross_entropy_with_logits

    m, n = Yb.shape
    gen = torch.Generator().manual_seed(seed)
    obs = torch.tensor(Yb, dtype=torch.float32)

    def normal(loc: torch.Tensor, scale: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        # Normal.rsample: loc + eps * scale, eps standard normal draws of the broadcast shape
        return loc + torch.empty(shape).normal_(generator=gen) * scale

    def gamma(conc: torch.Tensor, rate: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        # Gamma.rsample: standard gamma draws (implicitly reparameterised) / rate, clamped at tiny
        draw = torch._standard_gamma(conc.expand(shape), generator=gen) / rate.expand(shape)
        draw.detach().clamp_(min=torch.finfo(draw.dtype).tiny)  # as torch: not recorded by autograd
        return draw

    zeros = torch.zeros
    # guide parameters, unconstrained (positive ones as logs: pyro's transform_to(positive) = exp)
    names_shapes = [("loc_mu_b", (1,), 0.0), ("scale_mu_b", (1,), None), ("loc_mu_theta", (dim,), 0.0),
                    ("scale_mu_theta", (dim,), None), ("loc_mu_gamma", (dim,), 0.0), ("scale_mu_gamma", (dim,), None),
                    ("alpha_b", (1,), None), ("beta_b", (1,), None), ("alpha_theta", (dim,), None),
                    ("beta_theta", (dim,), None), ("alpha_gamma", (dim,), None), ("beta_gamma", (dim,), None),
                    ("loc_ability", (m, dim), 0.0), ("scale_ability", (m, dim), None),
                    ("loc_diff", (n, 1), 0.0), ("scale_diff", (n, 1), None),
                    ("loc_disc", (n, dim), 0.0), ("scale_disc", (n, dim), None)]
    raw = {name: zeros(shape, requires_grad=True) for name, shape, _ in names_shapes}
    positive = {name for name, _, loc in names_shapes if loc is None}

    def p(name: str) -> torch.Tensor:
        return raw[name].exp() if name in positive else raw[name]

    s10, s1 = torch.tensor(10.0), torch.tensor(1.0)
    s0 = torch.tensor(0.0)

    def prior_draws() -> None:  # the model's first, unconditioned call (py-irt's training.train)
        with torch.no_grad():
            mu_b = normal(s0, s10, (1,))
            u_b = gamma(s1, s1, (1,))
            mu_t = normal(s0, s10, (dim,))
            u_t = gamma(s1, s1, (dim,))
            mu_g = normal(s0, s10, (dim,))
            u_g = gamma(s1, s1, (dim,))
            normal(mu_t, 1.0 / u_t, (m, dim))
            normal(mu_b, 1.0 / u_b, (n, 1))
            normal(mu_g, 1.0 / u_g, (n, dim))

    def guide_draws() -> dict[str, torch.Tensor]:
        z = {"mu_b": normal(p("loc_mu_b"), p("scale_mu_b"), (1,)),
             "u_b": gamma(p("alpha_b"), p("beta_b"), (1,)),
             "mu_theta": normal(p("loc_mu_theta"), p("scale_mu_theta"), (dim,)),
             "u_theta": gamma(p("alpha_theta"), p("beta_theta"), (dim,)),
             "mu_gamma": normal(p("loc_mu_gamma"), p("scale_mu_gamma"), (dim,)),
             "u_gamma": gamma(p("alpha_gamma"), p("beta_gamma"), (dim,))}
        z["theta"] = normal(p("loc_ability"), p("scale_ability"), (m, dim))
        z["b"] = normal(p("loc_diff"), p("scale_diff"), (n, 1))
        z["gamma"] = normal(p("loc_disc"), p("scale_disc"), (n, dim))
        return z

    def N(loc: torch.Tensor, scale: torch.Tensor) -> Any:  # torch.distributions is untyped
        return Normal(loc, scale, validate_args=False)

    def G(conc: torch.Tensor, rate: torch.Tensor) -> Any:
        return Gamma(conc, rate, validate_args=False)

    def elbo_terms(z: dict[str, torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        # sum_d (a_id theta_jd - b_i) = theta_j . a_i - D b_i: a matrix product instead of py-irt's
        # (m, n, D) broadcast (the same value up to float32 round-off, far fewer operations)
        logits = z["theta"] @ z["gamma"].T - float(dim) * z["b"].T
        model = [N(s0, s10).log_prob(z["mu_b"]).sum(), G(s1, s1).log_prob(z["u_b"]).sum(),
                 N(s0, s10).log_prob(z["mu_theta"]).sum(), G(s1, s1).log_prob(z["u_theta"]).sum(),
                 N(s0, s10).log_prob(z["mu_gamma"]).sum(), G(s1, s1).log_prob(z["u_gamma"]).sum(),
                 N(z["mu_theta"], 1.0 / z["u_theta"]).log_prob(z["theta"]).sum(),
                 N(z["mu_b"], 1.0 / z["u_b"]).log_prob(z["b"]).sum(),
                 N(z["mu_gamma"], 1.0 / z["u_gamma"]).log_prob(z["gamma"]).sum(),
                 -binary_cross_entropy_with_logits(logits, obs, reduction="sum")]  # Bernoulli(logits).log_prob
        guide = [N(p("loc_mu_b"), p("scale_mu_b")).log_prob(z["mu_b"]).sum(),
                 G(p("alpha_b"), p("beta_b")).log_prob(z["u_b"]).sum(),
                 N(p("loc_mu_theta"), p("scale_mu_theta")).log_prob(z["mu_theta"]).sum(),
                 G(p("alpha_theta"), p("beta_theta")).log_prob(z["u_theta"]).sum(),
                 N(p("loc_mu_gamma"), p("scale_mu_gamma")).log_prob(z["mu_gamma"]).sum(),
                 G(p("alpha_gamma"), p("beta_gamma")).log_prob(z["u_gamma"]).sum(),
                 N(p("loc_ability"), p("scale_ability")).log_prob(z["theta"]).sum(),
                 N(p("loc_diff"), p("scale_diff")).log_prob(z["b"]).sum(),
                 N(p("loc_disc"), p("scale_disc")).log_prob(z["gamma"]).sum()]
        return model, guide

    prior_draws()
    with torch.no_grad():
        guide_draws()  # the guide's first call
    params = [raw[name] for name, _, _ in names_shapes]
    opt = torch.optim.Adam(params, lr=lr, foreach=True)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=lr_decay)
    best = float("inf")
    kept: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    for _ in range(epochs):
        model_lp, guide_lp = elbo_terms(guide_draws())
        # pyro's Trace_ELBO: the loss is a sum of per-site floats; the gradient is of the same sum
        elbo, surrogate = 0.0, torch.zeros(())
        for t in model_lp:
            elbo, surrogate = elbo + float(t.detach()), surrogate + t
        for t in guide_lp:
            elbo, surrogate = elbo - float(t.detach()), surrogate - t
        loss = -elbo
        opt.zero_grad()
        loss_tensor: Any = -surrogate
        loss_tensor.backward()
        opt.step()
        if loss < best:
            best = loss
            with torch.no_grad():
                kept = (raw["loc_disc"].detach().numpy().astype(np.float64).copy(),
                        raw["loc_diff"].detach().numpy().astype(np.float64).ravel().copy(),
                        raw["loc_ability"].detach().numpy().astype(np.float64).copy())
        sched.step()
    assert kept is not None
    return IRTFit(a=kept[0], b=kept[1], theta=kept[2], loss=best)


# --------------------------------------------------------------------------------------------
# abilities, dimension, lambda
# --------------------------------------------------------------------------------------------


def estimate_theta(y: Any, a: Any, b: Any, eps: float = EPS) -> np.ndarray:
    """Maximum-likelihood ability of one model from its scores ``y`` on items ``a (n x D)``,
    ``b (n,)``: tinyBenchmarks' ``estimate_ability_parameters`` (BFGS from 0, numerical gradient,
    ``log(P + eps)``; no prior). Returns ``(D,)``."""
    y = np.asarray(y, dtype=np.float64).ravel()
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.ndim != 2 or a.shape[0] != y.shape[0] or b.shape[0] != y.shape[0]:
        raise ValueError("y, a (n x D) and b (n,) must have the same number of items")

    def nll(t: np.ndarray) -> float:
        P = mirt_item_curve(t[None, :], a, b)[0]
        return -float(np.sum(y * np.log(P + eps) + (1.0 - y) * np.log(1.0 - P + eps)))

    return np.asarray(minimize(nll, np.zeros(a.shape[1]), method="BFGS").x)


def _validation_split(m: int) -> tuple[np.ndarray, np.ndarray]:
    val = np.arange(0, m, 5)  # training_irt.ipynb: val_ind = range(0, n_models, 5)
    return np.setdiff1d(np.arange(m), val), val


def select_dimension(Y: Any, dims: tuple[int, ...] = DIMS, *, epochs: int = EPOCHS, lr: float = LR,
                     seed: int = SEED) -> tuple[int, dict[int, float]]:
    """tinyBenchmarks' dimension heuristic: per ``D`` in ``dims`` the validation error
    ``mean_j |mean_{odd} P_j - mean_{odd} y_j|`` (abilities on the even items) of an IRT model fitted
    on the references except every fifth; returns ``(best D, {D: error})`` (first on ties)."""
    Y = _check_responses(Y)
    m, n = Y.shape
    if m < 2 or n < 2:
        raise ValueError("the dimension heuristic needs at least 2 references and 2 items")
    Yb, _ = binarize(Y)
    train, val = _validation_split(m)
    if train.size == 0:
        raise ValueError("the dimension heuristic needs at least 2 references")
    seen, unseen = np.arange(0, n, 2), np.arange(1, n, 2)
    errors: dict[int, float] = {}
    for d in dims:
        fit = fit_multidim_2pl(Yb[train], d, epochs=epochs, lr=lr, seed=seed)
        err = []
        for j in val:
            th = estimate_theta(Yb[j, seen], fit.a[seen], fit.b[seen])
            err.append(abs(float(mirt_item_curve(th, fit.a, fit.b)[0, unseen].mean()) - float(Y[j, unseen].mean())))
        errors[int(d)] = float(np.mean(err))
    best = min(errors, key=lambda d: (errors[d], list(errors).index(d)))
    return best, errors


def gp_irt_lambda(bias: float, Y: Any, n_anchors: int) -> float:
    """``lam = b^2 / (b^2 + v / (4 n))``, ``v`` the mean over references of the variance of their
    scores across items (training_irt.ipynb ``get_lambda(b, v / (4 * number_item))``)."""
    v = float(np.var(np.asarray(Y, dtype=np.float64), axis=1).mean())
    b2 = float(bias) ** 2
    denom = b2 + v / (4.0 * n_anchors)
    return float(b2 / denom) if denom > 0 else 1.0


# --------------------------------------------------------------------------------------------
# anchors
# --------------------------------------------------------------------------------------------


class IRTSelection(BaseEstimator):  # type: ignore[misc]  # scikit-learn ships no type stubs
    """tinyBenchmarks IRT anchor points: the IRT model (dimension by the validation heuristic unless
    ``dim`` is given), ``KMeans(k, n_init="auto", random_state=seed)`` on ``[a_i, b_i]``, per
    cluster the nearest item (distinct), weights = cluster sizes / N.

    Fitted: ``ranking_`` (k items, in cluster order), ``weights_`` (sum 1), ``gains_`` (NaN), ``a_``,
    ``b_``, ``theta_`` (the IRT fit on all references), ``dim_``, ``dim_errors_`` ({D: validation
    error}), ``bias_`` (the chosen D's validation error, gp-IRT's ``b_hat``), ``threshold_``, ``listing_``
    (tinyBenchmarks' anchor list, one entry per centroid, as positions in ``ranking_``: ``arange(k)``
    unless ``distinct_anchors=False`` let two centroids pick one item).

    ``distinct_anchors`` (default True, our departure): a centroid whose nearest item is taken gets the
    next nearest free one, so the coreset has ``k`` items; False is tinyBenchmarks' own rule
    (``anchor_points.ipynb``: ``pairwise_distances(centers, X).argmin(axis=1)``, paper §3, anchor points
    as the examples closest to the centroids of the IRT-representation clusters), which may give fewer
    than ``k`` distinct items, each counted once per centroid (pass ``listing_`` to :class:`IRTPredictor`).
    """

    ranking_: np.ndarray
    weights_: np.ndarray
    a_: np.ndarray
    b_: np.ndarray
    theta_: np.ndarray
    bias_: float

    def __init__(self, k: int, seed: int = SEED, dim: int | None = None, epochs: int = EPOCHS,
                 lr: float = LR, distinct_anchors: bool = True) -> None:
        self.k = k
        self.seed = seed
        self.dim = dim
        self.epochs = epochs
        self.lr = lr
        self.distinct_anchors = distinct_anchors

    def fit(self, Y_ref: Any, y: Any = None) -> IRTSelection:
        Y = _check_responses(Y_ref)
        n = Y.shape[1]
        if isinstance(self.k, bool) or not isinstance(self.k, numbers.Integral) or not 1 <= self.k <= n:
            raise ValueError(f"k must be an integer in [1, n_items={n}], got {self.k!r}")
        seed = _check_int("seed", self.seed, 0)
        dims = DIMS if self.dim is None else (_check_int("dim", self.dim, 1),)
        self.dim_, self.dim_errors_ = select_dimension(Y, dims, epochs=self.epochs, lr=self.lr, seed=seed)
        self.bias_ = self.dim_errors_[self.dim_]
        Yb, self.threshold_ = binarize(Y)
        fit = fit_multidim_2pl(Yb, self.dim_, epochs=self.epochs, lr=self.lr, seed=seed)
        self.a_, self.b_, self.theta_ = fit.a, fit.b, fit.theta
        k = int(self.k)
        anchors, weights, km = irt_anchors(fit.a, fit.b, k, seed, distinct=bool(self.distinct_anchors))
        self.ranking_, self.weights_, self.listing_ = merge_repeated_anchors(anchors, weights)
        self.gains_ = np.full(self.ranking_.size, np.nan)
        self.cluster_centers_ = km.cluster_centers_
        self.labels_ = km.labels_
        return self


def irt_anchors(a: np.ndarray, b: np.ndarray, k: int, seed: int, distinct: bool = True
                ) -> tuple[np.ndarray, np.ndarray, Any]:
    """tinyBenchmarks' anchor points of an IRT model: ``KMeans(k, n_init="auto", random_state=seed)`` on
    ``[a_i, b_i]``, per cluster the nearest item by the notebook's own
    ``pairwise_distances(centers, X).argmin(axis=1)`` (``distinct``: then a centroid whose item an earlier
    one took gets its next nearest free item; else the notebook's list, which may repeat an item);
    weights = cluster sizes / N. Returns ``(k anchors in cluster order, k weights, the fitted KMeans)``.

    The notebook's distance routine matters on exact ties (a cluster of two items, its centroid their
    midpoint): ``sklearn.metrics.pairwise_distances_argmin`` (our first version, through
    ``evalplan.core.selection.baselines.nearest_distinct_items``) rounds
    differently and may pick the other item (issue 35 item 2: one such anchor moved gp-IRT's RMSE by 0.11
    points on a 30-reference split), so both rules start from the notebook's ``argmin``."""
    X = np.column_stack([a, b])
    n = X.shape[0]
    km = KMeans(n_clusters=k, n_init="auto", random_state=seed).fit(X, sample_weight=np.full(n, 1.0 / n))
    weights = np.bincount(km.labels_, minlength=k).astype(np.float64) / n
    dist = pairwise_distances(km.cluster_centers_, X, metric="euclidean")
    nearest = np.asarray(dist.argmin(axis=1), dtype=np.int64)
    if not distinct:
        return nearest, weights, km
    taken = np.zeros(n, dtype=bool)
    for r in range(k):
        if taken[nearest[r]]:
            free = np.where(taken, np.inf, dist[r])
            nearest[r] = int(np.argmin(free))
        taken[nearest[r]] = True
    return nearest, weights, km


def merge_repeated_anchors(anchors: Any, weights: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(items, weights, listing)``: the distinct items of ``anchors`` in first-seen order, each with the
    summed weight of its centroids, and ``listing`` with ``items[listing] == anchors`` (``arange(k)`` when
    the anchors are distinct)."""
    anchors = np.asarray(anchors, dtype=np.int64).ravel()
    items, first, inverse = np.unique(anchors, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    merged = np.bincount(inverse, weights=np.asarray(weights, dtype=np.float64).ravel(), minlength=items.size)
    return items[order], merged[order], rank[inverse].astype(np.int64)


# --------------------------------------------------------------------------------------------
# estimators
# --------------------------------------------------------------------------------------------


class IRTEstimates(NamedTuple):
    p_irt: np.ndarray
    gp_irt: np.ndarray


class IRTPredictor(BaseEstimator):  # type: ignore[misc]  # scikit-learn ships no type stubs
    """p-IRT and gp-IRT (tinyBenchmarks ``estimating_performance.ipynb``) from coreset scores.

    ``fit(Y_ref, selected, weights=None, item_params=None, bias=None, listing=None)``: ``Y_ref`` the
    references' scores (m x N), ``selected`` the coreset's item indices, ``weights`` the anchor weights
    (default uniform, normalised to sum 1), ``item_params`` ``(a, b)`` of an IRT model fitted on ``Y_ref``
    (else :class:`IRTSelection`'s pipeline fits one), ``bias`` its validation error ``b_hat`` (needed with
    ``item_params`` unless ``lam`` is fixed), ``listing`` tinyBenchmarks' anchor list as positions in
    ``selected`` (default each selected item once, in order; :class:`IRTSelection`'s ``listing_`` under
    ``distinct_anchors=False``: their list repeats an item picked by several centroids and their estimates
    use that list, so the item enters the ability likelihood and the anchor mean once per listing, in
    their order, and p-IRT's ``n`` is the list's length). ``lam_`` is gp-IRT's weight of the anchor
    estimate (``n`` = the list's length).

    ``predict(y_S)`` (``(n,)`` or ``(t, n)``, coreset order) returns ``IRTEstimates(p_irt, gp_irt)``
    and sets ``theta_``, ``item_probabilities_`` (``(t, N)``) and ``weighted_`` (the anchor estimate).
    """

    def __init__(self, dim: int | None = None, lam: float | None = None, epochs: int = EPOCHS,
                 lr: float = LR, seed: int = SEED) -> None:
        self.dim = dim
        self.lam = lam
        self.epochs = epochs
        self.lr = lr
        self.seed = seed

    def fit(self, Y_ref: Any, selected: Any, weights: Any = None,
            item_params: tuple[np.ndarray, ...] | None = None, bias: float | None = None,
            listing: Any = None) -> IRTPredictor:
        Y = _check_responses(Y_ref)
        N = Y.shape[1]
        sel = np.asarray(selected, dtype=np.int64).ravel()
        if sel.size < 1 or sel.min() < 0 or sel.max() >= N or np.unique(sel).size != sel.size:
            raise ValueError("selected must be distinct item indices in [0, n_items)")
        n = sel.size
        if weights is None:
            w = np.full(n, 1.0 / n)
        else:
            w = np.asarray(weights, dtype=np.float64).ravel()
            if w.shape != (n,) or np.any(w < 0) or not np.isfinite(w).all() or w.sum() <= 0:
                raise ValueError("weights must be non-negative, finite, one per selected item")
            w = w / w.sum()
        lst = np.arange(n) if listing is None else np.asarray(listing).ravel()
        if not np.issubdtype(lst.dtype, np.integer) or np.unique(lst).size != n or lst.min() < 0 or lst.max() >= n:
            raise ValueError("listing must be positions in selected, each at least once")
        if item_params is None:
            pipe = IRTSelection(k=1, seed=self.seed, dim=self.dim, epochs=self.epochs, lr=self.lr).fit(Y)
            a, b, bias = pipe.a_, pipe.b_, pipe.bias_
        else:
            a = np.asarray(item_params[0], dtype=np.float64).reshape(N, -1)
            b = np.asarray(item_params[1], dtype=np.float64).ravel()
            if b.shape != (N,):
                raise ValueError("item_params must be (a (N x D), b (N,)) for the N items of Y_ref")
        self.a_, self.b_ = a, b
        self.selected_, self.weights_, self.n_items_, self.listing_ = sel, w, N, lst.astype(np.int64)
        if self.lam is not None:
            if not 0.0 <= float(self.lam) <= 1.0:
                raise ValueError(f"lam must be in [0, 1], got {self.lam!r}")
            self.bias_, self.lam_ = float("nan"), float(self.lam)
        else:
            if bias is None or not np.isfinite(bias):
                raise ValueError("bias (the IRT model's validation error) is needed to set gp-IRT's lambda")
            self.bias_ = float(bias)
            self.lam_ = gp_irt_lambda(self.bias_, Y, int(lst.size))
        return self

    def predict(self, y_S: Any) -> IRTEstimates:
        if not hasattr(self, "a_"):
            raise RuntimeError("IRTPredictor is not fitted")
        yS = np.asarray(y_S, dtype=np.float64)
        if yS.ndim == 1:
            yS = yS[None, :]
        n = self.selected_.size
        if yS.ndim != 2 or yS.shape[1] != n:
            raise ValueError(f"y_S must have shape (n,) or (t, n) with n={n}, got {np.shape(y_S)}")
        if not np.isfinite(yS).all() or np.any((yS < 0) | (yS > 1)):
            raise ValueError("y_S must hold finite scores in [0, 1]")
        sel, N = self.selected_, self.n_items_
        listed = getattr(self, "listing_", np.arange(n))  # their anchor list
        y_list, s_list = yS[:, listed], sel[listed]
        thetas = np.array([estimate_theta(row, self.a_[s_list], self.b_[s_list]) for row in y_list])
        P = mirt_item_curve(thetas, self.a_, self.b_)
        unseen = np.ones(N, dtype=bool)
        unseen[sel] = False
        data_part = y_list.mean(axis=1)
        m = listed.size  # their Y_anchor.shape[1]: the centroids
        p_irt = data_part if n >= N else (m / N) * data_part + (1.0 - m / N) * P[:, unseen].mean(axis=1)
        weighted = yS @ self.weights_
        gp = self.lam_ * weighted + (1.0 - self.lam_) * p_irt
        self.theta_, self.item_probabilities_, self.weighted_ = thetas, P, weighted
        self.p_irt_, self.gp_irt_ = p_irt, gp
        return IRTEstimates(np.asarray(p_irt), np.asarray(gp))


def irt_predictor_for(Y_ref: Any, selected: Any, weights: Any = None, selector: Any = None,
                      seed: int = SEED, **params: Any) -> IRTPredictor:
    """An :class:`IRTPredictor` for a coreset chosen by any selector: with an :class:`IRTSelection`
    its IRT model (and ``b_hat``) is reused; otherwise the pipeline fits one on ``Y_ref`` (the
    cache makes it once per reference matrix). ``params`` are :class:`IRTSelection`'s ``dim``,
    ``epochs``, ``lr``."""
    if isinstance(selector, IRTSelection):
        listing = getattr(selector, "listing_", None)
        same = listing is not None and np.array_equal(np.asarray(selected).ravel(), selector.ranking_)
        return IRTPredictor(seed=seed).fit(Y_ref, selected, weights=weights,
                                           item_params=(selector.a_, selector.b_), bias=selector.bias_,
                                           listing=listing if same else None)
    pipe = IRTSelection(k=1, seed=seed, **params).fit(Y_ref)
    return IRTPredictor(seed=seed).fit(Y_ref, selected, weights=weights, item_params=(pipe.a_, pipe.b_),
                                       bias=pipe.bias_)


#: folds of :func:`irt_cross_fitted_errors` (each refits the IRT model: two SVI fits at a given dimension)
IRT_CALIBRATION_FOLDS = 5


def irt_cross_fitted_errors(Y_ref: Any, variant: str, dim: int, bias: float, k: int,
                            select: Any = None, n_folds: int = IRT_CALIBRATION_FOLDS, seed: int = SEED,
                            epochs: int = EPOCHS, lr: float = LR) -> np.ndarray:
    """(M,) held-out errors ``y_i - est_{-fold(i)}(i)`` of an IRT coreset pipeline (issue 16 §2: the
    pessimistic half of the ``"calibrated"`` interval for the ``gp_irt`` / ``p_irt`` predictors).

    On each of ``n_folds`` seeded folds of the references (:func:`evalplan.core.coresets.intervals.cross_fitted_errors`)
    the IRT model is refitted on the training references (binarised as :func:`binarize`, dimension
    ``dim`` = the one chosen on all references, one SVI fit), the coreset chosen -- ``select(Y_train) ->
    (ranking, weights or None)`` for another selector, else (``select=None``) tinyBenchmarks' ``k``
    anchors of the fold's model (:func:`irt_anchors`) -- and ``variant`` (``"gp_irt"`` / ``"p_irt"``) of
    the held-out fold recorded. gp-IRT's lambda uses the training references and ``bias`` (the
    validation error ``b_hat`` of the model on all references: not refitted, which would cost a second
    SVI fit per fold). The in-sample residuals under the model fitted on all references are the
    optimistic half.
    """
    if variant not in ("gp_irt", "p_irt"):
        raise ValueError(f"variant must be gp_irt or p_irt, got {variant!r}")
    Y = _check_responses(Y_ref)
    y = Y.mean(axis=1)

    def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        Y_train = Y[train]
        fit = fit_multidim_2pl(binarize(Y_train)[0], int(dim), epochs=epochs, lr=lr, seed=seed)
        if select is None:
            ranking, weights, _ = irt_anchors(fit.a, fit.b, int(k), seed)
        else:
            ranking, weights = select(Y_train)
        ranking = np.asarray(ranking, dtype=np.int64)
        pred = IRTPredictor(seed=seed).fit(Y_train, ranking, weights=weights, item_params=(fit.a, fit.b),
                                           bias=float(bias))
        est = pred.predict(np.clip(Y[test][:, ranking], 0.0, 1.0))
        return np.asarray(est.p_irt if variant == "p_irt" else est.gp_irt)

    return cross_fitted_errors(fit_predict, y, n_folds=n_folds, seed=seed)
