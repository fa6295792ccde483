"""Leagues (issue 36 §5): a league dir of `pantheon league` as one upload, its ranking one row a
scheme (league_schemes) and its files (league_files) beside the results' (models.League).

Revision ID: 0004
Revises: 0003
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('leagues',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('manifest_sha256', sa.String(length=64), nullable=False),
    sa.Column('archive_sha256', sa.String(length=64), nullable=False),
    sa.Column('archive_bytes', sa.BigInteger(), nullable=False),
    sa.Column('title', sa.String(length=500), nullable=False),
    sa.Column('matrix', sa.String(length=200), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('git_commit', sa.String(length=50), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('uploaded_at', sa.DateTime(), nullable=False),
    sa.Column('token_id', sa.Integer(), nullable=True),
    sa.Column('duration_s', sa.Float(), nullable=False),
    sa.Column('environments', sa.Integer(), nullable=False),
    sa.Column('rows', sa.Integer(), nullable=False),
    sa.Column('failed_rows', sa.Integer(), nullable=False),
    sa.Column('top_scheme', sa.String(length=200), nullable=False),
    sa.Column('league_json', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['token_id'], ['tokens.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('manifest_sha256')
    )
    op.create_index(op.f('ix_leagues_created_at'), 'leagues', ['created_at'], unique=False)
    op.create_index(op.f('ix_leagues_git_commit'), 'leagues', ['git_commit'], unique=False)
    op.create_index(op.f('ix_leagues_matrix'), 'leagues', ['matrix'], unique=False)
    op.create_table('league_files',
    sa.Column('league_id', sa.Integer(), nullable=False),
    sa.Column('path', sa.String(length=1000), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('size_bytes', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['league_id'], ['leagues.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('league_id', 'path')
    )
    op.create_table('league_schemes',
    sa.Column('league_id', sa.Integer(), nullable=False),
    sa.Column('scheme', sa.String(length=200), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('simulated_as', sa.String(length=500), nullable=False),
    sa.Column('stand_in', sa.String(length=200), nullable=True),
    sa.Column('rank', sa.Integer(), nullable=True),
    sa.Column('wins', sa.Integer(), nullable=True),
    sa.Column('contests', sa.Integer(), nullable=True),
    sa.Column('win_share', sa.Float(), nullable=True),
    sa.Column('mean_relative_score', sa.Float(), nullable=True),
    sa.Column('throughput_mbps_median', sa.Float(), nullable=True),
    sa.Column('utilization_median', sa.Float(), nullable=True),
    sa.Column('delay_p95_ms_median', sa.Float(), nullable=True),
    sa.Column('loss_rate_median', sa.Float(), nullable=True),
    sa.Column('jain_median', sa.Float(), nullable=True),
    sa.Column('harm_throughput_median', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['league_id'], ['leagues.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('league_id', 'scheme')
    )
    op.create_index(op.f('ix_league_schemes_scheme'), 'league_schemes', ['scheme'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_league_schemes_scheme'), table_name='league_schemes')
    op.drop_table('league_schemes')
    op.drop_table('league_files')
    op.drop_index(op.f('ix_leagues_matrix'), table_name='leagues')
    op.drop_index(op.f('ix_leagues_git_commit'), table_name='leagues')
    op.drop_index(op.f('ix_leagues_created_at'), table_name='leagues')
    op.drop_table('leagues')
