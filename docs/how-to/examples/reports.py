import os

from headgate import Headgate, JobContext, Retry

hg = Headgate("sqlite:///reports.db")


@hg.handler("report.crunch", executor="process", timeout_s=2, retry=Retry(intervals_s=(0,)))
def crunch(job: JobContext) -> dict[str, int]:
    if job.attempt == 1:
        while True:  # stuck, and deaf to job.cancelled: its child is killed at the timeout
            pass
    return {"total": sum(range(job.payload["n"])), "in_a_child": os.getpid() != job.payload["host"]}


if __name__ == "__main__":
    job = hg.enqueue("report.crunch", {"n": 1000, "host": os.getpid()})
    hg.drain()
    done = hg.jobs.get(job.id)
    print(done.state, done.result, [attempt.outcome for attempt in done.attempt_history])
    hg.close()
