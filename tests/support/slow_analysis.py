"""A Celery app module for tests: config.celery's app, with some analyses made slow.

`celery -A tests.support.slow_analysis worker` runs the real tasks, but a samples
file whose first line is `# slow` is read only after FLAMEDECK_TEST_SLOW_READ_S
seconds (default 20) in the pool's processes, so a test can show what happens when
an analysis lasts longer than the heartbeat timeout while other work goes on.
"""

import gzip
import os
import time

from celery.signals import worker_process_init

from config.celery import app  # noqa: F401 — the app this module stands for

MARK = b"# slow"
SLOW_READ_STARTED = "slow analysis: read started"


def _marked(path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rb") as fh:
        return fh.read(len(MARK)) == MARK


@worker_process_init.connect
def _slow_reads(**kwargs) -> None:
    from profiles import pyspy

    delay = float(os.environ.get("FLAMEDECK_TEST_SLOW_READ_S", "20"))
    read = pyspy.read_profile

    def slow_read(path):
        if _marked(path):
            print(SLOW_READ_STARTED, flush=True)  # to the worker's log: one per analysis
            time.sleep(delay)
        return read(path)

    pyspy.read_profile = slow_read
