"""SYNTHETIC test suite for RepCore (paper 003, "Learning More from Less", §2.1).

Nothing here comes from real models: it is a seeded generative model that mimics the
*structure* the paper assumes (§2.1-2.2), so the pipeline can be tested and benchmarked
without LLM hidden states.

Generative model (all draws from ``np.random.default_rng(seed)``):

* items: task cluster ``c_i`` (uniform over ``n_clusters``), difficulty ``b_i ~ N(0, 1)``,
  latent factor ``v_i = u_{c_i} + 0.5 * eps_i`` with cluster vectors ``u_k ~ N(0, I/latent_dim)``
  (unit expected norm) and ``eps_i ~ N(0, I/latent_dim)``;
* models (sources first, then targets): general ability ``a_m ~ N(0, 1)`` and a skill
  vector ``s_m ~ N(0, 1.5^2 I)`` (cluster-specific strengths);
* correctness: ``y_{m,i} ~ Bernoulli(sigmoid(a_m + s_m . v_i - b_i))``;
* hidden state of source ``m``: ``h_{m,i} = W_m [b_i, v_i] + noise * xi_{m,i}`` with a random
  projection ``W_m`` (``d_m x (1+latent_dim)``) of the model's own width ``d_m`` and
  ``xi ~ N(0, I)`` scaled so that ``noise`` is the per-coordinate noise-to-signal ratio
  (signal coordinates have unit variance in expectation).

So each source "sees" the same latent item factors through its own basis, and its correctness
is a (noisy) function of those factors: the hidden states carry item structure (cluster and
difficulty) that the 0/1 correctness vectors of 10 sources only reveal coarsely.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SKILL_SCALE = 1.5
WITHIN_CLUSTER_SPREAD = 0.5


@dataclass
class SyntheticSuite:
    """A SYNTHETIC benchmark: source hidden states and correctness, target correctness.

    Attributes:
        source_states: one ``N x d_m`` array per source model (dtype as requested).
        source_correctness: ``n_sources x N`` 0/1 matrix (float32).
        target_correctness: ``n_targets x N`` 0/1 matrix.
        difficulty: ``N`` item difficulties ``b_i``.
        clusters: ``N`` task-cluster ids.
        abilities: ``n_sources + n_targets`` general abilities ``a_m`` (sources first).
        skills: ``(n_sources + n_targets) x latent_dim`` skill vectors ``s_m``.
        item_factors: ``N x latent_dim`` latent factors ``v_i``.
        source_probs / target_probs: the Bernoulli probabilities behind the 0/1 matrices.
        widths: hidden width of each source.
    """

    source_states: list[np.ndarray]
    source_correctness: np.ndarray
    target_correctness: np.ndarray
    difficulty: np.ndarray
    clusters: np.ndarray
    abilities: np.ndarray
    skills: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 0)))
    item_factors: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 0)))
    source_probs: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 0)))
    target_probs: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 0)))
    widths: list[int] = field(default_factory=list)

    @property
    def n_items(self) -> int:
        return int(self.difficulty.shape[0])

    @property
    def target_scores(self) -> np.ndarray:
        """True full-benchmark accuracy of each target model (§3 metrics' ground truth)."""
        return np.asarray(self.target_correctness.mean(axis=1))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def make_synthetic_suite(
    n_items: int = 2000,
    n_sources: int = 10,
    n_targets: int = 10,
    widths: list[int] | None = None,
    n_clusters: int = 8,
    latent_dim: int = 16,
    noise: float = 0.5,
    seed: int = 0,
    dtype: type | np.dtype = np.float32,
) -> SyntheticSuite:
    """Generate a seeded SYNTHETIC suite (see the module docstring for the model).

    ``widths`` gives each source's hidden width (default: random integers in [64, 256], meant for
    tests; the speed bench passes 2048-4096). States are generated one source at a time, in
    float32 then cast to ``dtype``, so the peak extra memory is one ``N x d_m`` float32 block.
    """
    if n_items < 1 or n_sources < 1 or n_targets < 0 or n_clusters < 1 or latent_dim < 1:
        raise ValueError("n_items, n_sources, n_clusters, latent_dim must be >= 1, n_targets >= 0")
    if noise < 0:
        raise ValueError("noise must be >= 0")
    rng = np.random.default_rng(seed)
    if widths is None:
        widths = [int(w) for w in rng.integers(64, 257, size=n_sources)]
    widths = [int(w) for w in widths]
    if len(widths) != n_sources or min(widths) < 1:
        raise ValueError("widths must hold one positive width per source")

    clusters = rng.integers(0, n_clusters, size=n_items)
    difficulty = rng.standard_normal(n_items)
    centers = rng.standard_normal((n_clusters, latent_dim)) / np.sqrt(latent_dim)
    factors = centers[clusters] + WITHIN_CLUSTER_SPREAD * rng.standard_normal(
        (n_items, latent_dim)
    ) / np.sqrt(latent_dim)

    n_models = n_sources + n_targets
    abilities = rng.standard_normal(n_models)
    skills = SKILL_SCALE * rng.standard_normal((n_models, latent_dim))
    logits = abilities[:, None] + skills @ factors.T - difficulty[None, :]
    probs = _sigmoid(logits)
    correct = (rng.random(probs.shape) < probs).astype(np.float32)

    # latent item description seen by every source: [difficulty, factors], standardized
    latent = np.concatenate([difficulty[:, None], factors], axis=1)
    latent = (latent - latent.mean(0)) / (latent.std(0) + 1e-12)
    latent = latent.astype(np.float32)
    k = latent.shape[1]
    states: list[np.ndarray] = []
    for d in widths:
        w = (rng.standard_normal((k, d), dtype=np.float32) / np.float32(np.sqrt(k)))
        h = latent @ w  # unit variance per coordinate in expectation
        h += np.float32(noise) * rng.standard_normal((n_items, d), dtype=np.float32)
        states.append(h.astype(dtype, copy=False))
        del h, w

    return SyntheticSuite(
        source_states=states,
        source_correctness=correct[:n_sources],
        target_correctness=correct[n_sources:],
        difficulty=difficulty,
        clusters=clusters,
        abilities=abilities,
        skills=skills,
        item_factors=factors,
        source_probs=probs[:n_sources],
        target_probs=probs[n_sources:],
        widths=widths,
    )
