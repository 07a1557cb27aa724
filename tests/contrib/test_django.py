"""Django's Tasks framework on Headgate, in a small Django project
(tests/django_project), on SQLite and PostgreSQL: enqueue, run, result; an
enqueue inside `transaction.atomic()` commits and rolls back with the
caller's rows; a store in another database is written at the commit; and
`manage.py headgate_worker` runs the project's tasks until SIGTERM.

Each test runs its Django in a child process: Django's settings are one per
process, and each test has a database of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import BACKENDS, drop_postgres_schema, fresh_postgres_url

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
PREAMBLE = """
import json
import django
django.setup()
from django.core.management import call_command
from django.db import transaction
from django_tasks import task_backends
from django_tasks.exceptions import TaskResultDoesNotExist
from tests.django_project.shop.models import Order
from tests.django_project.shop.tasks import count_orders, mail, note, refuse, ship
call_command("migrate", run_syncdb=True, verbosity=0)
backend = task_backends["default"]
"""


def project_environment(database_url: str, tmp_path: Path) -> dict[str, str]:
    """The environment of a Django process of the test project on `database_url`."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.django_project.settings",
        "HEADGATE_DJANGO_DATABASE": database_url,
        "HEADGATE_DJANGO_ELSEWHERE": str(tmp_path / "elsewhere.db"),
        "PYTHONPATH": str(ROOT),
    }


@pytest.fixture(params=BACKENDS)
def project_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a Django process of the test project, on a new database."""
    if request.param == "sqlite":
        yield project_environment(f"sqlite:///{tmp_path / 'project.db'}", tmp_path)
        return
    server = request.getfixturevalue("postgres_server_url")
    url, schema = fresh_postgres_url(server)
    yield project_environment(url, tmp_path)
    drop_postgres_schema(server, schema)


def run_python(env: dict[str, str], code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a Python process of its own, which must exit 0."""
    finished = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    return finished


def run_django(env: dict[str, str], code: str) -> list[object]:
    """Run `code` after the preamble in a Django process; what it printed, as JSON lines."""
    finished = run_python(env, PREAMBLE + textwrap.dedent(code))
    return [
        json.loads(line)
        for line in finished.stdout.splitlines()
        if line.startswith(("[", "{", '"'))
    ]


def test_a_task_is_enqueued_run_and_its_result_read(project_env: dict[str, str]) -> None:
    (seen,) = run_django(
        project_env,
        """
        order = Order.objects.create(item="book")
        result = ship.enqueue(order.id)
        before = result.status
        mailed = mail.using(run_after=None).enqueue("ada@example.com")
        failing = refuse.enqueue("out of stock")
        backend.headgate.drain(timeout=30, queues=["default", "emails"])
        result.refresh()
        mailed.refresh()
        again = ship.get_result(result.id)
        failed = refuse.get_result(failing.id)
        job = backend.headgate.jobs.get(result.id)
        print(json.dumps({
            "before": before, "status": result.status, "value": result.return_value,
            "attempts": result.attempts, "again": again.return_value,
            "mailed": mailed.return_value, "mail_queue": backend.headgate.jobs.get(mailed.id).queue,
            "mail_priority": backend.headgate.jobs.get(mailed.id).priority,
            "failed": failed.status,
            "error": failed.errors[0].exception_class_path,
            "error_class_is_value_error": failed.errors[0].exception_class is ValueError,
            "traceback_frames": [
                name in failed.errors[0].traceback for name in ("in refuse", "in _check_stock")
            ],
            "traceback_ends": failed.errors[0].traceback.splitlines()[-1],
            "kind": job.kind, "payload": job.payload,
            "finished": result.finished_at is not None and result.enqueued_at is not None,
        }))
        """,
    )
    assert seen == {
        "before": "READY",
        "status": "SUCCESSFUL",
        "value": {"shipped": "book"},
        "attempts": 1,
        "again": {"shipped": "book"},
        "mailed": "mailed ada@example.com on attempt 1",
        "mail_queue": "emails",
        "mail_priority": 10,
        "failed": "FAILED",
        "error": "builtins.ValueError",
        "error_class_is_value_error": True,
        "traceback_frames": [True, True],
        "traceback_ends": "ValueError: out of stock",
        "kind": "tests.django_project.shop.tasks.ship",
        "payload": {"args": [1], "kwargs": {}},
        "finished": True,
    }


def test_a_result_whose_kind_names_no_task_imports_nothing(
    project_env: dict[str, str], tmp_path: Path
) -> None:
    """A job's kind is any text an enqueue gave (the HTTP API's too): get_result
    finds its task among the registered ones, and never imports the module the
    kind names, whose import-time code would run."""
    (tmp_path / "trap_module.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(tmp_path / 'imported')!r}).write_text('ran')\n"
        "def task(): ...\n"
    )
    (seen,) = run_django(
        project_env,
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        job = backend.headgate.enqueue("trap_module.task", {{"args": [], "kwargs": {{}}}})
        try:
            backend.get_result(job.id)
            said = None
        except TaskResultDoesNotExist as error:
            said = str(error)
        order = ship.enqueue(Order.objects.create(item="lamp").id)
        print(json.dumps({{
            "said": said, "job": job.id,
            "imported": "trap_module" in sys.modules,
            "a task's own": backend.get_result(order.id).task.module_path,
        }}))
        """,
    )
    assert seen == {
        "said": f"{seen['job']}: its job's kind 'trap_module.task' is no task of the backend "
        "'default' in this process (a task is known once the module defining it is imported)",
        "job": seen["job"],
        "imported": False,
        "a task's own": "tests.django_project.shop.tasks.ship",
    }
    assert not (tmp_path / "imported").exists(), "the module a job's kind named was imported"


def test_an_enqueue_in_an_atomic_block_commits_and_rolls_back_with_it(
    project_env: dict[str, str],
) -> None:
    (seen,) = run_django(
        project_env,
        """
        from headgate import NotFound
        hg = backend.headgate
        try:
            with transaction.atomic():
                order = Order.objects.create(item="lamp")
                rolled_back = ship.enqueue(order.id)
                raise RuntimeError("payment declined")
        except RuntimeError:
            pass
        try:
            ship.get_result(rolled_back.id)
            gone = False
        except TaskResultDoesNotExist:
            gone = True
        with transaction.atomic():
            order = Order.objects.create(item="desk")
            kept = ship.enqueue(order.id)
            try:
                hg.jobs.get(kept.id)  # the store's own connection: not committed yet
                seen_before_commit = True
            except NotFound:
                seen_before_commit = False
        state_after_commit = hg.jobs.get(kept.id).state
        hg.drain(timeout=30)
        print(json.dumps({
            "gone": gone, "orders": sorted(Order.objects.values_list("item", flat=True)),
            "seen_before_commit": seen_before_commit, "after_commit": state_after_commit,
            "value": ship.get_result(kept.id).return_value,
            "jobs": len(hg.jobs.list().jobs),
        }))
        """,
    )
    assert seen == {
        "gone": True,
        "orders": ["desk"],
        "seen_before_commit": False,
        "after_commit": "pending",
        "value": {"shipped": "desk"},
        "jobs": 1,
    }


def test_a_lent_connection_is_left_as_django_had_it(project_env: dict[str, str]) -> None:
    # A nested atomic block is a savepoint: its job rolls back with it alone.
    (seen,) = run_django(
        project_env,
        """
        from django.db import connection
        from django.db.models.functions import Floor
        hg = backend.headgate
        def handlers():
            return len(getattr(connection.connection, "_notice_handlers", ()))
        with transaction.atomic():
            order = Order.objects.create(item="lamp")
            kept = ship.enqueue(order.id)
            before = handlers()
            try:
                with transaction.atomic():
                    inner = ship.enqueue(order.id)
                    raise RuntimeError("the inner block fails")
            except RuntimeError:
                pass
            for _ in range(3):
                ship.enqueue(order.id)
            grown = handlers() - before
        floors = list(Order.objects.annotate(f=Floor("id")).values_list("f", flat=True))
        matched = Order.objects.filter(id__regex="^[0-9]+$").count()
        ids = {job.id for job in hg.jobs.list().jobs}
        print(json.dumps({
            "grown": grown, "floors": [int(f) for f in floors], "matched": matched,
            "kept": kept.id in ids, "inner": inner.id in ids, "jobs": len(ids),
        }))
        """,
    )
    assert seen == {
        "grown": 0,
        "floors": [1],
        "matched": 1,
        "kept": True,
        "inner": False,
        "jobs": 4,
    }


def test_a_block_that_reads_first_enqueues_while_the_store_writes_meanwhile(
    project_env: dict[str, str],
) -> None:
    (seen,) = run_django(
        project_env,
        """
        import threading, time
        hg = backend.headgate
        Order.objects.create(item="lamp")
        other = threading.Thread(target=lambda: hg.enqueue("elsewhere.kind"))
        with transaction.atomic():
            order = Order.objects.get(item="lamp")  # a read first
            other.start()  # the store writes, from another thread, meanwhile
            time.sleep(0.3)
            job = ship.enqueue(order.id)
        other.join(timeout=30)
        print(json.dumps(sorted(job.kind for job in hg.jobs.list().jobs)))
        """,
    )
    assert seen == ["elsewhere.kind", "tests.django_project.shop.tasks.ship"]


def test_a_store_in_another_database_is_written_at_the_commit(
    project_env: dict[str, str],
) -> None:
    (seen,) = run_django(
        project_env,
        """
        elsewhere = task_backends["elsewhere"]
        try:
            with transaction.atomic():
                dropped = note.enqueue("never")
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        with transaction.atomic():
            kept = note.enqueue("kept")
            during = [job.id for job in elsewhere.headgate.jobs.list().jobs]
        after = [job.id for job in elsewhere.headgate.jobs.list().jobs]
        elsewhere.headgate.drain(timeout=30)
        print(json.dumps({
            "during": during, "after": after == [kept.id],
            "dropped": dropped.id in after,
            "value": note.get_result(kept.id).return_value,
        }))
        """,
    )
    assert seen == {"during": [], "after": True, "dropped": False, "value": "KEPT"}


def test_a_store_in_another_database_checks_at_the_enqueue_and_spares_other_callbacks(
    project_env: dict[str, str],
) -> None:
    (seen,) = run_django(
        project_env,
        """
        from headgate import ValidationError
        elsewhere = task_backends["elsewhere"]
        with transaction.atomic():
            try:
                note.enqueue("x" * 2_000_000)
                refused = None
            except ValidationError as error:
                refused = error.field
        lost_at_commit = []
        with transaction.atomic():
            note.enqueue("lost")
            elsewhere.headgate.close()  # the store is gone by the commit
            transaction.on_commit(lambda: lost_at_commit.append("the host's own callback ran"))
        print(json.dumps({"refused": refused, "after": lost_at_commit}))
        """,
    )
    assert seen == {"refused": "payload", "after": ["the host's own callback ran"]}


def test_the_worker_command_runs_the_projects_tasks_until_sigterm(
    project_env: dict[str, str],
) -> None:
    run_django(project_env, "print('[]')")  # the tables
    worker = subprocess.Popen(
        [sys.executable, "-m", "django", "headgate_worker", "--queue", "emails=2"],
        cwd=ROOT,
        env=project_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        (result_id,) = run_django(project_env, 'print(json.dumps(mail.enqueue("bob").id))')
        deadline = time.monotonic() + 30
        while True:
            (status,) = run_django(
                project_env, f"print(json.dumps(mail.get_result({result_id!r}).status))"
            )
            if status == "SUCCESSFUL" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status == "SUCCESSFUL"
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
    output = worker.stdout.read() if worker.stdout else ""
    assert "worker running 3 task(s) of TASKS['default'] on emails" in output
    assert "Traceback" not in output


def test_a_backend_with_the_process_executor_runs_its_tasks_in_children(
    project_env: dict[str, str],
) -> None:
    (seen,) = run_django(
        project_env,
        """
        import os
        Order.objects.create(item="chair")
        result = count_orders.enqueue()
        task_backends["children"].headgate.drain(timeout=60)
        value = count_orders.get_result(result.id).return_value
        print(json.dumps({"orders": value["orders"], "in_a_child": value["pid"] != os.getpid()}))
        """,
    )
    assert seen == {"orders": 1, "in_a_child": True}


def test_bad_options_name_the_option(project_env: dict[str, str], tmp_path: Path) -> None:
    (seen,) = run_django(
        project_env,
        """
        from django.core.exceptions import ImproperlyConfigured
        from headgate.contrib.django import HeadgateBackend
        said = []
        for options in ({"max_atempts": 3}, {"max_attempts": 0}, {"executor": "fork"}):
            try:
                HeadgateBackend("bad" + str(len(said)), {"OPTIONS": options})
                said.append(None)
            except ImproperlyConfigured as error:
                said.append(str(error))
        print(json.dumps(said))
        """,
    )
    assert isinstance(seen, list)
    assert "unknown option 'max_atempts'" in seen[0]
    assert "max_attempts" in seen[1]
    assert "executor" in seen[2]


def test_a_store_that_cannot_open_with_its_database_is_warned_of_once(tmp_path: Path) -> None:
    """An in-memory SQLite database cannot hold a store other processes open:
    the warning comes at the first connection, not at every one Django opens
    (one per thread)."""
    env = project_environment("sqlite:///:memory:", tmp_path)
    code = """
        import django
        django.setup()
        import threading
        from django.db import connections
        for _ in range(3):  # a connection of its own per thread
            opening = threading.Thread(target=lambda: connections["default"].ensure_connection())
            opening.start()
            opening.join()
        """
    finished = run_python(env, textwrap.dedent(code))
    warned = [
        line
        for line in (finished.stdout + finished.stderr).splitlines()
        if "did not open with its database" in line
    ]
    assert sorted(line.split("backend=")[1].split()[0] for line in warned) == [
        "children",
        "default",
    ], warned
