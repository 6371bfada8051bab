"""Importers and exporters for evaluation harness formats and CSV/JSONL."""
