"""The SQLAlchemy adapter of the store port: SQLite and PostgreSQL.

The only package that knows a database dialect; what differs between the two
is decided in `backends/`.
"""
