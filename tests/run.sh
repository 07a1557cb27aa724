#!/bin/sh
# The whole test suite, from a fresh checkout: set up, lint, type-check, test.
# PostgreSQL tests use $HEADGATE_TEST_POSTGRES_URL (default: the local server).
# Three test processes on two cores: many tests wait on a real clock or on
# another process, so a third keeps both cores busy (8.8 min against 10.9).
set -eu
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ]; then
    echo "installing Debian's chromium for the browser test" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
: "${HEADGATE_TEST_POSTGRES_URL:=postgresql+psycopg://postgres@127.0.0.1:5432/headgate_test}"
export HEADGATE_TEST_POSTGRES_URL
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev]'
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest -n 3 "$@"
