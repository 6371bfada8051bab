"""Imports of evaluation-harness logs (``POST /v1/imports/lm-eval``), inline or as a job."""
