"""Backtests of coresets and sessions against the truth, and the budget planner built on them."""
