"""Persistence: SQLAlchemy 2 models, engines and sessions, migrations."""
