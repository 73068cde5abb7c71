"""Celery task of a whole-job capture or dump: one per host, on the capture queue.

Named `profiles.tasks.run_host_captures` (its name before profiles was arranged in
packages), like the capture tasks in profiles.captures.tasks.
"""

from celery import shared_task

from profiles.captures.enqueue import analysis_enqueue
from profiles.jobs import pipeline as group_pipeline


# One per host of a whole-job capture; not retried: a later try would sample another
# window than the other hosts, so a host that fails fails its ranks with the cause.
@shared_task(acks_late=False, name="profiles.tasks.run_host_captures")
def run_host_captures(group_id: int, host_id: int, capture_ids: list[int]) -> list[int]:
    parsing = group_pipeline.host_captures_execute(
        group_id=group_id, host_id=host_id, capture_ids=capture_ids
    )
    for capture_id in parsing:
        analysis_enqueue(capture_id=capture_id)
    return parsing
