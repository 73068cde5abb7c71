"""Celery tasks of the regression watches: thin, load by id and call one function.

`judge_capture` runs on the analysis queue (it reads two stats dicts and runs the
series' permutation test: CPU); `deliver_message` on the default queue (it waits on a
remote service). Routing: CELERY_TASK_ROUTES in config/settings.py.
"""

import logging

from celery import shared_task

from profiles.captures import broker
from profiles.captures.tasks import backoff_s
from profiles.watches import judging as watch_judging
from profiles.watches import messages as watch_messages

log = logging.getLogger(__name__)


# Bounded work (rows are capped, the series has at most 60 captures and 19,999
# permutations a share), so a generous fixed limit.
@shared_task(name="profiles.watch_tasks.judge_capture", soft_time_limit=120, time_limit=150)
def judge_capture(capture_id: int) -> int:
    """Judge a done capture against the watches of its rank; send what it opened."""
    deliveries = watch_judging.capture_judge(capture_id=capture_id)
    for delivery_id in deliveries:
        try:
            broker.send(deliver_message, args=[delivery_id])
        except broker.QueueUnavailable as exc:
            log.warning("delivery %s stays pending: %s", delivery_id, exc)
    return len(deliveries)


# Not acks_late: a message is claimed on its row, and a redelivered task must not send
# it twice; a worker lost mid-send leaves it "sending" (at most once, never twice).
@shared_task(bind=True, acks_late=False, name="profiles.watch_tasks.deliver_message")
def deliver_message(self, delivery_id: int) -> str:
    outcome = watch_messages.delivery_send(delivery_id=delivery_id)
    if outcome.retry:
        raise self.retry(countdown=backoff_s(outcome.attempts - 1), max_retries=None)
    return outcome.status
