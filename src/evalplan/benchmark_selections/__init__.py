"""Benchmark-level selection (``/v1/benchmark-selections``, paper 000 §4.4)."""
