"""Alembic's schema history of the archive (env.py, versions/); schema.py applies it."""
