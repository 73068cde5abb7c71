"""Periodic tasks started by Celery beat: entry points, like views.

They sit above the services (a scheduled capture is a whole-job capture like one a
user asks for), so they are not in `tasks`, which services reach through `enqueue`.
Their names stay `profiles.tasks.*`, the names beat schedules.
"""

import logging
from collections.abc import Callable
from contextlib import nullcontext

from celery import shared_task
from django.conf import settings
from django.db import connection, transaction

from profiles.captures import redelivery, services
from profiles.jobs import report as group_report
from profiles.jobs import services as jobs

log = logging.getLogger(__name__)


@shared_task(name="profiles.tasks.reap_lost_captures")
def reap_lost_captures() -> int:
    """Fail captures whose worker is gone; re-send (or fail) ones whose message is;
    store the job reports that two ranks ending at once both missed.

    Each step on its own: one that raises (the database, say) is logged with its cause
    and counts nothing, the later steps still run, and the task itself succeeds (it
    runs again in 30 s)."""
    timeout_s = settings.FLAMEDECK_HEARTBEAT_TIMEOUT_S
    lost = _step("reap lost captures", lambda: services.reap_lost_captures(timeout_s=timeout_s))
    lost += _step(
        "re-send lost captures", lambda: redelivery.captures_resend_lost(timeout_s=timeout_s)
    )
    _step("report catch-up", group_report.group_reports_catch_up)
    return lost


def _step(name: str, run: Callable[[], int]) -> int:
    """Run one step of a periodic task; its failure is logged, never raised.

    Inside a transaction already (a caller's, or a test's) the step gets a savepoint,
    so a database error it meets is rolled back with it and the next step's queries
    still run; in autocommit, as under Celery, nothing is wrapped."""
    try:
        with transaction.atomic() if connection.in_atomic_block else nullcontext():
            return run() or 0
    except Exception as exc:
        log.exception("periodic step %r failed (%s: %s)", name, type(exc).__name__, exc)
        return 0


@shared_task(name="profiles.tasks.schedule_captures")
def schedule_captures() -> int:
    return len(jobs.scheduled_captures_due())


@shared_task(name="profiles.tasks.prune_raw_files")
def prune_raw_files() -> int:
    budget = settings.FLAMEDECK_RAW_BUDGET_MB * 1024 * 1024
    return jobs.raw_prune(budget_bytes=budget)["pruned"]
