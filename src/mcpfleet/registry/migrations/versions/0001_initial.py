"""Initial registry schema: servers, source entries, source state, generation.

Revision ID: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "registry_servers",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("version", sa.String(255), primary_key=True),
        sa.Column("source", sa.String(63), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("is_latest", sa.Boolean, nullable=False),
        sa.Column("published_at", sa.String(32), nullable=False),
        sa.Column("updated_at", sa.String(32), nullable=False),
        sa.Column("status_changed_at", sa.String(32), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("document", sa.Text, nullable=False),
    )
    op.create_table(
        "registry_source_entries",
        sa.Column("source", sa.String(63), primary_key=True),
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("version", sa.String(255), primary_key=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("document", sa.Text, nullable=False),
    )
    op.create_table(
        "registry_source_state",
        sa.Column("source", sa.String(63), primary_key=True),
        sa.Column("content_hash", sa.String(64), nullable=True),
        sa.Column("filter_hash", sa.String(64), nullable=True),
        sa.Column("last_attempt", sa.String(32), nullable=True),
        sa.Column("last_success", sa.String(32), nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("entry_count", sa.Integer, nullable=False),
        sa.Column("entry_errors", sa.Text, nullable=False),
    )
    meta = op.create_table(
        "registry_meta",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("generation", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(meta, [{"id": 1, "generation": 0}])


def downgrade() -> None:
    for table in ("registry_meta", "registry_source_state", "registry_source_entries", "registry_servers"):
        op.drop_table(table)
