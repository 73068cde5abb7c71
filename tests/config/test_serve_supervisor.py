"""`manage.py serve`'s supervisor without waiting: the restart backoff grows 1, 2, 4 …
30 s for a child that keeps dying and starts over after a minute of uptime (an
injected clock, real child processes); the capture worker's threads come from the
setting the request side checks whole-job captures against.

The real thing (a killed worker restarted in 1 s) is tests/config/test_serve.py."""

import shutil

from config.management.commands.serve import worker_children
from config.supervisor import MAX_BACKOFF_S, STABLE_S, Child, Supervisor

TRUE = shutil.which("true") or "/bin/true"


class Clock:
    """Seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _dies_after(supervisor: Supervisor, child: Child, clock: Clock, ran_s: float) -> float:
    """Let the child's process exit having 'run' ran_s; the delay the supervisor chose."""
    child.proc.wait(timeout=10)
    clock.now += ran_s
    supervisor.tick()
    assert child.proc is None, "an exited child is reaped at once"
    return child.restart_at - clock.now


def _restarts_on_time(supervisor: Supervisor, child: Child, clock: Clock, delay: float) -> None:
    clock.now += delay - 0.01
    supervisor.tick()
    assert child.proc is None, f"restarted before its {delay} s backoff"
    clock.now += 0.01
    supervisor.tick()
    assert child.proc is not None, f"not restarted after its {delay} s backoff"


def test_a_child_that_keeps_dying_waits_1_2_4_up_to_30_s_and_starts_over_after_a_minute_up():
    clock, said = Clock(), []
    child = Child("worker-capture", [TRUE])
    supervisor = Supervisor([child], say=said.append, clock=clock)
    supervisor.start(child)
    delays = []
    for _ in range(7):
        delays.append(_dies_after(supervisor, child, clock, ran_s=0.5))
        _restarts_on_time(supervisor, child, clock, delays[-1])
    assert delays == [1, 2, 4, 8, 16, MAX_BACKOFF_S, MAX_BACKOFF_S]
    assert "restarting in 30 s" in said[-2] and said[-1].startswith("started worker-capture")
    # A minute of uptime: the next death counts as the first again, then grows anew.
    assert _dies_after(supervisor, child, clock, ran_s=STABLE_S) == 1
    _restarts_on_time(supervisor, child, clock, 1)
    assert _dies_after(supervisor, child, clock, ran_s=STABLE_S - 1) == 2
    assert child.restarts == 9
    supervisor.stop_all(grace_s=1)


def test_the_capture_worker_runs_as_many_threads_as_the_capture_concurrency_setting(settings):
    settings.FLAMEDECK_CAPTURE_CONCURRENCY = 7
    capture = next(c for c in worker_children(concurrency=2) if c.name == "worker-capture")
    at = capture.argv.index("--concurrency")
    assert capture.argv[at + 1] == "7" and capture.argv[capture.argv.index("--pool") + 1] == (
        "threads"
    )


def test_serve_starts_as_many_capture_workers_as_the_setting_each_with_its_threads(settings):
    settings.FLAMEDECK_CAPTURE_CONCURRENCY, settings.FLAMEDECK_CAPTURE_WORKERS = 5, 3
    captures = [c for c in worker_children(concurrency=2) if c.name.startswith("worker-capture")]
    assert [c.name for c in captures] == [f"worker-capture{i}" for i in (1, 2, 3)]
    for child in captures:
        assert child.argv[child.argv.index("--concurrency") + 1] == "5"
        assert child.argv[child.argv.index("-n") + 1] == f"{child.name[7:]}@%h"  # names differ


def test_a_capture_worker_on_redis_takes_a_host_only_with_a_free_thread(settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/3"
    capture = next(c for c in worker_children(concurrency=2) if c.name == "worker-capture")
    analysis = next(c for c in worker_children(concurrency=2) if c.name == "worker-analysis")
    assert "--disable-prefetch" in capture.argv and "--disable-prefetch" not in analysis.argv
    settings.CELERY_BROKER_URL = "filesystem://"  # Celery would only warn there
    capture = next(c for c in worker_children(concurrency=2) if c.name == "worker-capture")
    assert "--disable-prefetch" not in capture.argv
