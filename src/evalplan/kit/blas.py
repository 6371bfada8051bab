"""One BLAS thread per computation in a serving process (issue 34, "coreset predict p99 <= 1 s").

A server computes many small problems at once, one per request thread (a predict's ridge and SVDs are
tens x hundreds). OpenBLAS splits each call over all cores and its threads spin while they wait: with the
cores busy (other requests, jobs, other processes), one 64 x 53 SVD took 0.32 s instead of 3 ms, so a
predict needing the extrapolation guard's AIPW took seconds to minutes (measured: one AIPW predict of a
53-reference coreset 3.26 s with the default threads, 0.10 s with one, load 12 on 2 cores). Requests get
their parallelism from running side by side, not from BLAS. An operator who sets a thread variable
(``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``) keeps it.
"""

from __future__ import annotations

import os

from threadpoolctl import threadpool_limits

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def limit_blas_threads() -> bool:
    """Limit the BLAS libraries loaded now (``threadpoolctl``) and those loaded later (the environment
    they read at load) to one thread, unless the operator set a thread variable; whether it did."""
    if any(os.environ.get(name) for name in THREAD_VARIABLES):
        return False
    for name in THREAD_VARIABLES:
        os.environ[name] = "1"
    threadpool_limits(limits=1, user_api="blas")
    return True
