"""The session estimator cache is bounded in bytes (EVALPLAN_SESSION_CACHE_BYTES), not in entries."""

from __future__ import annotations

import numpy as np

from evalplan.sessions.cache import ByteLRU, nbytes_of


class Holder:
    def __init__(self, n: int) -> None:
        self.state = {"K": np.zeros((n, n)), "other": [np.zeros(n)]}
        self.same = self.state["K"]  # the same array twice counts once


def test_nbytes_counts_reachable_arrays_once() -> None:
    h = Holder(100)
    assert nbytes_of(h) == 100 * 100 * 8 + 100 * 8 + 256


def test_byte_lru_evicts_by_bytes_and_refuses_oversize_values() -> None:
    one = nbytes_of(Holder(100))
    cache = ByteLRU(max_bytes=3 * one)
    for k in range(5):
        cache.put(k, Holder(100))
    assert len(cache) == 3 and cache.nbytes <= 3 * one
    assert cache.get(0) is None and cache.get(4) is not None
    cache.put("big", Holder(1000))  # 8 MB > budget: not kept, nothing evicted for it
    assert cache.get("big") is None and len(cache) == 3
    assert cache.pop(4) is not None and cache.nbytes == 2 * one
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0


def test_byte_lru_keeps_recent_entries_under_a_new_budget_and_replaces_in_place() -> None:
    one = nbytes_of(Holder(100))
    cache = ByteLRU(max_bytes=4 * one)
    for k in range(4):
        cache.put(k, Holder(100))
    assert cache.get(0) is not None  # 0 is now the most recently used
    cache.max_bytes = 2 * one  # the app's setting, applied after import
    assert cache.max_bytes == 2 * one and len(cache) == 2 and cache.nbytes == 2 * one
    assert cache.get(0) is not None and cache.get(3) is not None and cache.get(1) is None
    cache.put(0, Holder(1000))  # a replacement too large for the budget: the old entry leaves too
    assert cache.get(0) is None and len(cache) == 1
    value, size = cache.take(3)
    assert value is not None and size == one and len(cache) == 0 and cache.take(3) == (None, None)
