"""Liveness and readiness checks."""
