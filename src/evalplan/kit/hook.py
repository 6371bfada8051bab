"""One registered callable that a lower domain calls and a higher one provides (the dependency order forbids the
import the other way): ``benchmarks`` asks ``coresets`` what goes with a deleted benchmark, ``models`` asks
``benchmarks`` what goes with a deleted model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class Hook(Generic[F]):
    """A slot for one callable: ``register`` replaces it; ``get`` returns it, or raises ``RuntimeError`` with
    ``missing`` (what to import) when nothing registered it."""

    def __init__(self, missing: str) -> None:
        self._missing = missing
        self._registered: F | None = None

    def register(self, fn: F) -> None:
        self._registered = fn

    def get(self) -> F:
        if self._registered is None:
            raise RuntimeError(self._missing)
        return self._registered
