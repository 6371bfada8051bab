"""Benchmark-benchmark similarity from prompt text (``GET /v1/benchmark-similarity``, papers/000 §4.4)."""
