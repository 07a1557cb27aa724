"""Identities: deterministic where a retry must find the same thing again."""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
import uuid
from typing import Final

_NAMESPACE: Final = uuid.UUID("5d0c5f0e-7a53-4f5e-9a0e-68656164676a")
_NAMESPACE_SHA1: Final = hashlib.sha1(_NAMESPACE.bytes, usedforsecurity=False)


def tick_job_id(schedule_id: str, tick_ms: int) -> str:
    """The one job id a (schedule, tick) can produce.

    A UUID (version 8: a layout of our own) whose first 48 bits are the tick's
    epoch milliseconds and whose other bits are a SHA-1 of the schedule and the
    tick. Ids sort by tick, so the jobs of one instant sit side by side in every
    index that holds them (the jobs key, the job streams) instead of each
    landing on a random page: on a store with a long history that halved what
    SQLite writes per tick. Operators find a job's origin through its typed
    periodic_origin, never by parsing the id.

    Earlier builds derived a UUIDv5 of the same name. Mixing the two is safe:
    only a failed attempt leaves its tick to be attempted again, and a failed
    attempt never made a job (the job, its record and the advance commit
    together). A failed tick retried across the upgrade shows the old id in
    its failed records and the new one once it succeeds; and a pending job
    holds the tick's unique key whatever its id.
    """
    sha1 = _NAMESPACE_SHA1.copy()
    sha1.update(f"tick\x00{schedule_id}\x00{tick_ms}".encode())
    layout = bytearray(tick_ms.to_bytes(6, "big") + sha1.digest()[:10])
    layout[6] = (layout[6] & 0x0F) | 0x80  # version 8
    layout[8] = (layout[8] & 0x3F) | 0x80  # the RFC 4122 variant
    return _as_uuid_text(layout)


def _uuid5(name: str) -> str:
    """str(uuid.uuid5(_NAMESPACE, name)), without re-hashing the namespace or
    building a UUID object: this runs for every tick."""
    sha1 = _NAMESPACE_SHA1.copy()
    sha1.update(name.encode())
    digest = bytearray(sha1.digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    return _as_uuid_text(digest)


def _as_uuid_text(layout: bytearray) -> str:
    text = layout.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def tick_unique_key(schedule_id: str, tick_ms: int) -> str:
    return f"periodic:{schedule_id}:{tick_ms}"


def manual_job_id(schedule_id: str, idempotency_key: str) -> str:
    return _uuid5(f"manual\x00{schedule_id}\x00{idempotency_key}")


def new_job_id() -> str:
    """A new job's id: a UUID version 7 (RFC 9562), its first 48 bits the epoch
    milliseconds and the next 12 a counter within the millisecond, the rest
    random. So ids made in this process sort in the order they were made: jobs
    due at the same instant (a bulk enqueue's) are claimed in the order given,
    and new jobs land side by side in the indexes keyed by id."""
    (job_id,) = new_job_ids(1)
    return job_id


def new_job_ids(count: int) -> list[str]:
    """`count` new job ids, in the order they sort (`new_job_id`), made at once."""
    global _last_ms, _counter  # noqa: PLW0603 (the generator's state, behind its lock)
    stamps: list[tuple[int, int]] = []
    with _ID_LOCK:
        now_ms = time.time_ns() // 1_000_000
        if now_ms > _last_ms:
            _last_ms, _counter = now_ms, -1
        for _ in range(count):
            _counter += 1
            if _counter > _COUNTER_MAX:  # 4,096 in one millisecond: borrow the next
                _last_ms, _counter = _last_ms + 1, 0
            stamps.append((_last_ms, _counter))
    ids = []
    for stamp, counter in stamps:
        value = (stamp & _MS_MASK) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62
        digits = f"{value | secrets.randbits(62):032x}"
        ids.append(f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}")
    return ids


_ID_LOCK: Final = threading.Lock()
_COUNTER_MAX: Final = 0xFFF
_MS_MASK: Final = (1 << 48) - 1
_last_ms = 0
_counter = 0


def fingerprint_of_text(kind: str, canonical_payload: str) -> str:
    """What quarantine matches on: the job's kind and exact payload, given as its
    canonical JSON text (what `require_payload` returns and the store holds)."""
    digest = hashlib.sha256(f"{kind}\x00{canonical_payload}".encode())
    return digest.hexdigest()[:32]


def job_id_problem(value: object) -> str | None:
    """The rule a job id chosen beforehand breaks (it is `new_job_id`'s form), or None."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        return f"must be a UUID (as new_job_id makes), got {value!r}"
    if str(parsed) != value:
        return f"must be a UUID in its canonical form {str(parsed)!r}"
    return None
