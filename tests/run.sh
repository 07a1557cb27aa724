#!/bin/sh
# The whole test suite, from a fresh checkout: set up, lint, type-check, test.
# PostgreSQL tests use $HEADGATE_TEST_POSTGRES_URL (default: the local server).
set -eu
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev]'
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest -n 2 "$@"
