"""What every import (lm-eval, inspect, HELM, lighteval) does around the write (issue 24 item 11).

* :func:`check_related_items`: an import into an existing benchmark that already holds items, none of
  which the import names, is another task's data (lighteval details into a text benchmark): 409 unless
  the request sets ``allow_foreign_items``.
* :func:`adopt_metric`: a benchmark without any score yet takes the imported metric as its default
  metric, so ``GET .../scores`` (which reads the default metric) shows the import; a benchmark with
  scores keeps its default metric and the answer says how to read the imported one.
* :func:`cells_of`: the stored cells of some models on a benchmark under a metric, counted before and
  after the write, so every answer reports ``scores_replaced`` (cells that held a score already).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from evalplan.benchmarks.repository import any_item_pk, cell_count, has_scores, item_count
from evalplan.db.models import Benchmark
from evalplan.kit.errors import Conflict


def check_related_items(session: Session, benchmark: Benchmark, item_ids: list[str], *, created: bool,
                        allow_foreign_items: bool) -> None:
    """409 when ``benchmark`` existed, holds items, and none of ``item_ids`` is among them."""
    if created or allow_foreign_items or not item_ids:
        return
    held = item_count(session, benchmark.id)
    if not held:
        return
    for start in range(0, len(item_ids), 1000):
        chunk = item_ids[start:start + 1000]
        if any_item_pk(session, benchmark.id, chunk):
            return
    raise Conflict(
        f"benchmark {benchmark.name!r} holds {held} items and none of the {len(item_ids)} imported ones "
        f"(e.g. {item_ids[0]!r}): these look like another task's items; import into another benchmark, "
        "or set allow_foreign_items=true to add them",
        [{"field": "benchmark", "detail": f"{benchmark.name!r} already has {held} other items"},
         {"field": "allow_foreign_items", "detail": "true adds the items to this benchmark anyway"}])


def adopt_metric(session: Session, benchmark: Benchmark, metric: str) -> str | None:
    """Make ``metric`` the default of a benchmark without scores; a note when the default stays another."""
    if benchmark.default_metric == metric:
        return None
    if not has_scores(session, benchmark.id):
        previous, benchmark.default_metric = benchmark.default_metric, metric
        return f"benchmark {benchmark.name!r} had no scores: its default metric is now {metric!r} (was {previous!r})"
    return (f"scores stored under metric {metric!r}; the benchmark's default metric stays "
            f"{benchmark.default_metric!r}: read them with ?metric={metric}")


def cells_of(session: Session, benchmark: Benchmark, model_ids: list[str], metric: str) -> int:
    """How many cells ``model_ids`` have on ``benchmark`` under ``metric``."""
    total = 0
    for start in range(0, len(model_ids), 500):
        chunk = model_ids[start:start + 500]
        total += cell_count(session, benchmark.id, metric, chunk)
    return total
