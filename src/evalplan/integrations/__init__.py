"""Harness formats and adapters (lm-evaluation-harness log parsing, ...)."""
