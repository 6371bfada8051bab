"""``previous`` in ``active_design``'s working model (issue 33 item 2; opt-in, ``use_previous=True``): the checkpoint's observed scores read back
from the prior, the flip model and its blend with the reference model, the draw favouring flip-prone items,
unbiasedness and coverage at a precision stop with ``previous`` (deterministic seeds: cannot flake)."""

from __future__ import annotations

import numpy as np

from evalplan.core.sequential import BucketPrior, SessionConfig
from evalplan.core.sequential.active_design import ActiveDesignEstimator, run_active_design
from evalplan.core.sequential.checkpoints import PreviousModel, previous_by_bucket, with_previous


def series(seed: int, n_items: int = 300, n_refs: int = 12, partial: float | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(references, target, previous checkpoint, flip-prone items): Rasch models; the checkpoint is the target
    with a 25% flip rate on the items near the target's ability and 1% elsewhere (NaN outside ``partial``)."""
    rng = np.random.default_rng(seed)
    b = rng.normal(0.0, 1.5, n_items)
    th = rng.normal(0.0, 1.0, n_refs + 1)
    P = 1.0 / (1.0 + np.exp(-(th[:, None] - b)))
    X = (rng.random(P.shape) < P).astype(np.float64)
    y = X[-1]
    prone = np.abs(b - th[-1]) < 0.7
    flip = rng.random(n_items) < np.where(prone, 0.25, 0.01)
    prev = np.where(flip, 1.0 - y, y)
    if partial is not None:
        prev[rng.random(n_items) >= partial] = np.nan
    return X[:-1], y, prev, prone


def session(R: np.ndarray, prev: np.ndarray, seed: int, **params: object) -> tuple[BucketPrior, ActiveDesignEstimator]:
    aug, mult = with_previous(R, [prev])
    prior = BucketPrior.from_reference_scores(aug)
    cfg = SessionConfig(method="active_design", seed=seed, stop={"half_width": 0.0, "level": 0.95, "min_items": 1},
                        previous=[{"model": "c", "n_scores": int(np.sum(~np.isnan(prev))), "weight": mult[0]}])
    return prior, ActiveDesignEstimator(prior, cfg, **params)  # type: ignore[arg-type]


def test_previous_scores_are_read_back_from_the_prior_complete_partial_and_continuous() -> None:
    rng = np.random.default_rng(0)
    R = (rng.random((8, 120)) < 0.6).astype(np.float64)
    R[0], R[1] = 1.0, 0.0  # every reference mean in [1/8, 7/8]: no imputed cell is clipped to 0 or 1
    old = (rng.random(120) < 0.5).astype(np.float64)
    new = (rng.random(120) < 0.5).astype(np.float64)
    new[rng.random(120) < 0.7] = np.nan  # the newest is partial: the older one fills its gaps
    aug, mult = with_previous(R, [old, new])
    prior = BucketPrior.from_reference_scores(aug)
    cfg = [{"model": "a", "n_scores": 120, "weight": mult[0]},
           {"model": "b", "n_scores": int(np.sum(~np.isnan(new))), "weight": mult[1]}]
    found = previous_by_bucket(prior.bucket_vectors, prior.bucket_sizes, cfg, (0.0, 1.0), True)
    assert found is not None
    value, has, u = found
    b = prior.bucket_of_item
    assert has[b].all()
    assert np.array_equal(value[b], np.where(np.isnan(new), old, new))
    assert np.allclose(u[b], R.mean(axis=0))
    # continuous scores: the imputed cells (the shifted reference mean) are told from the observed ones
    Rc = rng.random((8, 120))
    part = rng.random(120)
    part[rng.random(120) < 0.6] = np.nan
    aug, mult = with_previous(Rc, [part])
    prior = BucketPrior.from_reference_scores(aug)
    cfg = [{"model": "a", "n_scores": int(np.sum(~np.isnan(part))), "weight": mult[0]}]
    found = previous_by_bucket(prior.bucket_vectors, prior.bucket_sizes, cfg, (0.0, 1.0), False)
    assert found is not None
    assert np.array_equal(found[1][prior.bucket_of_item], ~np.isnan(part))
    # a config that does not match the prior (more checkpoint rows than columns) is ignored
    assert previous_by_bucket(prior.bucket_vectors, prior.bucket_sizes, [{"weight": 99, "n_scores": 1}],
                              (0.0, 1.0), False) is None
    assert previous_by_bucket(prior.bucket_vectors, prior.bucket_sizes, None, (0.0, 1.0), False) is None


def test_flip_model_learns_where_items_flip_and_the_blend_follows_the_better_model() -> None:
    rng = np.random.default_rng(1)
    n = 400
    u = rng.random(n)
    c = (rng.random(n) < u).astype(np.float64)
    prone = 4.0 * u * (1.0 - u) > 0.75
    y = np.where(rng.random(n) < np.where(prone, 0.3, 0.01), 1.0 - c, c)
    g = np.full(n, 0.5)  # an uninformative reference model
    pm = PreviousModel(True, (0.0, 1.0))
    for k in range(n):
        pm.add(c[k], u[k], g[k], y[k])
        pm.fit()
    f = pm.flip_probability(c, u, g)
    assert f[prone].mean() > 3.0 * f[~prone].mean()
    assert pm.blend > 0.8  # the checkpoint model predicted far better than g = 1/2
    mu = pm.predict(c, u, g)
    assert np.mean((y - mu) ** 2) < 0.5 * np.mean((y - g) ** 2)


def test_working_model_with_previous_has_lower_residual_variance_and_favours_flip_prone_items() -> None:
    """The same uniform items observed with and without ``previous`` in the working model: with it, the
    predictions of the unobserved items are closer to the target's scores (complete and partial checkpoints)."""
    gains = []
    for partial in (None, 0.3):
        for seed in range(3):
            R, y, prev, _ = series(seed, partial=partial)
            mse = []
            for use in (False, True):
                prior, est = session(R, prev, seed, use_previous=use, adaptive_share=False)
                for item in np.random.default_rng(seed + 100).choice(y.size, 80, replace=False):
                    est.observe(int(item), float(y[item]))
                mu, _ = est._predictions()
                unobserved = ~est._observed
                mse.append(float(np.mean((y[unobserved] - mu[prior.bucket_of_item][unobserved]) ** 2)))
                if use:  # every observed item with a checkpoint score (an imputed-looking one aside) was fitted
                    n_fit = est.design_state()["previous_model"]["n_fit"]
                    assert 0.9 * np.sum(~np.isnan(prev[est._observed])) <= n_fit <= np.sum(~np.isnan(prev[est._observed]))
            gains.append(mse[0] / mse[1])
    print("residual variance ratios (without / with previous):", np.round(gains, 3))
    assert min(gains) > 1.0
    assert float(np.mean(gains)) > 1.03


def test_terms_stay_unbiased_over_the_draw_with_previous() -> None:
    R, y, prev, _ = series(3)
    prior, est = session(R, prev, 3, use_previous=True)
    while est.n_observed < 40:
        for i in est.propose():
            est.observe(i, float(y[i]))
    assert est.previous_model is not None and est.previous_model.n == 40
    est._draw_batch(1)
    d = est._draws[-1]
    mu, sig = est._predictions()
    b = prior.bucket_of_item
    unobs = np.flatnonzero(~est._observed)
    q = (1 - est.uniform_share) * sig[b[unobs]] / float(sig[b[unobs]].sum()) + est.uniform_share / unobs.size
    assert np.isclose(d.q, q[int(np.flatnonzero(unobs == d.item)[0])])
    theta = (est._sum_s + d.pred_sum + (y[unobs] - mu[b[unobs]]) / q) / est.n_items
    assert np.isclose(float(q @ theta), y.mean(), atol=1e-12)


def test_coverage_at_a_precision_stop_with_previous() -> None:
    """The default's interval at its ±0.05 stop, with a complete or partial checkpoint, covers >= 90% of 30
    synthetic series (95% intervals)."""
    covered = 0
    for rep in range(30):
        R, y, prev, _ = series(500 + rep, n_items=250, partial=0.4 if rep % 2 else None)
        trace = run_active_design(R, y, half_width=0.05, seed=rep, previous=[prev], use_previous=True)
        lo, hi = trace[-1]["ci"]
        covered += int(lo <= y.mean() <= hi)
    assert covered >= 27
