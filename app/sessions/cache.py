"""In-process caches of sessions: deserialized priors and estimators (LRU), and per-session write locks.

Estimators are keyed by (session id, number of stored observations): the key names an exact prefix
of the append-only observation log, so an entry is never stale, even with several replicas.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

PRIOR_CACHE_SIZE = 16
ESTIMATOR_CACHE_SIZE = 128


class LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def pop(self, key: Any) -> Any:
        with self._lock:
            return self._data.pop(key, None)

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


priors = LRU(PRIOR_CACHE_SIZE)  # prior key -> app.sessions.priors.PriorEntry
estimators = LRU(ESTIMATOR_CACHE_SIZE)  # (session id, n observations) -> estimator
_locks: weakref.WeakValueDictionary[str, threading.Lock] = weakref.WeakValueDictionary()
_locks_guard = threading.Lock()


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
