"""The ``slow`` marker: which tests ``./dev.sh test -m "not slow"`` (the developer loop) leaves out.

Slow are the tests marked ``@pytest.mark.slow`` where they are defined (each took 2-3 s or more in a full
run, ``pytest --durations``, 2 shared cores) and those that start the real processes a browser or a
worker needs (the ``worker`` and ``browser`` markers, added here). ``./dev.sh test`` (CI) runs everything.
A new long test gets ``@pytest.mark.slow`` on its definition.
"""

from __future__ import annotations

import pytest

#: markers whose tests are slow by nature (a real worker process, a real browser)
SLOW_MARKERS = ("worker", "browser")


def mark_slow(items: list[pytest.Item]) -> None:
    """Add ``slow`` to the tests with a ``SLOW_MARKERS`` marker."""
    for item in items:
        if any(item.get_closest_marker(name) for name in SLOW_MARKERS):
            item.add_marker(pytest.mark.slow)
