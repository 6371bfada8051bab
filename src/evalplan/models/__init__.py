"""Evaluated models (``/v1/models``), and the one lookup and reference-model check of models."""
