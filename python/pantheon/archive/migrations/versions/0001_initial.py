"""The first schema: tokens, results, result_schemes, runs, flows, files (models.py).

Revision ID: 0001
Revises:
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('tokens',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('revoked_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('hash')
    )
    op.create_index(op.f('ix_tokens_name'), 'tokens', ['name'], unique=False)
    op.create_table('results',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('manifest_sha256', sa.String(length=64), nullable=False),
    sa.Column('archive_sha256', sa.String(length=64), nullable=False),
    sa.Column('archive_bytes', sa.BigInteger(), nullable=False),
    sa.Column('title', sa.String(length=500), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('preset', sa.String(length=200), nullable=False),
    sa.Column('emulator_options', sa.Text(), nullable=False),
    sa.Column('node', sa.String(length=200), nullable=False),
    sa.Column('peer', sa.String(length=200), nullable=False),
    sa.Column('direction', sa.String(length=20), nullable=False),
    sa.Column('link', sa.String(length=50), nullable=False),
    sa.Column('flows', sa.Integer(), nullable=False),
    sa.Column('started_at', sa.DateTime(), nullable=False),
    sa.Column('year', sa.Integer(), nullable=False),
    sa.Column('month', sa.Integer(), nullable=False),
    sa.Column('uploaded_at', sa.DateTime(), nullable=False),
    sa.Column('token_id', sa.Integer(), nullable=True),
    sa.Column('layout', sa.String(length=20), nullable=False),
    sa.Column('pantheon_version', sa.String(length=50), nullable=False),
    sa.Column('git_commit', sa.String(length=64), nullable=False),
    sa.Column('remote_pantheon_version', sa.String(length=50), nullable=False),
    sa.Column('remote_git_commit', sa.String(length=64), nullable=False),
    sa.Column('delay_bound_min_ms', sa.Float(), nullable=True),
    sa.Column('delay_bound_max_ms', sa.Float(), nullable=True),
    sa.Column('setup_json', sa.Text(), nullable=False),
    sa.Column('metadata_json', sa.Text(), nullable=False),
    sa.Column('search_text', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['token_id'], ['tokens.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('manifest_sha256')
    )
    op.create_index(op.f('ix_results_direction'), 'results', ['direction'], unique=False)
    op.create_index(op.f('ix_results_flows'), 'results', ['flows'], unique=False)
    op.create_index(op.f('ix_results_kind'), 'results', ['kind'], unique=False)
    op.create_index(op.f('ix_results_link'), 'results', ['link'], unique=False)
    op.create_index(op.f('ix_results_month'), 'results', ['month'], unique=False)
    op.create_index(op.f('ix_results_node'), 'results', ['node'], unique=False)
    op.create_index(op.f('ix_results_peer'), 'results', ['peer'], unique=False)
    op.create_index(op.f('ix_results_preset'), 'results', ['preset'], unique=False)
    op.create_index(op.f('ix_results_started_at'), 'results', ['started_at'], unique=False)
    op.create_index(op.f('ix_results_year'), 'results', ['year'], unique=False)
    op.create_table('files',
    sa.Column('result_id', sa.Integer(), nullable=False),
    sa.Column('path', sa.String(length=1000), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('size_bytes', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['result_id'], ['results.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('result_id', 'path')
    )
    op.create_table('result_schemes',
    sa.Column('result_id', sa.Integer(), nullable=False),
    sa.Column('scheme', sa.String(length=200), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('display', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=500), nullable=False),
    sa.Column('runs', sa.Integer(), nullable=False),
    sa.Column('valid_runs', sa.Integer(), nullable=False),
    sa.Column('throughput_mbps_mean', sa.Float(), nullable=True),
    sa.Column('delay_p95_ms_mean', sa.Float(), nullable=True),
    sa.Column('loss_rate_mean', sa.Float(), nullable=True),
    sa.Column('score', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['result_id'], ['results.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('result_id', 'scheme')
    )
    op.create_index(op.f('ix_result_schemes_scheme'), 'result_schemes', ['scheme'], unique=False)
    op.create_table('runs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('result_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('scheme', sa.String(length=200), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('valid', sa.Boolean(), nullable=False),
    sa.Column('flags', sa.Text(), nullable=False),
    sa.Column('capacity_mbps', sa.Float(), nullable=True),
    sa.Column('utilization', sa.Float(), nullable=True),
    sa.Column('jain_index', sa.Float(), nullable=True),
    sa.Column('power', sa.Float(), nullable=True),
    sa.Column('delay_bound_ms', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['result_id'], ['results.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_runs_result_id'), 'runs', ['result_id'], unique=False)
    op.create_index(op.f('ix_runs_scheme'), 'runs', ['scheme'], unique=False)
    op.create_table('flows',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('flow', sa.String(length=10), nullable=False),
    sa.Column('scheme', sa.String(length=200), nullable=True),
    sa.Column('sent_packets', sa.Integer(), nullable=False),
    sa.Column('sent_bytes', sa.BigInteger(), nullable=False),
    sa.Column('delivered_packets', sa.Integer(), nullable=False),
    sa.Column('delivered_bytes', sa.BigInteger(), nullable=False),
    sa.Column('first_send_s', sa.Float(), nullable=True),
    sa.Column('last_send_s', sa.Float(), nullable=True),
    sa.Column('first_delivery_s', sa.Float(), nullable=True),
    sa.Column('last_delivery_s', sa.Float(), nullable=True),
    sa.Column('duration_s', sa.Float(), nullable=False),
    sa.Column('throughput_mbps', sa.Float(), nullable=False),
    sa.Column('ingress_mbps', sa.Float(), nullable=False),
    sa.Column('delay_p95_ms', sa.Float(), nullable=True),
    sa.Column('delay_mean_ms', sa.Float(), nullable=True),
    sa.Column('delay_median_ms', sa.Float(), nullable=True),
    sa.Column('loss_rate', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_flows_run_id'), 'flows', ['run_id'], unique=False)


def downgrade() -> None:
    for table in ("flows", "runs", "result_schemes", "files", "results", "tokens"):
        op.drop_table(table)
