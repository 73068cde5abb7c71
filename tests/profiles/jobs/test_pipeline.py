"""One host of a whole-job capture with the remote seam swapped: the scheduled instant,
per-rank outcomes, and a host failure that fails only that host's ranks.

The seam itself is tested for real in tests/runs/test_remote_many.py and end to end
in tests/profiles/jobs/test_window_e2e.py."""

import threading

import pytest
from django.utils import timezone

from profiles.captures import enqueue, pipeline
from profiles.captures.lifecycle import capture_claim
from profiles.jobs import pipeline as group_pipeline
from profiles.jobs import services as jobs
from profiles.models import Capture, CaptureGroup
from runs import remote
from runs.models import Host, Run, RunProcess
from tests.support.seam import finished

pytestmark = pytest.mark.django_db

RAW = b"thread (1): MainThread;main (train.py:1) 40\n"
SAMPLING_PREFIX = "py-spy> Sampling process"
SAMPLING = "py-spy> Sampling process 20 times a second for 10 seconds. Press Control-C to exit."


@pytest.fixture
def group(monkeypatch):
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    run = Run.objects.create(name="job")
    nodes = [Host.objects.create(name=f"node-{i}", transport="ssh", address=f"n{i}") for i in "ab"]
    for rank, (host, pid) in enumerate([(nodes[0], 11), (nodes[0], 12), (nodes[1], 21)]):
        RunProcess.objects.create(run=run, host=host, pid=pid, role=f"rank-{rank}")
    return jobs.capture_group_create(user=None, run=run, duration=10, rate=20)


def _host_ids(group, name: str) -> tuple[int, list[int]]:
    captures = Capture.objects.filter(group=group, host__name=name).order_by("pid")
    return captures[0].host_id, [c.pk for c in captures]


def test_the_group_knows_how_many_hosts_must_meet_at_the_start(group):
    assert (group.hosts_total, group.hosts_settled) == (2, 0)
    assert group.start_by > timezone.now()


def test_no_host_waits_for_another_each_session_gets_the_groups_instant(monkeypatch, group):
    asked = {}

    def fake_record_many(target, pids, settings, session, **kwargs):
        asked.update(kwargs, may_start=session.may_start())
        return finished(
            remote.ManyResult({pid: remote.RemoteError("no_such_pid") for pid in pids}), kwargs
        )

    monkeypatch.setattr(remote, "record_many", fake_record_many)
    host_id, ids = _host_ids(group, "node-a")  # node-b never shows up
    group_pipeline.host_captures_execute(group_id=group.pk, host_id=host_id, capture_ids=ids)
    assert asked["start_at"] == pytest.approx(group.start_by.timestamp())
    assert asked["may_start"] is True


def test_each_rank_ends_with_its_own_outcome_and_its_sampling_start(monkeypatch, group):
    def fake_record_many(target, pids, settings, session, **kwargs):
        session.on_ready()
        session.on_line(11, SAMPLING, 0.1)
        ok = remote.RecordResult(RAW, SAMPLING, "", 0, "duration", 10.2)
        return finished(
            remote.ManyResult({11: ok, 12: remote.RemoteError("no_such_pid")}, {11: SAMPLING}),
            kwargs,
        )

    monkeypatch.setattr(remote, "record_many", fake_record_many)
    host_id, ids = _host_ids(group, "node-a")
    parsing = group_pipeline.host_captures_execute(
        group_id=group.pk, host_id=host_id, capture_ids=ids
    )
    ok, missing = Capture.objects.filter(pk__in=ids).order_by("pid")
    assert parsing == [ok.pk] and ok.status == "parsing" and ok.sampling_started_at
    assert missing.status == "failed" and missing.error_cause == "no_such_pid"
    assert CaptureGroup.objects.get(pk=group.pk).hosts_settled == 1


def test_a_host_that_fails_fails_only_its_ranks_and_still_counts_at_the_barrier(monkeypatch, group):
    def unreachable(*args, **kwargs):
        raise remote.RemoteError("unreachable")

    monkeypatch.setattr(remote, "record_many", unreachable)
    host_id, ids = _host_ids(group, "node-b")
    assert (
        group_pipeline.host_captures_execute(group_id=group.pk, host_id=host_id, capture_ids=ids)
        == []
    )
    assert Capture.objects.get(pk=ids[0]).error_cause == "unreachable"
    assert set(Capture.objects.filter(host__name="node-a").values_list("status", flat=True)) == {
        "queued"
    }
    assert CaptureGroup.objects.get(pk=group.pk).hosts_settled == 1


def test_a_rank_whose_pid_a_single_capture_claimed_first_fails_as_pid_busy_naming_it(
    monkeypatch, group
):
    """A single capture and a group rank that both got past the request's 409 check:
    the later claim steps back instead of starting a second py-spy on the process."""
    asked = []

    def fake_record_many(target, pids, settings, session, **kwargs):
        asked.extend(pids)
        ok = remote.RecordResult(RAW, SAMPLING, "", 0, "duration", 10.2)
        return finished(
            remote.ManyResult({pid: ok for pid in pids}, {pid: SAMPLING for pid in pids}), kwargs
        )

    monkeypatch.setattr(remote, "record_many", fake_record_many)
    host_id, ids = _host_ids(group, "node-a")
    single = Capture.objects.create(host_id=host_id, pid=11, duration=30)
    assert capture_claim(capture_id=single.pk, worker="other-worker")
    parsing = group_pipeline.host_captures_execute(
        group_id=group.pk, host_id=host_id, capture_ids=ids
    )
    busy, free = Capture.objects.filter(pk__in=ids).order_by("pid")
    assert asked == [12] and parsing == [free.pk]
    assert (busy.status, busy.error_cause) == ("failed", "pid_busy")
    assert f"capture #{single.pk} (record) was already running py-spy on" in busy.error
    assert Capture.objects.get(pk=single.pk).status == "running"  # the winner goes on
    assert CaptureGroup.objects.get(pk=group.pk).hosts_settled == 1


def test_a_single_capture_claimed_after_a_rank_of_the_pid_steps_back_naming_the_rank(group):
    host_id, ids = _host_ids(group, "node-a")
    assert capture_claim(capture_id=ids[0], worker="group-worker")
    single = Capture.objects.create(host_id=host_id, pid=11, duration=30)
    assert pipeline.capture_execute(capture_id=single.pk) == "failed"
    single.refresh_from_db()
    assert single.error_cause == "pid_busy"
    assert f"capture #{ids[0]} (record) was already running py-spy" in single.error


def test_a_rank_whose_process_exits_mid_window_says_what_it_covered_not_the_sessions_time(
    monkeypatch, teammate_client
):
    """Real py-spy on two real processes of the local host, one session: the rank whose
    process ends 3 s into sampling covers ~3 s of the 6 s asked; its host session ran ~6 s."""
    from tests.support.workload import start_workload

    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    local = Host.objects.get(name="local")
    stays, leaves = start_workload(threads=1), start_workload(threads=1)
    sampling = threading.Event()
    on_line = group_pipeline._HostSession.on_line

    def seen(session, pid: int, line: str, elapsed_s: float) -> None:
        on_line(session, pid, line, elapsed_s)
        if pid == leaves.pid and line.startswith(SAMPLING_PREFIX):
            sampling.set()

    monkeypatch.setattr(group_pipeline._HostSession, "on_line", seen)
    leaves.exit_once_sampled(3, sampling)
    run = Run.objects.create(name="exits")
    for rank, pid in enumerate([stays.pid, leaves.pid]):
        RunProcess.objects.create(run=run, host=local, pid=pid, role=f"rank-{rank}")
    # --nonblocking: see the fault matrix's exit case (py-spy 0.4.3 and a process
    # killed while it holds the process stopped).
    group = jobs.capture_group_create(
        user=None, run=run, duration=6, rate=50, native=False, nonblocking=True
    )
    ids = list(group.captures.values_list("pk", flat=True))
    try:
        parsing = group_pipeline.host_captures_execute(
            group_id=group.pk, host_id=local.pk, capture_ids=ids
        )
    finally:
        stays.stop()
        leaves.stop()
    for capture_id in parsing:
        pipeline.capture_analyze_stored(capture_id=capture_id)
    gone, full = (Capture.objects.get(group=group, pid=p) for p in (leaves.pid, stays.pid))
    assert (gone.status, full.status) == ("done", "done")
    assert "The process exited during the capture" in gone.note and not full.note
    # It ended 3 s after its py-spy started; that py-spy's stop is seen up to a second
    # after the exit on a loaded machine. The session's time (what it read before) is
    # about the 6 s asked.
    assert 0 < gone.progress["covered_s"] <= 3.0 + 1.0, gone.progress
    assert gone.wall_s >= 5 and "covered_s" not in full.progress
    page = teammate_client.get(gone.get_absolute_url()).content.decode()
    assert f"covers {gone.progress['covered_s']:g} s of the 6 s asked" in page


def test_each_ranks_sampling_start_is_the_hosts_clock_when_the_host_gave_it(monkeypatch, group):
    host_at = timezone.now() - timezone.timedelta(seconds=30)  # far from the worker's "now"

    def fake_record_many(target, pids, settings, session, **kwargs):
        session.on_ready()
        session.on_line(11, SAMPLING, 0.1)  # the worker reads it now
        facts = {"sampling_at": f"{host_at.timestamp():.6f}"}
        ok = remote.RecordResult(RAW, SAMPLING, "", 0, "duration", 10.2, facts=facts)
        unknown = remote.RecordResult(RAW, SAMPLING, "", 0, "duration", 10.2, facts={})
        return finished(
            remote.ManyResult({11: ok, 12: unknown}, {11: SAMPLING, 12: SAMPLING}), kwargs
        )

    monkeypatch.setattr(remote, "record_many", fake_record_many)
    host_id, ids = _host_ids(group, "node-a")
    group_pipeline.host_captures_execute(group_id=group.pk, host_id=host_id, capture_ids=ids)
    from_host, from_worker = Capture.objects.filter(pk__in=ids).order_by("pid")
    assert abs((from_host.sampling_started_at - host_at).total_seconds()) < 0.001
    assert from_worker.sampling_started_at is None  # py-spy never said so for it here


def test_a_ranks_first_sample_is_the_instant_when_py_spy_sampled_before_it(monkeypatch, group):
    """py-spy starts early to attach; what it took before the instant is cut, so the
    rank's sampling start is the instant, and its lead (request to sampling, on this
    machine's clock through the host's offset) is kept for the next schedule."""
    window = group.start_by.timestamp()
    early, late = window - 0.8, window + 0.4

    def fake_record_many(target, pids, settings, session, **kwargs):
        results = {}
        for pid, at in zip(pids, (early, late), strict=True):
            facts = {"sampling_at": f"{at:.6f}", "window_at": f"{window - 2:.6f}",
                     "clock_offset_s": "2.000000"}  # fmt: skip
            facts["window_at"] = f"{window:.6f}"
            results[pid] = remote.RecordResult(RAW, SAMPLING, "", 0, "duration", 10.2, facts=facts)
        return finished(remote.ManyResult(results, {pid: SAMPLING for pid in pids}), kwargs)

    monkeypatch.setattr(remote, "record_many", fake_record_many)
    host_id, ids = _host_ids(group, "node-a")
    group_pipeline.host_captures_execute(group_id=group.pk, host_id=host_id, capture_ids=ids)
    on_time, behind = Capture.objects.filter(pk__in=ids).order_by("pid")
    assert on_time.sampling_started_at.timestamp() == pytest.approx(window, abs=1e-3)
    assert behind.sampling_started_at.timestamp() == pytest.approx(late, abs=1e-3)
    requested = group.created_at.timestamp()
    assert on_time.progress["lead_s"] == pytest.approx(early + 2 - requested, abs=2e-3)
    assert behind.progress["lead_s"] == pytest.approx(late + 2 - requested, abs=2e-3)


def test_a_rank_attached_before_the_instant_reads_sampling_with_nothing_sampled_yet(group):
    import time

    capture = Capture.objects.filter(group=group, pid=11).get()
    start_at = time.time() + 5
    session = group_pipeline._HostSession(group.pk, [capture], start_at=start_at)
    session.on_line(11, SAMPLING, 0.1)
    progress = session.ranks[11].progress(time.monotonic())
    assert progress["sampling"] is True and progress["elapsed_s"] == 0.0
    assert progress["expected_samples"] == 0
    assert capture.sampling_started_at.timestamp() == pytest.approx(start_at, abs=0.05)
