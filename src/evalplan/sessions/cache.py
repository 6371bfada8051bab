"""In-process caches of sessions: deserialized priors and estimators (LRU), and per-session write locks.

Estimators are keyed by (session id, number of stored observations): the key names an exact prefix
of the append-only observation log, so an entry is never stale, even with several replicas.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from cachetools import LRUCache

from evalplan.auth.deletion import on_sessions_deleted

PRIOR_CACHE_SIZE = 16
#: default byte budget of the estimator cache (setting EVALPLAN_SESSION_CACHE_BYTES)
ESTIMATOR_CACHE_BYTES = 512 * 1024 * 1024


class LRU:
    """A thread-safe LRU of at most ``size`` entries (``cachetools.LRUCache`` under a lock)."""

    def __init__(self, size: int) -> None:
        self._data: LRUCache[Any, Any] = LRUCache(maxsize=size)
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        return int(self._data.maxsize)

    def get(self, key: Any) -> Any:
        with self._lock:
            return self._data.get(key)

    def pop(self, key: Any) -> Any:
        with self._lock:
            return self._data.pop(key, None)

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._data[key] = value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


def nbytes_of(value: Any, depth: int = 4) -> int:
    """The numpy memory an object holds: ``nbytes`` of every array reachable through attributes,
    dicts, lists and tuples within ``depth`` levels (each array once); other objects count 256 bytes.
    Arrays shared with a cached prior are counted again, so the bound is conservative."""
    seen: set[int] = set()
    total = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, level = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, np.ndarray):
            total += int(node.nbytes)
            continue
        total += 256 if level == 0 else 0
        if level >= depth or isinstance(node, (str, bytes, int, float, bool)) or node is None:
            continue
        if isinstance(node, dict):
            children: list[Any] = list(node.values())
        elif isinstance(node, (list, tuple, set)):
            children = list(node)
        else:
            children = list(getattr(node, "__dict__", {}).values())
            children += [getattr(node, s) for s in getattr(type(node), "__slots__", ()) if hasattr(node, s)]
        stack.extend((child, level + 1) for child in children)
    return total


def _entry_size(entry: tuple[Any, int]) -> int:
    return entry[1]


class ByteLRU:
    """An LRU bounded by the bytes of its values (:func:`nbytes_of`), not by their count; a value larger
    than the whole budget is not kept. A ``cachetools.LRUCache`` of ``(value, size)`` entries weighed by
    their stored size (``getsizeof``), under a lock."""

    def __init__(self, max_bytes: int) -> None:
        self._data: LRUCache[Any, tuple[Any, int]] = LRUCache(maxsize=max_bytes, getsizeof=_entry_size)
        self._lock = threading.Lock()

    @property
    def max_bytes(self) -> int:
        return int(self._data.maxsize)

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        """A new budget (the app's setting): the entries are kept, least recently used first out."""
        with self._lock:
            old = self._data
            self._data = LRUCache(maxsize=value, getsizeof=_entry_size)
            while old:
                key, entry = old.popitem()  # least recently used first: the new cache keeps their order
                if entry[1] <= value:
                    self._data[key] = entry

    @property
    def nbytes(self) -> int:
        return int(self._data.currsize)

    def get(self, key: Any) -> Any:
        with self._lock:
            entry = self._data.get(key)
            return None if entry is None else entry[0]

    def pop(self, key: Any) -> Any:
        with self._lock:
            entry = self._data.pop(key, None)
            return None if entry is None else entry[0]

    def take(self, key: Any) -> tuple[Any, int | None]:
        """Remove and return ``(value, its byte size)``; ``(None, None)`` when absent."""
        with self._lock:
            entry = self._data.pop(key, None)
            return (None, None) if entry is None else entry

    def put(self, key: Any, value: Any, nbytes: int | None = None) -> None:
        """Keep ``value``; ``nbytes`` its size when known (a value taken out and advanced: an
        estimator's arrays keep their shapes as observations arrive), else :func:`nbytes_of`."""
        size = nbytes_of(value) if nbytes is None else int(nbytes)
        with self._lock:
            self._data.pop(key, None)  # a replaced entry leaves first, even when the new one is not kept
            if size <= self._data.maxsize:
                self._data[key] = (value, size)  # evicts the least recently used until it fits

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


priors = LRU(PRIOR_CACHE_SIZE)  # prior key -> evalplan.sessions.priors.PriorEntry
estimators = ByteLRU(ESTIMATOR_CACHE_BYTES)  # (session id, n observations) -> estimator
_locks: weakref.WeakValueDictionary[str, threading.Lock] = weakref.WeakValueDictionary()
_locks_guard = threading.Lock()


def take_estimator(key: tuple[str, int]) -> tuple[Any, int | None]:
    """The cached estimator of (session id, stored observations), removed for its writer, and its size."""
    return estimators.take(key)


def clear_caches() -> None:
    """Forget every in-process prior and estimator (what a restart or another replica sees)."""
    priors.clear()
    estimators.clear()


@contextmanager
def session_lock(session_id: str) -> Iterator[None]:
    with _locks_guard:
        lock = _locks.get(session_id)
        if lock is None:
            lock = threading.Lock()
            _locks[session_id] = lock
    with lock:  # the local variable keeps the weak entry alive while held
        yield


def evict_sessions(deleted: list[tuple[str, int]]) -> None:
    """Drop the cached estimators of deleted sessions (``(id, n_observed)``; a team deletion calls it)."""
    for session_id, n_observed in deleted:
        for n in range(n_observed + 1):
            estimators.pop((session_id, n))


on_sessions_deleted(evict_sessions)
