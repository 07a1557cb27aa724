"""Task objects against enqueue by kind, and the cost of the argument encoding.

1. One enqueue on an idle store (no worker), on memory, SQLite and PostgreSQL:
   `send.enqueue(to, template)` (a task: its call bound to the signature and
   encoded) against `hg.enqueue("email.plain", {"to": ..., "template": ...})`
   (a handler of the JobContext: the payload as given), the same two fields,
   calls alternated one by one so both see the same machine. Target (issue
   40): the task's p50 at most 10% above enqueue's.
2. A payload of 20 mixed fields (datetimes, dates, UUIDs, Decimals, Enums, a
   dataclass, a list, strings and numbers): encoding a call of it (bind and
   encode, what enqueue adds) and decoding it for the function (what a worker
   adds), against the canonical JSON text of the encoded payload (what every
   enqueue writes anyway), best of 5 runs of N each.

Run: python -m benchmarks.tasks [--backend memory|sqlite|postgresql] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import statistics
import time
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from benchmarks._common import fresh_database, print_table
from benchmarks.scheduler import quiet_json_logs
from headgate import Headgate, JobContext
from headgate._json import canonical_json
from headgate._runtime.task_calls import TaskSignature

TO = "ada@example.com"
TEMPLATE = "welcome"


def _alternated(
    first: Callable[[], object], second: Callable[[], object], count: int
) -> tuple[list[float], list[float]]:
    for _ in range(20):  # warm: connections, prepared statements, caches
        first()
        second()
    samples: tuple[list[float], list[float]] = ([], [])
    for index in range(count * 2):
        call, into = (first, samples[0]) if index % 2 == 0 else (second, samples[1])
        began = time.perf_counter()
        call()
        into.append((time.perf_counter() - began) * 1000)
    return samples


def enqueue_row(backend: str, count: int) -> list[str]:
    database = fresh_database(backend) if backend != "memory" else nullcontext("memory://")
    with database as url, Headgate(url) as hg:

        @hg.task("email.send")
        def send(to: str, template: str) -> None:
            """Never runs: no worker."""

        @hg.handler("email.plain")
        def plain(job: JobContext) -> None:
            """Never runs: no worker."""

        tasks, kinds = _alternated(
            lambda: send.enqueue(TO, TEMPLATE),
            lambda: hg.enqueue("email.plain", {"to": TO, "template": TEMPLATE}),
            count,
        )
    task_p50, kind_p50 = statistics.median(tasks), statistics.median(kinds)
    return [
        backend,
        f"{task_p50:.3f}",
        f"{kind_p50:.3f}",
        f"{task_p50 / kind_p50:.3f}",
        "<= 1.10",
    ]


class Plan(enum.Enum):
    FREE = "free"
    PRO = "pro"


@dataclasses.dataclass(frozen=True)
class Address:
    street: str
    city: str
    postcode: str


def twenty(
    *,
    id: uuid.UUID,
    account: uuid.UUID,
    created: datetime,
    renews: datetime,
    trial_ends: date,
    birthday: date,
    amount: Decimal,
    tax: Decimal,
    discount: Decimal,
    plan: Plan,
    previous_plan: Plan,
    address: Address,
    tags: list[str],
    name: str,
    email: str,
    locale: str,
    seats: int,
    score: float,
    active: bool,
    note: str | None,
) -> None:
    """A call of 20 fields of every sort the encoding takes."""


ARGUMENTS: dict[str, Any] = {
    "id": uuid.uuid4(),
    "account": uuid.uuid4(),
    "created": datetime(2026, 12, 5, 9, 30, tzinfo=UTC),
    "renews": datetime(2027, 12, 5, 9, 30, tzinfo=UTC),
    "trial_ends": date(2026, 12, 19),
    "birthday": date(1815, 12, 10),
    "amount": Decimal("49.00"),
    "tax": Decimal("9.80"),
    "discount": Decimal("0.15"),
    "plan": Plan.PRO,
    "previous_plan": Plan.FREE,
    "address": Address("12 Rue de Rivoli", "Paris", "75004"),
    "tags": ["beta", "eu", "annual"],
    "name": "Ada Lovelace",
    "email": TO,
    "locale": "en-GB",
    "seats": 12,
    "score": 0.87,
    "active": True,
    "note": None,
}


def _best_us(call: Callable[[], object], count: int) -> float:
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter()
        for _ in range(count):
            call()
        best = min(best, (time.perf_counter() - began) / count * 1e6)
    return best


def encoding_rows(count: int) -> list[list[str]]:
    signature = TaskSignature.of(twenty)
    payload = signature.payload((), ARGUMENTS)
    context = JobContext("id", "twenty", "default", payload, 1, 1, 0, None, 0)
    text_us = _best_us(lambda: canonical_json(payload), count)
    encode_us = _best_us(lambda: signature.payload((), ARGUMENTS), count)
    decode_us = _best_us(lambda: signature.call_with(payload, context), count)
    args, kwargs = signature.call_with(payload, context)
    assert dict(zip(signature.arguments.parameters, args, strict=False), **kwargs) == ARGUMENTS
    return [
        ["canonical JSON text (every enqueue)", f"{text_us:.1f}", "1.0"],
        ["encode: bind + tag (enqueue adds)", f"{encode_us:.1f}", f"{encode_us / text_us:.1f}"],
        ["decode for the function (worker adds)", f"{decode_us:.1f}", f"{decode_us / text_us:.1f}"],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["memory", "sqlite", "postgresql"], action="append")
    parser.add_argument("--quick", action="store_true", help="fewer calls, for a smoke run")
    args = parser.parse_args()
    quiet_json_logs()
    count = 200 if args.quick else 2_000
    backends = args.backend or ["memory", "sqlite", "postgresql"]
    print_table(
        f"One enqueue on an idle store, {count:,} calls each, alternated (ms)",
        ["backend", "task p50", "enqueue p50", "task/enqueue", "target"],
        [enqueue_row(backend, count) for backend in backends],
    )
    runs = 2_000 if args.quick else 20_000
    print_table(
        f"A call of 20 mixed fields, best of 5 x {runs:,} (us per call)",
        ["step", "us", "x JSON text"],
        encoding_rows(runs),
    )


if __name__ == "__main__":
    main()
