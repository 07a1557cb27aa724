"""Storage: the port (`port.py`), the event mapper, and the SQL adapter (`sql/`)."""
