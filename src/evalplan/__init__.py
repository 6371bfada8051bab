"""Evalplan: evaluation planning for LLM teams."""

__version__ = "0.1.0"
