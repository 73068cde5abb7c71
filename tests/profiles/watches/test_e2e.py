"""Watches end to end with real parts: a capture analysed by a real Celery worker is
judged there, and its message reaches a real HTTP server on 127.0.0.1 (Apprise's
json:// webhook) from the worker, with retries against a flaky receiver."""

import random
import time

import pytest

from profiles.captures import enqueue
from profiles.models import Capture
from profiles.storage.files import capture_store_outputs
from profiles.watches.models import Delivery, Judgement
from tests import factories
from tests.support import watch_sim
from tests.support.webhook import Receiver
from tests.support.worker import WorkerProcess

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
SAMPLES = 3000


@pytest.fixture
def worker(tmp_path, transactional_db):
    process = WorkerProcess(
        tmp_path / "worker.log",
        concurrency=4,
        analysis_concurrency=1,
        env={"FLAMEDECK_RETRY_BACKOFF_S": "0"},
    )
    yield process
    process.stop()


def raw_text(dist, seed):
    counts = watch_sim.sample(dist, SAMPLES, random.Random(seed))
    return "\n".join(f"{stack} {n}" for stack, n in counts.items()).encode()


def wait_for(check, timeout_s=90.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError("timed out")


@pytest.fixture
def setup(worker):
    """A watched rank whose baseline is an analysed real-stack capture; returns a
    function that hands a new capture of the rank to the worker for analysis."""
    base = watch_sim.base_distribution()
    rank = factories.process(factories.run(), "rank-0")
    baseline = factories.capture(
        rank, watch_sim.stats_of(watch_sim.sample(base, SAMPLES, random.Random(1))), minutes_ago=10
    )

    def submit(dist, seed):
        capture = factories.capture(rank, None, status=Capture.Status.PARSING)
        capture_store_outputs(capture=capture, raw=raw_text(dist, seed), log=None)
        enqueue.analysis_enqueue(capture_id=capture.pk)
        return capture

    return base, baseline, submit


def watch_to(receiver, baseline):
    return factories.watch(baseline, targets=[factories.target(url=receiver.url())])


def test_an_unchanged_capture_sends_nothing(setup):
    base, baseline, submit = setup
    receiver = Receiver().start()
    try:
        watch_to(receiver, baseline)
        capture = submit(base, seed=2)
        judgement = wait_for(lambda: Judgement.objects.filter(capture=capture).first())
        assert Capture.objects.get(pk=capture.pk).status == "done"
        assert judgement.verdict == "unchanged" and not Delivery.objects.exists()
        time.sleep(1)
        assert receiver.requests == []
    finally:
        receiver.stop()


def test_a_changed_capture_sends_exactly_one_message_and_a_repeat_sends_none(setup):
    base, baseline, submit = setup
    receiver = Receiver().start()
    try:
        watch_to(receiver, baseline)
        planted = watch_sim.plant_new_frame(base, 3)
        capture = submit(planted, seed=3)
        wait_for(lambda: Delivery.objects.filter(status="sent").exists())
        (message,) = receiver.accepted
        assert f"capture #{capture.pk}" in message["message"]
        assert f"/compare/?a={baseline.pk}&b={capture.pk}" in message["message"]
        assert "host sync" in message["message"]
        again = submit(planted, seed=4)
        assert (
            wait_for(lambda: Judgement.objects.filter(capture=again).first()).verdict == "changed"
        )
        time.sleep(1)
        assert len(receiver.requests) == 1 and Delivery.objects.count() == 1
    finally:
        receiver.stop()


def test_a_flaky_receiver_gets_the_message_once(setup):
    base, baseline, submit = setup
    receiver = Receiver(fail_first=1).start()
    try:
        watch_to(receiver, baseline)
        submit(watch_sim.plant_new_frame(base, 3), seed=5)
        delivery = wait_for(lambda: Delivery.objects.filter(status="sent").first())
        time.sleep(1)
        assert len(receiver.requests) == 2 and len(receiver.accepted) == 1
        assert delivery.attempts == 2 and delivery.error == ""
    finally:
        receiver.stop()
