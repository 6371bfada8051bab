"""Alembic migrations; they run on SQLite and PostgreSQL."""
