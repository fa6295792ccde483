"""A finite flow's completion time and slowdown (flows.fct_ms, flows.slowdown) and a run's RTT
fairness (runs.rtt_fairness; metrics.FlowMetrics and RunMetrics, issue 35): null for the flows and
runs uploaded before them, as for a bulk flow or a run of one base RTT.

Revision ID: 0003
Revises: 0002
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("flows") as flows:
        flows.add_column(sa.Column("fct_ms", sa.Float(), nullable=True))
        flows.add_column(sa.Column("slowdown", sa.Float(), nullable=True))
    with op.batch_alter_table("runs") as runs:
        runs.add_column(sa.Column("rtt_fairness", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as runs:
        runs.drop_column("rtt_fairness")
    with op.batch_alter_table("flows") as flows:
        flows.drop_column("slowdown")
        flows.drop_column("fct_ms")
