"""One analysis per capture, with real parts: a backlog of 20 imports on two analysis
processes, the first import's analysis lasting 20 s (tests.support.slow_analysis)
against a 5 s heartbeat timeout, beat's reaper every second. Before analyses were
claimed and heartbeat while running, the reaper re-sent the slow one every 5 s and
the idle process analysed it again (at 5ba5c26: started twice, 21 analyses for 20)."""

import re
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from profiles.captures import services
from profiles.models import Capture
from tests.profiles.web.test_views import RAW
from tests.support.slow_analysis import SLOW_READ_STARTED
from tests.support.worker import WorkerProcess

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

IMPORTS = 20
# A finished analysis (not a skipped delivery), as Celery logs it.
ANALYSED = re.compile(
    r"profiles\.tasks\.analyze_capture\[[^\]]+\] succeeded in [\d.]+s: '(done|failed)'"
)


def _raw(slow: bool) -> bytes:
    return ("# slow\n" if slow else "").encode() + RAW.encode()


def _wait_all_final(ids: list[int], timeout_s: float) -> list[Capture]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        captures = list(Capture.objects.filter(pk__in=ids))
        if all(c.is_final for c in captures):
            return captures
        time.sleep(0.5)
    raise AssertionError([c.status for c in Capture.objects.filter(pk__in=ids)])


def test_a_backlog_of_imports_with_slow_analyses_analyses_each_capture_once(tmp_path, owner):
    env = {"FLAMEDECK_HEARTBEAT_TIMEOUT_S": "5", "FLAMEDECK_REAP_EVERY_S": "1"}
    log = tmp_path / "worker.log"
    worker = WorkerProcess(log, beat=True, env=env, app="tests.support.slow_analysis")
    try:
        ids = [
            services.capture_import(
                user=owner, file=SimpleUploadedFile(f"r{i}.txt", _raw(slow=i == 0)), enqueue=True
            ).pk
            for i in range(IMPORTS)
        ]
        captures = _wait_all_final(ids, timeout_s=300)
        time.sleep(3)  # any message re-sent late has run by now
    finally:
        worker.stop()
    text = log.read_text()
    analysed, slow = len(ANALYSED.findall(text)), text.count(SLOW_READ_STARTED)
    print(f"\n{IMPORTS} imports: {analysed} analyses finished, the slow one started {slow}x")
    assert [c.status for c in captures] == ["done"] * IMPORTS, [c.error for c in captures]
    assert slow == 1, f"the slow capture was analysed {slow} times"
    assert analysed == IMPORTS, f"{analysed} analyses for {IMPORTS} captures"
    assert all(c.analysis_attempts == 1 for c in captures)
