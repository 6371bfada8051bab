"""Thin FastAPI routers; all logic lives in app.services."""
