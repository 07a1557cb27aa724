"""Every exception type Headgate defines crosses a process boundary intact: a
handler run with `executor="process"` raises it in its child, and the worker
gets it back by pickle with its class, message and attributes (a Snooze whose
`seconds` were lost failed its attempt instead of snoozing it)."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

import pytest

import headgate
from headgate import ConcurrencyConflict, DuplicateJob, Snooze, TickHasJob, ValidationError
from headgate._errors import AdmissionRejected, DuplicateTickJobs, JobFailed
from headgate._runtime.task_calls import ArgumentsRefused
from headgate._server_extra import ServerExtraMissing

SAMPLES: dict[type[BaseException], BaseException] = {
    Snooze: Snooze(0.25),
    ValidationError: ValidationError("priority", "must be an integer"),
    ConcurrencyConflict: ConcurrencyConflict("job-1", 3, 4),
    AdmissionRejected: AdmissionRejected("queue_full", "queue 'default' holds 10 jobs"),
    DuplicateJob: DuplicateJob("daily", "job-9"),
    TickHasJob: TickHasJob("nightly", 1_700_000_000_000, "job-7", "tick:nightly"),
    DuplicateTickJobs: DuplicateTickJobs("two jobs", [("nightly", 1, ["a", "b"])]),
    JobFailed: JobFailed("job-3", "failed", "ValueError", "no", "Traceback ..."),
    ArgumentsRefused: ArgumentsRefused("when", "is required"),
    ServerExtraMissing: ServerExtraMissing("fastapi", "headgate serve"),
}


def defined_exception_types() -> list[type[BaseException]]:
    """Every exception class defined in Headgate's own modules (Django's adapter
    and the migrations aside: neither raises into a handler)."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(headgate.__path__, "headgate."):
        name = module_info.name
        if name == "headgate.__main__" or name.startswith(
            ("headgate.contrib", "headgate._store.sql.migrations")
        ):
            continue
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.startswith("headgate")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[key] for key in sorted(found)]


def sample_of(kind: type[BaseException]) -> BaseException:
    if kind in SAMPLES:
        return SAMPLES[kind]
    own_init = [
        base
        for base in kind.__mro__
        if base.__module__.startswith("headgate") and "__init__" in vars(base)
    ]
    assert not own_init, f"{kind.__qualname__} has an __init__ of its own: add a sample to SAMPLES"
    return kind("what went wrong")


@pytest.mark.parametrize("kind", defined_exception_types(), ids=lambda kind: kind.__qualname__)
def test_each_exception_type_is_the_same_after_pickling(kind: type[BaseException]) -> None:
    raised = sample_of(kind)
    back = pickle.loads(pickle.dumps(raised))
    assert type(back) is type(raised)
    assert str(back) == str(raised)
    assert back.args == raised.args
    assert vars(back) == vars(raised)


def test_a_snooze_keeps_its_delay() -> None:
    back = pickle.loads(pickle.dumps(Snooze(0.1)))
    assert isinstance(back, Snooze)
    assert (back.seconds, back.delay_ms) == (0.1, 100)
