"""The schedules list keeps code point order, and its search exact prefixes, on a
PostgreSQL database whose collation is a language's: there `B` sorts after `a`,
and `A`, `Ab` fall between `a` and `b`, so a plain range of the primary key
would both reorder the list and let other ids into a search."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.store.builders import create_schedule


@pytest.fixture
def language_collated_url(postgres_server_url: str) -> Iterator[str]:
    name = f"headgate_icu_{uuid.uuid4().hex[:12]}"
    admin = create_engine(
        make_url(postgres_server_url).set(database="postgres"), isolation_level="AUTOCOMMIT"
    )
    try:
        with admin.connect() as connection:
            connection.execute(
                text(
                    f"CREATE DATABASE \"{name}\" LOCALE_PROVIDER icu ICU_LOCALE 'en' "
                    "LOCALE 'C.UTF-8' TEMPLATE template0"
                )
            )
        yield make_url(postgres_server_url).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.mark.slow
def test_the_list_and_its_search_ignore_a_language_collation(language_collated_url: str) -> None:
    store = SqlStore(language_collated_url, FakeClock())
    try:
        with store.engine.connect() as connection:
            assert connection.execute(text("SELECT 'B' < 'a'")).scalar() is False  # the premise
        ids = ["a", "B", "ab", "Ab", "A", "b", "a-b"]
        for schedule_id in ids:
            create_schedule(store, schedule_id)
        listed = store.reads.schedules_page(50, None)
        assert [row.schedule_id for row in listed.items] == sorted(ids)
        found = store.reads.schedules_page(50, None, "a")
        assert [row.schedule_id for row in found.items] == ["a", "a-b", "ab"]
        assert store.reads.schedule_count("a") == 3
    finally:
        store.close()
