"""A flow's share of deliveries marked CE (flows.ce_rate; metrics.FlowMetrics.ce_rate, issue 34):
null for the flows uploaded before it, as for a flow without ECN.

Revision ID: 0002
Revises: 0001
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("flows") as flows:
        flows.add_column(sa.Column("ce_rate", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("flows") as flows:
        flows.drop_column("ce_rate")
