"""Alembic environment of the registry store: runs on the connection `Store.open` hands over."""

from __future__ import annotations

from alembic import context

from mcpfleet.registry.store import metadata

connection = context.config.attributes["connection"]
# A table name of our own, so the registry can share a database with other alembic users.
context.configure(connection=connection, target_metadata=metadata, version_table="registry_alembic_version")
with context.begin_transaction():
    context.run_migrations()
