"""Whole-job captures, scheduled captures and raw-file retention."""

import gzip
import time

import pytest
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.utils import timezone

from profiles.captures import enqueue
from profiles.captures.lifecycle import CaptureConflict
from profiles.jobs import schedule
from profiles.jobs import services as jobs
from profiles.models import Capture, CaptureGroup
from runs.models import Host, Run, RunProcess

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(monkeypatch):
    sent = []
    monkeypatch.setattr(enqueue, "capture_enqueue", lambda *, capture: sent.append(capture.pk))
    monkeypatch.setattr(
        enqueue, "group_enqueue", lambda *, group: sent.extend(c.pk for c in group.captures.all())
    )
    return sent


@pytest.fixture
def run_with_processes():
    run = Run.objects.create(name="llama-8b", status="running")
    local = Host.objects.get(name="local")
    for rank in range(3):
        RunProcess.objects.create(run=run, host=local, pid=1000 + rank, role=f"rank-{rank}")
    return run


def test_a_group_capture_queues_one_capture_per_process_with_the_same_settings(
    run_with_processes, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        group = jobs.capture_group_create(user=None, run=run_with_processes, duration=7, rate=33)
    captures = list(group.captures.order_by("pid"))
    assert [c.pid for c in captures] == [1000, 1001, 1002]
    assert {(c.duration, c.rate, c.run_id) for c in captures} == {(7, 33, run_with_processes.pk)}
    assert sorted(queued) == sorted(c.pk for c in captures)


def test_whole_job_captures_record_with_idle_unless_asked_off(owner_client, queued):
    """API, scheduled ticks and direct calls: blocked threads' waits are the point."""
    local = Host.objects.get(name="local")
    runs = []
    for n in range(3):
        run = Run.objects.create(name=f"job-{n}", status="running", schedule_every_min=5)
        RunProcess.objects.create(run=run, host=local, pid=2000 + n, role="rank-0")
        runs.append(run)
    asked = owner_client.post(f"/api/runs/{runs[0].pk}/capture/", {}, "application/json")
    refused = owner_client.post(
        f"/api/runs/{runs[1].pk}/capture/", {"idle": False}, "application/json"
    )
    assert (asked.status_code, refused.status_code) == (201, 201)
    idle = dict(Capture.objects.values_list("run__name", "idle"))
    assert (idle["job-0"], idle["job-1"]) == (True, False)
    Run.objects.filter(pk__in=[runs[0].pk, runs[1].pk]).update(schedule_every_min=0)
    (scheduled,) = jobs.scheduled_captures_due()
    assert scheduled.run == runs[2] and scheduled.captures.get().idle is True


def test_a_run_without_processes_cannot_be_group_captured(queued):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="no processes"):
        jobs.capture_group_create(user=None, run=Run.objects.create(name="empty"))


def _finish(capture, status, categories=(), started=None):
    capture.status = status
    capture.started_at = timezone.now()
    capture.sampling_started_at = started or timezone.now()
    capture.stats = {
        "total_samples": 100,
        "categories": [{"category": c, "samples": p, "percent": p} for c, p in categories],
    }
    capture.save()


def test_the_group_is_partial_when_one_process_failed_and_names_the_straggler(
    run_with_processes, queued
):
    group = jobs.capture_group_create(user=None, run=run_with_processes)
    a, b, c = group.captures.order_by("pid")
    t0 = timezone.now()
    _finish(a, "done", [("launch", 20), ("sync", 10)], started=t0)
    _finish(
        b, "done", [("launch", 21), ("sync", 11)], started=t0 + timezone.timedelta(seconds=0.25)
    )
    _finish(c, "done", [("launch", 5), ("sync", 60)], started=t0 + timezone.timedelta(seconds=0.1))
    summary = jobs.group_summary(group)
    assert summary["status"] == "done" and summary["start_skew_s"] == pytest.approx(0.25)
    Capture.objects.filter(pk=b.pk).update(status="failed", error="cannot reach the host")
    assert jobs.group_summary(group)["status"] == "partial"


def test_the_api_captures_a_whole_run_and_reports_the_group(
    owner_client, run_with_processes, queued
):
    response = owner_client.post(
        f"/api/runs/{run_with_processes.pk}/capture/",
        {"duration": 5},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "running" and len(body["processes"]) == 3
    assert body["start_skew_s"] is None  # nobody sampled yet; the spread once every one has
    assert owner_client.get(f"/api/groups/{body['id']}/").json()["captures"] == 3


def test_a_whole_run_asked_native_and_non_blocking_is_a_400_and_leaves_nothing(
    owner_client, run_with_processes, queued
):
    response = owner_client.post(
        f"/api/runs/{run_with_processes.pk}/capture/",
        {"native": True, "nonblocking": True},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert "native" in str(response.json())
    assert not CaptureGroup.objects.exists() and not Capture.objects.exists()


def test_a_teammate_cannot_capture_a_whole_run(teammate_client, run_with_processes):
    response = teammate_client.post(f"/api/runs/{run_with_processes.pk}/capture/")
    assert response.status_code == 403


def test_a_due_schedule_fires_once_and_keeps_only_the_newest_captures(run_with_processes, queued):
    Run.objects.filter(pk=run_with_processes.pk).update(schedule_every_min=10, schedule_keep=4)
    now = timezone.now()
    assert len(jobs.scheduled_captures_due(now=now)) == 1
    assert jobs.scheduled_captures_due(now=now + timezone.timedelta(minutes=5)) == []
    Capture.objects.update(status="done")
    assert len(jobs.scheduled_captures_due(now=now + timezone.timedelta(minutes=11))) == 1
    # 6 scheduled captures exist; the trim keeps the newest 4 and deletes finished ones.
    kept = Capture.objects.filter(run=run_with_processes, scheduled=True)
    assert kept.count() == 4
    assert all(c.scheduled and c.group.scheduled for c in kept)


def test_a_run_whose_processes_all_exited_skips_its_tick_without_stopping_the_others(
    run_with_processes, queued
):
    gone = Run.objects.create(name="gone", status="running")
    RunProcess.objects.create(
        run=gone, host=Host.objects.get(name="local"), pid=77, role="rank-0", alive=False
    )
    Run.objects.filter(pk__in=[gone.pk, run_with_processes.pk]).update(schedule_every_min=10)
    groups = jobs.scheduled_captures_due()
    assert [g.run_id for g in groups] == [run_with_processes.pk]
    assert not Capture.objects.filter(run=gone).exists()
    gone.refresh_from_db()
    assert gone.schedule_last_at is not None  # tried this tick, next one in 10 min


def test_a_finished_run_gets_no_scheduled_captures(run_with_processes, queued):
    Run.objects.filter(pk=run_with_processes.pk).update(schedule_every_min=1, status="finished")
    assert jobs.scheduled_captures_due() == []


def _with_raw(size: int, age_days: int) -> Capture:
    capture = Capture.objects.create(kind="import", status="done", stats={"total_samples": 1})
    capture.raw_file.save("samples.txt.gz", ContentFile(gzip.compress(b"x" * size)), save=False)
    capture.raw_size = size
    capture.save()
    Capture.objects.filter(pk=capture.pk).update(
        queued_at=timezone.now() - timezone.timedelta(days=age_days)
    )
    return capture


def test_prune_removes_the_oldest_raw_files_until_under_budget_and_keeps_stats(capsys):
    old, mid, new = _with_raw(600_000, 30), _with_raw(600_000, 20), _with_raw(600_000, 1)
    call_command("prune_raw", "--budget-mb", "1.2")
    assert "pruned 1 raw file(s)" in capsys.readouterr().out
    old.refresh_from_db(), mid.refresh_from_db(), new.refresh_from_db()
    assert old.raw_pruned_at is not None and not old.raw_file and old.stats == {"total_samples": 1}
    assert mid.raw_file and new.raw_file and mid.raw_pruned_at is None


def test_prune_dry_run_changes_nothing(capsys):
    capture = _with_raw(2_000_000, 3)
    call_command("prune_raw", "--budget-mb", "1", "--dry-run")
    assert "would prune 1" in capsys.readouterr().out
    capture.refresh_from_db()
    assert capture.raw_file and capture.raw_pruned_at is None


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_scheduled_capture_fires_through_a_real_beat_and_worker(tmp_path, running_workload):
    from tests.support.worker import WorkerProcess

    run = Run.objects.create(name="sched", status="running", schedule_every_min=1)
    RunProcess.objects.create(
        run=run, host=Host.objects.get(name="local"), pid=running_workload.pid
    )
    env = {
        "FLAMEDECK_SCHEDULE_TICK_S": "1",
        "FLAMEDECK_SCHEDULE_DURATION_S": "2",
        "FLAMEDECK_SCHEDULE_RATE": "50",
    }
    worker = WorkerProcess(tmp_path / "beat.log", beat=True, env=env)
    try:
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            capture = Capture.objects.filter(run=run, scheduled=True).first()
            if capture and capture.status in ("done", "failed"):
                break
            time.sleep(0.5)
    finally:
        worker.stop()
    assert capture is not None, (tmp_path / "beat.log").read_text()[-3000:]
    assert capture.scheduled and capture.group.scheduled
    assert (capture.duration, capture.rate) == (2, 50)
    assert capture.status == "done", capture.error
    assert capture.stats["total_samples"] > 10


def test_scheduled_captures_are_marked_in_the_history(teammate_client, run_with_processes, queued):
    Run.objects.filter(pk=run_with_processes.pk).update(schedule_every_min=10)
    group = jobs.scheduled_captures_due()[0]
    html = teammate_client.get(run_with_processes.get_absolute_url()).content.decode()
    assert html.count('title="Started by the run\'s capture schedule">scheduled') == 3
    assert f'href="/groups/{group.pk}/"' in html


def _run_on_hosts(count: int) -> Run:
    run = Run.objects.create(name=f"wide-{count}", status="running")
    for index in range(count):
        host = Host.objects.create(name=f"gpu-{index}", transport="ssh", address=f"g{index}")
        RunProcess.objects.create(run=run, host=host, pid=500, role=f"rank-{index}")
    return run


def test_a_whole_job_capture_on_more_hosts_than_capture_threads_is_accepted_with_one_instant(
    owner_client, queued, settings
):
    """No ceiling: the hosts past one worker's threads wait for a thread (or another
    worker), and every host is given the same instant ahead."""
    settings.FLAMEDECK_CAPTURE_CONCURRENCY = 2
    wide = _run_on_hosts(3)
    before = timezone.now()
    response = owner_client.post(f"/api/runs/{wide.pk}/capture/", {}, "application/json")
    assert response.status_code == 201 and len(response.json()["processes"]) == 3
    group = wide.capture_groups.get()
    assert group.hosts_total == 3
    lead = (group.start_by - before).total_seconds()
    assert schedule.MIN_LEAD_S <= lead <= settings.FLAMEDECK_GROUP_START_WAIT_S + 1


def test_a_scheduled_tick_captures_a_run_wider_than_the_capture_threads(
    queued, settings, run_with_processes
):
    settings.FLAMEDECK_CAPTURE_CONCURRENCY = 2
    wide = _run_on_hosts(3)
    Run.objects.filter(pk__in=[wide.pk, run_with_processes.pk]).update(schedule_every_min=5)
    groups = jobs.scheduled_captures_due()
    assert sorted(g.run_id for g in groups) == sorted([run_with_processes.pk, wide.pk])


def test_a_whole_job_capture_is_made_in_the_same_few_queries_for_4_or_64_ranks(queued):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = []
    for hosts in (1, 8):
        run = Run.objects.create(name=f"ranks-{hosts}", status="running")
        for index in range(hosts):
            host = Host.objects.create(name=f"q{hosts}-{index}", transport="ssh", address="h")
            for local in range(4 if hosts == 1 else 8):
                RunProcess.objects.create(
                    run=run, host=host, pid=100 + local, role=f"rank-{index * 8 + local}"
                )
        with CaptureQueriesContext(connection) as queries:
            group = jobs.capture_group_create(user=None, run=run, duration=5)
        assert group.captures.filter(status="queued").count() == (4 if hosts == 1 else 64)
        counts.append(len(queries.captured_queries))
    assert counts[0] == counts[1] and counts[1] < 20, counts


def test_a_whole_job_capture_of_a_process_py_spy_is_on_is_refused_naming_it(queued):
    run = _run_on_hosts(3)
    first = jobs.capture_group_create(user=None, run=run, duration=5)
    busy = first.captures.order_by("pk").first()
    Capture.objects.exclude(pk=busy.pk).update(status="done")
    with pytest.raises(CaptureConflict) as refused:
        jobs.capture_group_create(user=None, run=run, duration=5)
    assert f"capture #{busy.pk}" in str(refused.value)
    assert run.capture_groups.count() == 1  # nothing half made


def test_the_group_names_each_failed_host_with_its_cause_and_how_many_ranks_it_lacks(queued):
    run = _run_on_hosts(3)
    group = jobs.capture_group_create(user=None, run=run, duration=5)
    by_host = {c.host.name: c for c in group.captures.select_related("host")}
    Capture.objects.filter(pk=by_host["gpu-0"].pk).update(status="done")
    Capture.objects.filter(pk=by_host["gpu-1"].pk).update(
        status="failed", error_cause="unreachable", error="Cannot reach the host."
    )
    Capture.objects.filter(pk=by_host["gpu-2"].pk).update(
        status="failed", error_cause="pyspy_missing", error="py-spy is not installed."
    )
    summary = jobs.group_summary(group)
    assert summary["status"] == "partial"
    assert summary["failed_hosts"] == [
        {"host": "gpu-1", "cause": "unreachable", "error": "Cannot reach the host.", "ranks": 1},
        {
            "host": "gpu-2",
            "cause": "pyspy_missing",
            "error": "py-spy is not installed.",
            "ranks": 1,
        },
    ]


def test_the_group_names_each_host_that_started_past_its_instant_and_how_late(queued):
    run = _run_on_hosts(3)
    group = jobs.capture_group_create(user=None, run=run, duration=5)
    by_host = {c.host.name: c for c in group.captures.select_related("host")}
    for name, late_s in (("gpu-0", 0.0), ("gpu-1", 0.2), ("gpu-2", 3.9)):
        at = group.start_by + timezone.timedelta(seconds=late_s)
        Capture.objects.filter(pk=by_host[name].pk).update(sampling_started_at=at)
    summary = jobs.group_summary(group)
    assert summary["late_hosts"] == [{"host": "gpu-2", "late_s": 3.9, "ranks": 1}]
    assert summary["start_skew_s"] == 3.9  # the skew says it too
