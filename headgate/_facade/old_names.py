"""Headgate's names before its namespaces, each now the name it says
(see `headgate._deprecated`); they go in the next minor version. The table of
CHANGELOG.md's "Upgrading" entry, and of the test of every old name."""

from __future__ import annotations

from typing import Final

from headgate._core import Core
from headgate._deprecated import Deprecated, DeprecatedProperty, DeprecatedStatic
from headgate._facade.jobs import Jobs
from headgate._facade.limits import Limits
from headgate._facade.metrics import Metrics
from headgate._facade.quarantine import Quarantine
from headgate._facade.queues import Queues
from headgate._facade.rates import Rates
from headgate._facade.runtime import Runtime
from headgate._facade.schedules import Schedules
from headgate._metrics import Collector, CollectorRegistry
from headgate._operator import Operator, operator_of

INTERNAL = "nothing public: it serves Headgate's own surfaces (web, CLI, Django) alone"
CALLED_NAMESPACES: Final = {
    "queues": ("queues()", "list"),
    "limits": ("limits()", "list"),
    "quarantine": ("quarantine()", "add"),
}
"""Old methods whose name is a namespace now: the namespace, called, does what
they did (warning), by namespace: (the old call, the method it calls)."""


class OldNames:
    """The old names, mixed into Headgate."""

    # hg.schedules
    put_schedule = Deprecated(Schedules.put, via="schedules")
    put_schedules = Deprecated(Schedules.put_many, via="schedules")
    update_schedule = Deprecated(Schedules.update, via="schedules")
    clear_overrides = Deprecated(Schedules.clear_overrides, via="schedules")
    get_schedule = Deprecated(Schedules.get, via="schedules")
    deleted_schedule = Deprecated(Schedules.deleted, via="schedules")
    upcoming = Deprecated(Schedules.upcoming, via="schedules")
    list_schedules = Deprecated(Schedules.list, via="schedules")
    schedule_runs = Deprecated(Schedules.runs, via="schedules")
    manual_runs = Deprecated(Schedules.manual_runs, via="schedules")
    schedule_health = Deprecated(Schedules.health, via="schedules")
    schedules_health = Deprecated(Schedules.health_of, via="schedules")
    pause_schedule = Deprecated(Schedules.pause, via="schedules")
    resume_schedule = Deprecated(Schedules.resume, via="schedules")
    delete_schedule = Deprecated(Schedules.delete, via="schedules")
    run_now = Deprecated(Schedules.enqueue_now, via="schedules")
    schedule_as_of = Deprecated(Schedules.as_of, via="schedules")
    schedule_changes = Deprecated(Schedules.changes, via="schedules")
    enqueue_events = Deprecated(Schedules.enqueue_events, via="schedules")
    on_schedule_failure = Deprecated(Schedules.on_failure, via="schedules")
    on_schedule_recovery = Deprecated(Schedules.on_recovery, via="schedules")
    aput_schedule = Deprecated(Schedules.aput, via="schedules")
    aput_schedules = Deprecated(Schedules.aput_many, via="schedules")
    aupdate_schedule = Deprecated(Schedules.aupdate, via="schedules")
    apause_schedule = Deprecated(Schedules.apause, via="schedules")
    aresume_schedule = Deprecated(Schedules.aresume, via="schedules")
    adelete_schedule = Deprecated(Schedules.adelete, via="schedules")
    arun_now = Deprecated(Schedules.aenqueue_now, via="schedules")
    aget_schedule = Deprecated(Schedules.aget, via="schedules")
    aschedule_runs = Deprecated(Schedules.aruns, via="schedules")
    aschedule_health = Deprecated(Schedules.ahealth, via="schedules")
    aenqueue_events = Deprecated(Schedules.aenqueue_events, via="schedules")
    alist_schedules = Deprecated(Schedules.alist, via="schedules")
    # hg.jobs
    get_job = Deprecated(Jobs.get, via="jobs")
    job_as_of = Deprecated(Jobs.as_of, via="jobs")
    list_jobs = Deprecated(Jobs.list, via="jobs")
    count_jobs = Deprecated(Jobs.count, via="jobs")
    latest_attempts = Deprecated(Jobs.latest_attempts, via="jobs")
    waiting_for = Deprecated(Jobs.waiting_for, via="jobs")
    cancel_job = Deprecated(Jobs.cancel, via="jobs")
    retry_job = Deprecated(Jobs.retry, via="jobs")
    retry_jobs = Deprecated(Jobs.retry_many, via="jobs")
    cancel_jobs = Deprecated(Jobs.cancel_many, via="jobs")
    aget_job = Deprecated(Jobs.aget, via="jobs")
    alist_jobs = Deprecated(Jobs.alist, via="jobs")
    acount_jobs = Deprecated(Jobs.acount, via="jobs")
    acancel_job = Deprecated(Jobs.acancel, via="jobs")
    aretry_job = Deprecated(Jobs.aretry, via="jobs")
    aretry_jobs = Deprecated(Jobs.aretry_many, via="jobs")
    acancel_jobs = Deprecated(Jobs.acancel_many, via="jobs")
    # hg.queues
    pause_queue = Deprecated(Queues.pause, via="queues")
    resume_queue = Deprecated(Queues.resume, via="queues")
    # hg.limits
    set_limit = Deprecated(Limits.set, via="limits")
    clear_limit = Deprecated(Limits.clear, via="limits")
    # hg.rates
    set_rate_limit = Deprecated(Rates.set, via="rates")
    clear_rate_limit = Deprecated(Rates.clear, via="rates")
    rate_limits = Deprecated(Rates.list, via="rates")
    # hg.quarantine
    release = Deprecated(Quarantine.release, via="quarantine")
    list_quarantine = Deprecated(Quarantine.list, via="quarantine")
    quarantine_entry = Deprecated(Quarantine.get, via="quarantine")
    # hg.metrics
    activity = Deprecated(Metrics.activity, via="metrics")
    # hg.runtime
    workers = Deprecated(Runtime.workers, via="runtime")
    lease_status = Deprecated(Runtime.lease, via="runtime")
    scheduler_health = Deprecated(Runtime.scheduler_health, via="runtime")
    unserved = Deprecated(Runtime.unserved, via="runtime")
    declared_handlers = Deprecated(Runtime.declared_handlers, via="runtime")
    readiness = Deprecated(Runtime.readiness, via="runtime")
    compact = Deprecated(Runtime.compact, via="runtime")
    fingerprint = DeprecatedStatic(Quarantine.fingerprint, instead="hg.quarantine.fingerprint")
    metrics_registry = DeprecatedProperty[CollectorRegistry]("metrics", "registry")
    metrics_collector = DeprecatedProperty[Collector]("metrics", "collector")
    # what only Headgate's own surfaces call
    put_definition = Deprecated(Operator.put_definition, via=operator_of, instead=INTERNAL)
    update_schedule_fields = Deprecated(
        Operator.update_schedule_fields, via=operator_of, instead=INTERNAL
    )
    count_schedules = Deprecated(Operator.count_schedules, via=operator_of, instead=INTERNAL)
    enqueue_job = Deprecated(Operator.enqueue_job, via=operator_of, instead=INTERNAL)
    check_job = Deprecated(Operator.check_job, via=operator_of, instead=INTERNAL)
    enqueue_new_jobs = Deprecated(Operator.enqueue_new_jobs, via=operator_of, instead=INTERNAL)
    job_limits = Deprecated(Operator.job_settings, via=operator_of, instead=INTERNAL)
    queue_status = Deprecated(Operator.queue_status, via=operator_of, instead=INTERNAL)
    revoke_session = Deprecated(Operator.revoke_session, via=operator_of, instead=INTERNAL)
    session_revoked = Deprecated(Operator.session_revoked, via=operator_of, instead=INTERNAL)
    give_back_running_jobs_now = Deprecated(
        Operator.give_back_running_jobs_now, via=operator_of, instead=INTERNAL
    )
    # what only tests call
    finish_job = Deprecated(
        Core.finish_job, via="_core", instead="headgate.testing.finish_job(hg, job_id, state)"
    )
    roll_up_activity = Deprecated(
        Core.roll_up_activity, via="_core", instead="headgate.testing.roll_up_activity(hg)"
    )
    after_fork_in_child = Deprecated(
        Core.after_fork_in_child,
        via="_core",
        instead="nothing: a Headgate renews itself in a forked child",
    )
