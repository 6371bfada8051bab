"""Backtests of score-based coresets (``POST /v1/backtests``, papers/002 §3): validation and the job."""
