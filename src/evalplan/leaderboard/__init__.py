"""Leaderboards: models x benchmarks, measured scores and marked estimates (sessions, coresets)."""
