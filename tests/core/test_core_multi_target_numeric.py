"""The multi-target estimator without torch (evalplan.core.sequential.numeric): its seeded initial weights
equal torch's ``randn`` bit for bit, its NLL gradient equals torch autograd's, its AdamW equals
``torch.optim.AdamW``, and its hyperparameter refit equals the torch refit it replaced (torch is
imported here, by the test, as the reference)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from evalplan.core.sequential import BucketPrior, SessionConfig
from evalplan.core.sequential.multi_target import (
    _SQRT3,
    MultiTargetEstimator,
    kernel_kinds,
    multi_target_nll,
    multi_target_nll_and_grad,
)
from evalplan.core.sequential.numeric import AdamW, torch_randn


@pytest.mark.parametrize("seed", [0, 1, 7, 123456789, 2**32 + 3])
def test_torch_randn_is_bit_identical_to_torch(seed: int) -> None:
    for shape in [(1, 1), (2, 2), (2, 3), (3, 5), (2, 7), (4, 4), (3, 11), (16, 32), (1, 17)]:
        expected = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).numpy()
        assert np.array_equal(torch_randn(shape, seed), expected), shape


def _problem(seed: int, n: int = 40, n_targets: int = 3, n_latent: int = 3):
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(n, 2))
    points[5] = points[4]  # a zero distance off the diagonal (Matern's constant branch)
    d2 = ((points[:, None, :] - points[None, :, :]) ** 2).sum(-1)
    targets = rng.integers(0, n_targets, size=n)
    noise = rng.integers(1, 5, size=n).astype(float)
    residuals = rng.normal(scale=0.3, size=n)
    log_a, log_b = rng.normal(scale=0.2, size=n_latent), rng.normal(scale=0.2, size=n_latent)
    weights = rng.normal(scale=0.5, size=(n_latent, n_targets))
    return kernel_kinds(n_latent), log_a, log_b, weights, np.array(math.log(0.1)), d2, targets, noise, residuals


def _torch_nll(kinds, log_a, log_b, Wp, log_s2, d2, targets, noise, residuals):
    """The torch NLL of the refit this module replaced (for autograd)."""
    d2_t = torch.as_tensor(d2, dtype=torch.float64)
    pos = d2_t > 0
    G = torch.diag(torch.exp(log_s2) * torch.as_tensor(noise, dtype=torch.float64))
    tC = torch.as_tensor(targets, dtype=torch.long)
    for l, kind in enumerate(kinds):
        x = torch.exp(log_b[l]) * d2_t
        if kind == "se":
            k = torch.exp(-x)
        else:
            rr = _SQRT3 * torch.sqrt(torch.where(pos, x, torch.ones_like(x)))
            k = torch.where(pos, (1.0 + rr) * torch.exp(-rr), torch.ones_like(x))
        wl = Wp[l, tC]
        G = G + torch.exp(log_a[l]) * torch.outer(wl, wl) * k
    L, info = torch.linalg.cholesky_ex(G)
    assert int(info) == 0
    z = torch.linalg.solve_triangular(L, torch.as_tensor(residuals)[:, None], upper=False)[:, 0]
    return 0.5 * (z @ z) + torch.log(torch.diagonal(L)).sum() + 0.5 * len(residuals) * math.log(2 * math.pi)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nll_gradient_equals_torch_autograd(seed: int) -> None:
    kinds, log_a, log_b, W, log_s2, d2, targets, noise, r = _problem(seed)
    nll, grads = multi_target_nll_and_grad(kinds, log_a, log_b, W, log_s2, d2, targets, noise, r)
    params = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (log_a, log_b, W, log_s2)]
    loss = _torch_nll(kinds, *params, d2, targets, noise, r)
    loss.backward()
    assert nll == pytest.approx(float(loss.detach()), rel=1e-12)
    assert nll == pytest.approx(multi_target_nll(kinds, np.exp(log_a), np.exp(log_b), W, math.exp(log_s2), d2,
                                                 targets, noise, r), rel=1e-12)
    for mine, param in zip(grads, params):
        assert param.grad is not None
        np.testing.assert_allclose(mine, param.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_adamw_equals_torch_adamw() -> None:
    rng = np.random.default_rng(3)
    start = [rng.normal(size=4), rng.normal(size=(2, 3)), np.array(0.7)]
    mine = [p.copy() for p in start]
    ours = AdamW(mine, lr=0.01)
    theirs = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in start]
    opt = torch.optim.AdamW(theirs, lr=0.01)
    for step in range(50):
        grads = [np.sin(p * (step + 1)) + p for p in mine]
        ours.step(grads)
        opt.zero_grad()
        for t in theirs:
            t.grad = torch.as_tensor(np.sin(t.detach().numpy() * (step + 1)) + t.detach().numpy())
        opt.step()
    for p, t in zip(mine, theirs):
        np.testing.assert_allclose(p, t.detach().numpy(), rtol=1e-13, atol=1e-15)


def _torch_refit(est: MultiTargetEstimator) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The refit the estimator had before it went torch-free: AdamW with autograd, best iterate kept."""
    tC, bC, d2s, r = est._nll_data()
    noise = est._Nb[bC]
    params = [torch.tensor(v, dtype=torch.float64, requires_grad=True)
              for v in (np.log(est._alpha), np.log(est._beta), est._W, np.array(math.log(est._sigma2)))]
    opt = torch.optim.AdamW(params, lr=est.learning_rate)
    best_val, best = math.inf, None
    for step in range(est.adam_steps + 1):
        opt.zero_grad()
        loss = _torch_nll(est.kinds, *params, d2s, tC, noise, r)
        val = float(loss.detach())
        if val < best_val:
            best_val = val
            best = (np.exp(params[0].detach().numpy()), np.exp(params[1].detach().numpy()),
                    params[2].detach().numpy().copy(), math.exp(float(params[3].detach())))
        if step == est.adam_steps:
            break
        loss.backward()
        opt.step()
    assert best is not None
    return best


def test_refit_matches_the_torch_refit() -> None:
    rng = np.random.default_rng(5)
    reference = (rng.random((12, 60)) < rng.uniform(0.2, 0.8, size=(12, 1))).astype(float)
    prior = BucketPrior.from_reference_scores(reference)
    est = MultiTargetEstimator(prior, SessionConfig(method="bayesame", refit_every=0, seed=4), 3, 3)
    truth = (rng.random((3, 60)) < 0.6).astype(float)
    for _ in range(45):
        t, item = est.propose()[0]
        est.observe(t, item, float(truth[t, item]))
    expected = _torch_refit(est)
    est._refit()
    for mine, theirs in zip((est._alpha, est._beta, est._W, est._sigma2), expected):
        np.testing.assert_allclose(mine, theirs, rtol=1e-7, atol=1e-10)
