"""Handler declarations: what one handle records, every other handle (another
process, a restart) reads; a group's newest declaration of a kind replaces its
previous one, an unchanged one keeps its row, and other groups' stay apart."""

from __future__ import annotations

import threading

import pytest

from headgate._errors import StoreClosed
from headgate._store.port import DeclaredHandler, HandlerDeclaration
from headgate.testing import FakeClock
from tests.store.contract.conftest import StoreFactory

PDF = HandlerDeclaration("pdf.render", queue="pdf", priority=5, start_within_ms=60_000)
MAIL = HandlerDeclaration("mail.send", queue="default", priority=0, rate_class="smtp")


def test_declarations_are_read_from_every_handle_and_survive_a_restart(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    one, other = make_store(), make_store()
    assert other.handlers.declared() == []
    written = one.handlers.declare("default", "web-1:10", [PDF, MAIL])
    at = clock.now_ms()
    expected = [
        DeclaredHandler(MAIL, "default", "web-1:10", at),
        DeclaredHandler(PDF, "default", "web-1:10", at),
    ]
    assert written == expected, "the rows written, by kind"
    assert other.handlers.declared() == expected
    assert make_store().handlers.declared(["pdf.render"]) == expected[1:]
    assert other.handlers.declared([]) == [] and other.handlers.declared(["nope"]) == []


def test_an_unchanged_declaration_keeps_its_row_and_a_changed_one_replaces_it(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    store = make_store()
    store.handlers.declare("default", "worker-1:1", [PDF, MAIL])
    first = clock.now_ms()
    clock.advance(5_000)
    moved = HandlerDeclaration("pdf.render", queue="render", priority=5)
    written = store.handlers.declare("default", "worker-2:2", [moved, MAIL])
    assert written == [DeclaredHandler(moved, "default", "worker-2:2", clock.now_ms())]
    assert make_store().handlers.declared() == [
        DeclaredHandler(MAIL, "default", "worker-1:1", first),
        DeclaredHandler(moved, "default", "worker-2:2", clock.now_ms()),
    ]


def test_a_start_keeps_the_groups_other_kinds_and_other_groups_declarations(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    """A group's processes may each register some of its handlers: a start that
    declares only some of them forgets none."""
    store = make_store()
    store.handlers.declare("default", "pdf-worker:1", [PDF])
    store.handlers.declare("default", "mail-worker:2", [MAIL])
    other_queue = HandlerDeclaration("pdf.render", queue="pdf-batch", priority=0)
    store.handlers.declare("batch", "batch:3", [other_queue])
    at = clock.now_ms()
    assert make_store().handlers.declared(["pdf.render", "mail.send"]) == [
        DeclaredHandler(MAIL, "default", "mail-worker:2", at),
        DeclaredHandler(other_queue, "batch", "batch:3", at),
        DeclaredHandler(PDF, "default", "pdf-worker:1", at),
    ]


def test_a_closed_store_records_no_declaration(make_store: StoreFactory) -> None:
    store = make_store()
    store.close()
    with pytest.raises(StoreClosed):
        store.handlers.declare("default", "host:1", [PDF])


def test_processes_of_one_group_starting_together_all_start(make_store: StoreFactory) -> None:
    """Every worker of a deployment declares the same kinds as it starts: those
    that write at once must neither fail nor leave two rows of one kind."""
    stores = [make_store() for _ in range(4)]
    failures: list[BaseException] = []
    ready = threading.Barrier(len(stores))

    def start(index: int) -> None:
        ready.wait()
        try:
            stores[index].handlers.declare("default", f"worker-{index}:1", [PDF, MAIL])
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failures == []
    declared = make_store().handlers.declared()
    assert sorted(row.declaration.kind for row in declared) == ["mail.send", "pdf.render"]
