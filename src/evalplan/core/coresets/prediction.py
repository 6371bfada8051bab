"""Full-suite score estimates from a model's coreset scores, with intervals (paper §3.2, eq. 3).

Point estimates follow the paper: a benchmark's estimate is the mean over its coreset items, a
capability's the mean over its covered benchmarks, the overall score the mean over covered
benchmarks (eq. 3). Benchmarks without coreset items are excluded from all averages.

Intervals (our addition; the paper reports none) treat each benchmark's coreset items as a
**simple random sample without replacement** of that benchmark. A greedy coreset (facility
location, DPP, ...) is *not* a random sample, so these intervals carry no coverage guarantee;
their empirical coverage on real score data is measured by a bench script. Per benchmark:

* ``Var = s^2 / n * (1 - n / N)``: sample variance ``s^2`` (ddof=1) of the ``n`` coreset scores
  with the finite-population correction for a benchmark of ``N`` items; ``n = N`` gives a
  zero-width interval (the mean is exact).
* When ``n = 1`` or ``s^2 = 0`` the sample variance says nothing, so a 1-item or unanimous estimate
  never claims zero width:

  - binary benchmarks (scores at the two ends of the range): the Wilson score interval with the
    effective sample size ``n' = n / (1 - n/N)`` (the FPC folded into ``n``); it always contains
    the estimate, e.g. ``[0.245, 1]`` for one correct item of a 5-item benchmark at 95%, and its
    half-width ``h`` gives the variance ``(h / z)^2`` used when combining benchmarks;
  - other bounded benchmarks: the worst-case (Popoviciu) variance ``(hi - lo)^2 / 4`` of any
    distribution on the score range, ``Var = (hi - lo)^2 / (4 n) * (1 - n/N)``;
  - unbounded ones: an infinite interval.

A capability or the overall score with one covered benchmark is that benchmark (its estimate and interval).
Otherwise capability and overall intervals combine the benchmark variances assuming independent benchmarks:
``Var(mean of B_c estimates) = sum_b Var_b / B_c^2``, centered at the point estimate. Intervals
are normal-approximation (``z`` for ``level``) and clipped to the score range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import norm

Range = tuple[float | None, float | None]


def _ranges(score_range: Range | Sequence[Range], B: int) -> list[tuple[float, float]]:
    arr = np.asarray(score_range, dtype=object)
    if arr.shape == (2,):  # one pair for all benchmarks
        pair = arr
        arr = np.empty((B, 2), dtype=object)
        arr[:] = pair
    if arr.shape != (B, 2):
        raise ValueError(f"score_range needs one (lo, hi) pair or {B} of them")
    out = []
    for lo, hi in arr:
        lo_f = -math.inf if lo is None else float(lo)
        hi_f = math.inf if hi is None else float(hi)
        if not lo_f < hi_f:
            raise ValueError(f"invalid score range ({lo}, {hi})")
        out.append((lo_f, hi_f))
    return out


def _interval(center: float, var: float, z: float, lo: float, hi: float) -> list[float]:
    half = z * math.sqrt(var) if math.isfinite(var) else math.inf
    return [max(lo, center - half), min(hi, center + half)]


def estimate_from_coreset(
    scores: Any,
    labels: Any,
    benchmark_sizes: Sequence[int],
    capabilities: Sequence[str] | None = None,
    *,
    level: float = 0.95,
    score_range: Range | Sequence[Range] = (0.0, 1.0),
    binary: bool | Sequence[bool] | None = None,
    benchmark_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Estimate benchmark, capability and overall scores of one model from its coreset scores.

    ``scores``: the model's scores on the coreset items (NaN = not run, ignored); ``labels``: their
    benchmark indices ``0..B-1``; ``benchmark_sizes``: ``N_b`` of every benchmark; ``capabilities``:
    benchmark index -> capability name (optional); ``score_range``: one ``(lo, hi)`` for all or one
    per benchmark (``None`` = unbounded); ``binary``: per benchmark or for all, ``None`` = detected
    (every score at an end of the range). Keys of ``"benchmarks"`` are ``benchmark_names`` or the
    indices. Returns plain dicts::

        {"level": .95,
         "benchmarks": {b: {"estimate", "interval": [lo, hi], "std_error", "n_items", "n_total", "method"}},
         "capabilities": {c: {"estimate", "interval", "std_error", "n_benchmarks", "n_benchmarks_total"}},
         "overall": {"estimate", "interval", "std_error", "n_benchmarks", "n_benchmarks_total"}}

    Uncovered benchmarks appear with ``estimate``/``interval`` ``None``. See the module docstring
    for the interval (a simple-random-sample approximation; a greedy coreset is not one).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    x = np.asarray(scores, dtype=np.float64).ravel()
    lab = np.asarray(labels).ravel()
    if x.shape != lab.shape:
        raise ValueError(f"scores and labels differ in length: {x.size} vs {lab.size}")
    if lab.size and (lab.dtype.kind not in "iu" or lab.min() < 0):
        raise ValueError("labels must be non-negative integer benchmark indices")
    sizes = [int(s) for s in benchmark_sizes]
    B = len(sizes)
    if lab.size and lab.max() >= B:
        raise ValueError(f"label {lab.max()} but only {B} benchmark sizes")
    if capabilities is not None and len(capabilities) != B:
        raise ValueError(f"capabilities has {len(capabilities)} entries for {B} benchmarks")
    names = list(benchmark_names) if benchmark_names is not None else list(range(B))
    if len(names) != B:
        raise ValueError(f"benchmark_names has {len(names)} entries for {B} benchmarks")
    ranges = _ranges(score_range, B)
    flags: list[bool | None] = [binary] * B if binary is None or isinstance(binary, (bool, np.bool_)) \
        else [bool(f) for f in binary]
    if len(flags) != B:
        raise ValueError(f"binary needs one flag or {B} of them")
    z = float(norm.ppf(0.5 + level / 2))

    per_b: dict[Any, dict[str, Any]] = {}
    intervals: list[list[float] | None] = [None] * B
    est = np.full(B, np.nan)
    var = np.full(B, np.nan)
    for b in range(B):
        v = x[(lab == b) & ~np.isnan(x)]
        n, N = int(v.size), sizes[b]
        lo, hi = ranges[b]
        if n > N:
            raise ValueError(f"benchmark {names[b]!r}: {n} coreset scores but only {N} items")
        entry: dict[str, Any] = {"estimate": None, "interval": None, "std_error": None,
                                 "n_items": n, "n_total": N, "method": None}
        if n:
            mean = float(v.mean())
            fpc = 1.0 - n / N
            s2 = float(v.var(ddof=1)) if n > 1 else 0.0
            is_binary = flags[b] if flags[b] is not None else bool(np.all((v == lo) | (v == hi)))
            center = mean
            if fpc == 0.0:
                vb, method = 0.0, "exact"
            elif n > 1 and s2 > 0:
                vb, method = s2 / n * fpc, "fpc_sample_variance"
            elif is_binary and math.isfinite(hi - lo):
                p_hat = float(np.mean(v == hi))
                n_eff = n / fpc
                denom = 1.0 + z * z / n_eff
                half = z / denom * math.sqrt(p_hat * (1 - p_hat) / n_eff + z * z / (4 * n_eff * n_eff))
                center = lo + (hi - lo) * (p_hat + z * z / (2 * n_eff)) / denom
                vb, method = ((hi - lo) * half / z) ** 2, "wilson"
            elif math.isfinite(hi - lo):
                vb, method = (hi - lo) ** 2 / (4 * n) * fpc, "worst_case_range"
            else:
                vb, method = math.inf, "unbounded"
            est[b], var[b] = mean, vb
            intervals[b] = _interval(center, vb, z, lo, hi)
            entry.update(estimate=mean, interval=intervals[b], std_error=math.sqrt(vb), method=method)
        per_b[names[b]] = entry

    def combine(members: np.ndarray) -> dict[str, Any]:
        covered = members[~np.isnan(est[members])]
        out: dict[str, Any] = {"estimate": None, "interval": None, "std_error": None,
                               "n_benchmarks": int(covered.size), "n_benchmarks_total": int(members.size)}
        if covered.size == 1:  # the aggregate of one benchmark is that benchmark (its Wilson interval too)
            b = int(covered[0])
            out.update(estimate=float(est[b]), interval=list(intervals[b] or []), std_error=math.sqrt(var[b]))
        elif covered.size:
            e = float(est[covered].mean())
            vc = float(var[covered].sum()) / covered.size ** 2
            lo = min(ranges[b][0] for b in covered)
            hi = max(ranges[b][1] for b in covered)
            out.update(estimate=e, interval=_interval(e, vc, z, lo, hi), std_error=math.sqrt(vc))
        return out

    caps: dict[str, dict[str, Any]] = {}
    if capabilities is not None:
        cap_arr = np.asarray(capabilities, dtype=object)
        for c in dict.fromkeys(capabilities):
            caps[c] = combine(np.flatnonzero(cap_arr == c))
    return {"level": level, "benchmarks": per_b, "capabilities": caps, "overall": combine(np.arange(B))}
