"""Numerics of the multi-target estimator without torch (the API process never imports torch).

* :func:`torch_randn` reproduces ``torch.randn(shape, generator=torch.Generator().manual_seed(seed),
  dtype=torch.float64)`` bit for bit: torch's CPU generator is MT19937 seeded as ``init_genrand``
  (numpy's legacy seeding of the same engine), a float64 uniform takes 53 bits of
  ``(first draw << 32) | second draw``, and normals come from Box-Muller with torch's two code
  paths (a serial one for fewer than 16 values, a 16-value block one otherwise), with the same
  libm functions (``math``) in the same order.
* :class:`AdamW` is ``torch.optim.AdamW`` with its defaults (betas 0.9/0.999, eps 1e-8, weight
  decay 0.01, no amsgrad), on float64 numpy arrays, step for step as torch's single-tensor update.
"""

from __future__ import annotations

import math

import numpy as np

_TWO_PI = 2.0 * math.pi


def _uniforms(engine: np.random.RandomState, n: int) -> list[float]:
    """``n`` float64 uniforms in [0, 1) as torch draws them (53 bits of two 32-bit outputs)."""
    raw = engine.randint(0, 2**32, size=2 * n, dtype=np.uint64) if n else np.zeros(0, dtype=np.uint64)
    words = (raw[0::2] << np.uint64(32)) | raw[1::2]
    mask = np.uint64((1 << 53) - 1)
    return [float(int(w & mask)) * (1.0 / (1 << 53)) for w in words]


def torch_randn(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Standard normals of ``shape`` (float64, C order), identical to torch's CPU ``randn`` for ``seed``."""
    size = int(np.prod(shape))
    engine = np.random.RandomState(int(seed) & 0xFFFFFFFF)
    out = np.empty(size, dtype=np.float64)
    if size < 16:  # the serial path: normal_distribution<double>, the second sample of a pair cached
        cached: float | None = None
        for i in range(size):
            if cached is not None:
                out[i], cached = cached, None
                continue
            u1, u2 = _uniforms(engine, 2)
            r = math.sqrt(-2.0 * math.log1p(-u2))
            theta = _TWO_PI * u1
            cached = r * math.sin(theta)
            out[i] = r * math.cos(theta)
        return out.reshape(shape)
    data = _uniforms(engine, size)

    def fill16(block: list[float]) -> list[float]:
        result = list(block)
        for j in range(8):
            radius = math.sqrt(-2.0 * math.log(1.0 - block[j]))
            theta = _TWO_PI * block[j + 8]
            result[j], result[j + 8] = radius * math.cos(theta), radius * math.sin(theta)
        return result

    for start in range(0, size - 15, 16):
        data[start:start + 16] = fill16(data[start:start + 16])
    if size % 16:  # torch redraws the last 16 values
        data[size - 16:] = fill16(_uniforms(engine, 16))
    out[:] = data
    return out.reshape(shape)


class AdamW:
    """``torch.optim.AdamW`` (defaults) over a list of float64 arrays, updated in place."""

    def __init__(self, params: list[np.ndarray], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2) -> None:
        self.params, self.lr, self.betas, self.eps, self.weight_decay = params, lr, betas, eps, weight_decay
        self.exp_avg = [np.zeros_like(p) for p in params]
        self.exp_avg_sq = [np.zeros_like(p) for p in params]
        self.steps = 0

    def step(self, grads: list[np.ndarray]) -> None:
        beta1, beta2 = self.betas
        self.steps += 1
        bias_correction1 = 1 - beta1 ** self.steps
        bias_correction2_sqrt = (1 - beta2 ** self.steps) ** 0.5
        step_size = self.lr / bias_correction1
        for p, g, m, v in zip(self.params, grads, self.exp_avg, self.exp_avg_sq):
            p *= 1 - self.lr * self.weight_decay
            m += (1 - beta1) * (g - m)
            v *= beta2
            v += (1 - beta2) * g * g
            denom = np.sqrt(v) / bias_correction2_sqrt + self.eps
            p += -step_size * m / denom
