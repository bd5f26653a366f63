"""Alembic migrations of the registry store (run by `Store.open`)."""
