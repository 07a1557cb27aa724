"""The Headgate of myservice: its handlers and schedules, imported by every role
(`headgate worker --app myservice.jobs:hg`, `headgate serve --app ...`). Keep the
top level free of side effects beyond building `hg`: children of
executor="process" handlers import this module too."""

import os

from headgate import Headgate, JobContext

hg = Headgate(os.environ["HEADGATE_DB"])  # postgresql://user@host/db, from a secret


@hg.handler("email.send", timeout_s=20, max_attempts=5)
def send(job: JobContext) -> None:
    print("sending to", job.payload["to"])


@hg.periodic("nightly-report", spec="CRON_TZ=Europe/Paris 0 6 * * *", on_missed="run_once")
def nightly(job: JobContext) -> None:
    print("report for", job.periodic_origin)
