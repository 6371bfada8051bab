"""Benchmark-level statistics: the score scale, item statistics, similarity, benchmark selection, budgets."""
