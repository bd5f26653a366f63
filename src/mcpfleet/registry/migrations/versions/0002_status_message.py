"""Publishing: the `statusMessage` a publisher gives with a status change, and the merge order the
catalogue was last merged with (a start with the same order and no dropped source skips the merge).

Revision ID: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("registry_source_entries", sa.Column("status_message", sa.Text, nullable=True))
    op.add_column("registry_servers", sa.Column("status_message", sa.Text, nullable=True))
    op.add_column("registry_meta", sa.Column("merge_order", sa.Text, nullable=True))


def downgrade() -> None:
    op.drop_column("registry_meta", "merge_order")
    op.drop_column("registry_servers", "status_message")
    op.drop_column("registry_source_entries", "status_message")
