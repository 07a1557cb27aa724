"""Alembic's entry point for Headgate's revisions: on the connection the runner
passes in (`migrations.migrate`), inside its transaction, with Headgate's own
version table."""

from __future__ import annotations

from alembic import context

from headgate._store.sql.migrations import VERSION_TABLE

context.configure(
    connection=context.config.attributes["connection"],
    version_table=VERSION_TABLE,
    transaction_per_migration=False,
)
with context.begin_transaction():
    context.run_migrations()
