"""Storage: the port (`port/`), the event mapper, opening a store by URL
(`opening.py`), the SQL adapter (`sql/`) and the memory store (`memory/`)."""
