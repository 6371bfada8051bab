"""A coreset's budget: an item count over the benchmarks, or ``{"fraction": f}`` of each benchmark."""

from __future__ import annotations

from dataclasses import dataclass

from evalplan.core.benchmarks.budget import fraction_counts
from evalplan.kit.errors import InvalidInput


@dataclass
class BudgetPlan:
    total: int
    per_benchmark: list[int] | None  # set for fraction budgets: each benchmark selected on its own


def plan_budget(budget: int | dict[str, float], sizes: list[int], names: list[str], stratified: bool) -> BudgetPlan:
    n_total = sum(sizes)
    if isinstance(budget, dict):
        fraction = budget.get("fraction")
        if set(budget) != {"fraction"} or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise InvalidInput("budget must be an integer or {\"fraction\": f} with 0 < f <= 1",
                               [{"field": "budget", "detail": f"got {budget!r}"}])
        counts = fraction_counts(sizes, float(fraction))
        return BudgetPlan(sum(counts), counts)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise InvalidInput("budget must be a positive integer or {\"fraction\": f}",
                           [{"field": "budget", "detail": f"got {budget!r}"}])
    if budget > n_total:
        raise InvalidInput(f"budget {budget} is larger than the {n_total} selectable items of {', '.join(names)}",
                           [{"field": "budget", "detail": f"at most {n_total}"}])
    if stratified and budget < len(sizes):
        raise InvalidInput(
            f"budget {budget} is smaller than the number of benchmarks ({len(sizes)}) under stratification; "
            "raise the budget or set params.stratify to false",
            [{"field": "budget", "detail": f"at least {len(sizes)}"}])
    return BudgetPlan(budget, None)
