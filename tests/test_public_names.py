"""What users see of Headgate's names: a public module's namespace holds its
surface and nothing it merely imports, every error Headgate raises at them is
exported by the package, and a failed attempt records an error by the name
users import it by (`headgate.InvalidResult`), never an internal module path."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType

import pytest

import headgate
import headgate._serving
import headgate.cli
import headgate.ops
import headgate.web
from headgate import Headgate, HeadgateError, JobContext, ValidationError
from headgate._domain.job_rules import InvalidResult, error_record
from headgate._runtime.hook_runner import HooksInterrupted

INTERNAL_ERRORS = {
    "CannotListen": "raised by `headgate serve` alone, to the command line, which shows its message",
}
"""Headgate errors the package does not export, each with the reason no user meets it."""


@pytest.mark.parametrize("name", ["headgate", "headgate.testing", "headgate.cli"])
def test_a_public_modules_namespace_is_its_surface(name: str) -> None:
    """`dir(headgate.testing)` showed `annotations` and `threading`."""
    module = importlib.import_module(name)
    shown = {
        attribute
        for attribute, value in vars(module).items()
        if not attribute.startswith("_") and not isinstance(value, ModuleType)
    }
    assert shown == set(module.__all__)


def _subclasses(kind: type[BaseException]) -> Iterator[type[BaseException]]:
    for each in kind.__subclasses__():
        yield each
        yield from _subclasses(each)


def test_every_error_headgate_raises_at_users_is_exported() -> None:
    raised_at_users = {
        *_subclasses(HeadgateError),
        headgate.InvalidSpec,
        InvalidResult,
        headgate.Snooze,
        headgate.SnoozeLimitExceeded,
    }
    unexported = {
        kind.__qualname__
        for kind in raised_at_users
        if kind.__module__.startswith("headgate")
        and getattr(headgate, kind.__qualname__, None) is not kind
    }
    assert unexported == set(INTERNAL_ERRORS)


class PaymentDeclined(Exception):
    """A host's own error."""


@pytest.mark.parametrize(
    ("error", "recorded"),
    [
        (ValueError("x"), "ValueError"),
        (ValidationError("queue", "x"), "headgate.ValidationError"),
        (InvalidResult("x"), "headgate.InvalidResult"),
        (headgate.SnoozeLimitExceeded("x"), "headgate.SnoozeLimitExceeded"),
        (headgate.StoreUnavailable("x"), "headgate.StoreUnavailable"),
        (PaymentDeclined("x"), f"{__name__}.PaymentDeclined"),
        (HooksInterrupted(), "headgate._runtime.hook_runner.HooksInterrupted"),  # not exported
    ],
)
def test_an_error_is_recorded_by_its_public_name(error: BaseException, recorded: str) -> None:
    assert error_record(error).error_type == recorded


def test_a_failed_attempt_shows_its_error_by_its_public_name(store_url: str) -> None:
    with Headgate(store_url) as hg:

        @hg.handler("returns.a.set", max_attempts=1)
        def returns_a_set(job: JobContext) -> object:
            return {1, 2}  # not JSON: the attempt fails with InvalidResult

        @hg.handler("declines", max_attempts=1)
        def declines(job: JobContext) -> None:
            raise PaymentDeclined("card expired")

        bad_result = hg.enqueue("returns.a.set")
        declined = hg.enqueue("declines")
        hg.drain()
        shown = {
            job.kind: hg.jobs.get(job.id).attempt_history[0].error_type
            for job in (bad_result, declined)
        }
    assert shown == {
        "returns.a.set": "headgate.InvalidResult",
        "declines": f"{__name__}.PaymentDeclined",
    }
