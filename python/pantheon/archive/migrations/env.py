"""Alembic's environment: runs the migrations on the connection schema.py hands over (in
config.attributes["connection"]); the archive has no alembic.ini, its URL comes from --db."""
from __future__ import annotations

from alembic import context

from pantheon.archive.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
