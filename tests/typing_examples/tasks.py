"""A user's typed code against task objects: what mypy --strict accepts, and the
mistakes it must reject (each line marked `# rejected: <mypy error code>`),
checked by tests/test_typing.py."""

from __future__ import annotations

from datetime import UTC, datetime

from headgate import Headgate, JobContext, JobHandle

hg = Headgate("memory://")


@hg.task("email.send")
def send(job: JobContext, to: str, when: datetime, *, cc: str = "") -> dict[str, str]:
    return {"sent": to, "attempt": str(job.attempt)}


@hg.task("report.build")
async def build(month: str) -> int:
    return len(month)


now = datetime.now(UTC)
handle: JobHandle[dict[str, str]] = send.enqueue("ada@example.com", now, cc="bob@example.com")
sent: dict[str, str] = handle.wait(timeout=5)
rows: int = build.configure(priority=5).enqueue("2026-11").wait()
called: dict[str, str] = send(JobContext("id", "k", "q", {}, 1, 1, 0, None, 0), "a", now)

send.enqueue("ada@example.com")  # rejected: call-arg
send.enqueue("ada@example.com", "tomorrow")  # rejected: arg-type
send.enqueue("ada@example.com", now, bcc="x")  # rejected: call-arg
build.enqueue(month=11)  # rejected: arg-type
build.configure(prority=5)  # rejected: call-arg
wrong: str = build.enqueue("2026-11").wait()  # rejected: assignment
