"""Periodic tasks started by Celery beat: entry points, like views.

They sit above the services (a scheduled capture is a whole-job capture like one a
user asks for), so they are not in `tasks`, which services reach through `enqueue`.
Their names stay `profiles.tasks.*`, the names beat schedules.
"""

from celery import shared_task
from django.conf import settings

from profiles.captures import redelivery, services
from profiles.jobs import report as group_report
from profiles.jobs import services as jobs


@shared_task(name="profiles.tasks.reap_lost_captures")
def reap_lost_captures() -> int:
    """Fail captures whose worker is gone; re-send (or fail) ones whose message is;
    store the job reports that two ranks ending at once both missed."""
    timeout_s = settings.FLAMEDECK_HEARTBEAT_TIMEOUT_S
    lost = services.reap_lost_captures(timeout_s=timeout_s)
    lost += redelivery.captures_resend_lost(timeout_s=timeout_s)
    group_report.group_reports_catch_up()
    return lost


@shared_task(name="profiles.tasks.schedule_captures")
def schedule_captures() -> int:
    return len(jobs.scheduled_captures_due())


@shared_task(name="profiles.tasks.prune_raw_files")
def prune_raw_files() -> int:
    budget = settings.FLAMEDECK_RAW_BUDGET_MB * 1024 * 1024
    return jobs.raw_prune(budget_bytes=budget)["pruned"]
