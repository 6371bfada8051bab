"""Common base of the prompt-selection methods (paper §3.1 and §4.2).

Every selector follows the scikit-learn contract: ``__init__`` only stores its parameters,
``fit(embeddings, labels)`` validates, selects and returns ``self``, and the learned results end
in ``_``:

* ``ranking_``: ``np.ndarray[int]`` of length ``k``, the selected row indices in selection order;
* ``gains_``: ``np.ndarray[float]`` of length ``k``, the marginal objective gain of each pick
  (NaN for methods without an objective, e.g. random selection).

``embeddings`` is an ``(n, d)`` float array, ``labels`` an ``(n,)`` array of benchmark indices
``0..B-1`` (``None`` means a single benchmark), and ``1 <= k <= n``.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from typing import Any, ClassVar, NamedTuple

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_array


class ParamSpec(NamedTuple):
    """A user-settable constructor parameter (besides ``k`` and ``seed``): its type(s), a description
    and the value rules a service checks before fitting (``evalplan.kit.validation.check_params``):
    ``choices``, a ``minimum`` (exclusive with ``exclusive_minimum``), a ``maximum`` (a size cap: without
    one an integer is capped at ``DEFAULT_INT_MAXIMUM``), ``nullable``; ``default`` is the value used when
    the parameter is not given (None: the class's own default)."""

    type: type | tuple[type, ...]
    description: str
    default: Any = None
    minimum: float | None = None
    exclusive_minimum: bool = False
    choices: tuple[Any, ...] = ()
    nullable: bool = False
    maximum: float | None = None


#: the cap of an integer parameter that declares no ``maximum`` (sizes, counts, iterations)
DEFAULT_INT_MAXIMUM = 1_000_000


def check_embeddings(embeddings: Any, dtype: type = np.float64) -> np.ndarray:
    """Return ``embeddings`` as a finite, C-contiguous ``(n, d)`` float array."""
    return np.asarray(check_array(embeddings, dtype=dtype, order="C", ensure_all_finite=True,
                                  ensure_min_samples=1, ensure_min_features=1, input_name="embeddings"))


def check_labels(labels: Any, n: int) -> np.ndarray:
    """Return ``labels`` as an ``(n,)`` int64 array of benchmark indices >= 0 (``None``: all zeros)."""
    if labels is None:
        return np.zeros(n, dtype=np.int64)
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"labels must have shape ({n},), got {arr.shape}")
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise ValueError(f"labels must be integer benchmark indices, got dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError("labels must be integer benchmark indices")
    out = arr.astype(np.int64)
    if n and out.min() < 0:
        raise ValueError("labels must be benchmark indices >= 0")
    return out


def check_k(k: Any, n: int | None = None) -> int:
    """``k`` must be an integer with ``1 <= k`` (and ``k <= n`` when ``n`` is given)."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise ValueError(f"k must be an integer, got {k!r}")
    if int(k) < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if n is not None and int(k) > n:
        raise ValueError(f"k={k} is larger than the number of items n={n}")
    return int(k)


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


class CoresetSelector(BaseEstimator, ABC):  # type: ignore[misc]  # scikit-learn ships no type stubs
    """What every selector shares, text-based (:class:`TextSelector`) or score-based
    (``evalplan.core.selection.score_based``): ``k`` / ``seed`` validation and the checked result.

    ``PARAMS`` names the user-settable parameters besides ``k`` and ``seed`` so that a service can
    reject unknown ones; :meth:`validate_params` checks their values without fitting.
    """

    PARAMS: ClassVar[dict[str, ParamSpec]] = {}

    k: int
    seed: int

    def validate_params(self) -> CoresetSelector:
        """Check the constructor parameters (raises ``ValueError``); returns ``self``."""
        check_k(self.k)
        check_seed(self.seed)
        self._validate_extra_params()
        return self

    def _validate_extra_params(self) -> None:
        """Subclasses check their own parameters here."""

    def _store_selection(self, ranking: Any, gains: Any, k: int) -> None:
        """Set ``ranking_`` (k distinct indices) and ``gains_`` (k floats) from ``_select``'s output."""
        ranking = np.asarray(ranking, dtype=np.int64)
        gains = np.asarray(gains, dtype=np.float64)
        if ranking.shape != (k,) or gains.shape != (k,) or np.unique(ranking).size != k:
            raise RuntimeError(f"{type(self).__name__} produced an invalid selection")  # pragma: no cover
        self.ranking_ = ranking
        self.gains_ = gains


class TextSelector(CoresetSelector):
    """Base of the text (embedding) selectors; subclasses implement :meth:`_select`."""

    #: embeddings dtype used by :meth:`_select`
    _dtype: ClassVar[type] = np.float64

    def fit(self, embeddings: Any, labels: Any = None) -> TextSelector:
        """Validate the inputs, select ``k`` rows, set ``ranking_`` and ``gains_``; returns ``self``."""
        self.validate_params()
        X = check_embeddings(embeddings, dtype=self._dtype)
        y = check_labels(labels, X.shape[0])
        k = check_k(self.k, X.shape[0])
        self._store_selection(*self._select(X, y, k), k)
        return self

    @abstractmethod
    def _select(self, X: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(ranking, gains)`` of ``k`` rows of the embeddings ``X`` (benchmark ``labels``)."""


#: the former name of :class:`TextSelector`, kept for importers
BaseSelector = TextSelector
