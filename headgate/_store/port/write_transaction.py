"""One serialised write transaction's interface: the event log's part and the
reads each decision needs, in the same transaction. Its own module, so the
event log (which opens one) and the store (which holds the log) both import
it without importing each other."""

from __future__ import annotations

from headgate._store.port.admission import AdmissionFacts
from headgate._store.port.job_queue import JobQueue
from headgate._store.port.log_transaction import LogTransaction
from headgate._store.port.schedules import ScheduleLookups
from headgate._store.port.workers import WorkerRescue


class WriteTransaction(LogTransaction, ScheduleLookups, JobQueue, AdmissionFacts, WorkerRescue):
    """One serialised write transaction: read what a decision needs, then append.

    No other writer (in this process or any other) commits between its
    reads and its commit, so what it reads stays true until it commits.
    Appends become visible to its own reads at once; everything commits
    when the `EventLog.write` block exits cleanly, and nothing does if it
    raises.
    """
