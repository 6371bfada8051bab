"""Imports of evaluation-harness logs (lm-eval, inspect_ai, HELM, lighteval), inline or as a job."""
