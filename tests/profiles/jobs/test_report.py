"""The whole-job report is stored on the group when its last rank's analysis ends, from
the ranks' stored stats; the group API carries it, and says why while ranks still run.

The ranks' samples are the real 4-rank straggler job (tests/data/jobs/straggler), handed
to the real group pipeline with only the remote seam swapped."""

import pytest

from profiles import pyspy
from profiles.captures import lifecycle as states
from profiles.captures import pipeline
from profiles.jobs import report as group_report
from profiles.jobs import services as jobs
from profiles.models import Capture, CaptureGroup
from tests import factories
from tests.support.recorded_jobs import record_group

pytestmark = pytest.mark.django_db


@pytest.fixture
def recorded_group(monkeypatch):
    """A 4-rank group whose ranks recorded the straggler job, not analysed yet."""
    return record_group(monkeypatch, "straggler", analyse=False)


def test_no_verdict_while_a_rank_is_still_parsing_and_it_says_why(recorded_group, teammate_client):
    group, ids = recorded_group
    for pk in ids[:3]:
        assert pipeline.capture_analyze_stored(capture_id=pk) == "done"
    assert CaptureGroup.objects.get(pk=group.pk).job_report is None
    body = teammate_client.get(f"/api/groups/{group.pk}/").json()
    assert (body["straggler"], body["classes"], body["findings"]) == (None, [], [])
    assert body["job_report_reason"].startswith("1 of 4 ranks have not ended")


def test_the_last_rank_to_finish_its_analysis_stores_the_report_the_api_serves(
    recorded_group, teammate_client
):
    group, ids = recorded_group
    for pk in ids:
        pipeline.capture_analyze_stored(capture_id=pk)
    stored = CaptureGroup.objects.get(pk=group.pk).job_report
    assert stored["straggler"]["name"] == "rank-3"
    functions = [i.get("function") for i in stored["straggler"]["explanation"]]
    assert "metric_per_sample (train.py)" in functions
    assert [r["name"] for r in stored["ranks"]] == ["rank-0", "rank-1", "rank-2", "rank-3"]
    assert "threads" not in stored["ranks"][0]  # each capture keeps its own threads
    body = teammate_client.get(f"/api/groups/{group.pk}/").json()
    assert body["job_report_reason"] is None
    assert body["straggler"] == stored["straggler"]
    assert body["classes"] == stored["classes"] and body["findings"] == stored["findings"]
    assert "straggler" in [f["rule"] for f in body["findings"]]


def test_the_report_is_read_from_the_group_not_recomputed_on_view(recorded_group, teammate_client):
    group, ids = recorded_group
    for pk in ids:
        pipeline.capture_analyze_stored(capture_id=pk)
    CaptureGroup.objects.filter(pk=group.pk).update(
        job_report={"straggler": None, "classes": [], "findings": [{"rule": "stored"}]}
    )
    body = teammate_client.get(f"/api/groups/{group.pk}/").json()
    assert body["findings"] == [{"rule": "stored"}]


def test_a_group_whose_last_rank_fails_stores_its_report_from_the_others_at_that_moment(
    recorded_group, teammate_client
):
    group, ids = recorded_group
    for pk in ids[:3]:
        pipeline.capture_analyze_stored(capture_id=pk)
    assert CaptureGroup.objects.get(pk=group.pk).job_report is None
    assert states.capture_mark_failed(capture_id=ids[3], cause="parse", message="gone")
    stored = CaptureGroup.objects.get(pk=group.pk).job_report
    assert stored["without_samples"] == ["rank-3"]
    assert [r["name"] for r in stored["ranks"]] == ["rank-0", "rank-1", "rank-2"]
    assert stored["captures"] == {f"rank-{n}": pk for n, pk in enumerate(ids)}
    body = teammate_client.get(f"/api/groups/{group.pk}/").json()
    assert body["job_report_reason"] is None and body["straggler"] is None


def test_a_view_never_computes_a_missing_report_it_says_why_and_the_reaper_stores_it(
    recorded_group, teammate_client
):
    """Two ranks ending in two transactions at once can both miss the report: the page
    says so (no computing on view) and the reaper's pass stores it."""
    group, ids = recorded_group
    for pk in ids:
        pipeline.capture_analyze_stored(capture_id=pk)
    CaptureGroup.objects.filter(pk=group.pk).update(job_report=None)
    for _ in range(2):
        body = teammate_client.get(f"/api/groups/{group.pk}/").json()
        assert body["straggler"] is None and "being stored" in body["job_report_reason"]
    assert CaptureGroup.objects.get(pk=group.pk).job_report is None
    assert group_report.group_reports_catch_up() == 1
    assert group_report.group_reports_catch_up() == 0  # stored once
    body = teammate_client.get(f"/api/groups/{group.pk}/").json()
    assert body["straggler"]["name"] == "rank-3" and body["job_report_reason"] is None


def test_step_threads_set_on_the_run_are_the_ones_the_report_and_findings_read(recorded_group):
    """Named as the step, the loader (blocked on its full queue) is judged, and its
    backpressure is reported; guessed, the step is the trainer and the loader is fine."""
    group, ids = recorded_group
    group.run.step_threads = "loader"
    group.run.save()
    for pk in ids:
        pipeline.capture_analyze_stored(capture_id=pk)
    ranks = CaptureGroup.objects.get(pk=group.pk).job_report["ranks"]
    assert {(r["detected_by"], tuple(r["step_threads"])) for r in ranks} == {("named", ("loader",))}
    stats = Capture.objects.get(pk=ids[0]).stats
    assert "backpressure" in [f["rule"] for f in stats["findings"]]
    assert "backpressure" not in [f["rule"] for f in pyspy.findings_for_capture(stats)]


def test_rank_names_are_roles_made_distinct_where_two_read_the_same():
    run = factories.job_run(ranks=2)
    run.processes.update(role="worker")
    group = jobs.capture_group_create(user=None, run=run, duration=5, rate=20)
    captures = list(group.captures.select_related("process", "host").order_by("pk"))
    names = group_report.rank_names(captures)
    assert sorted(names.values()) == sorted(f"worker ({c.host.name}:{c.pid})" for c in captures)


def test_anonymous_requests_get_no_report(recorded_group, client):
    group, _ = recorded_group
    assert client.get(f"/api/groups/{group.pk}/").status_code in (401, 403)


# --- a report that fails is stored as failed, and never stops the others' ------------


def _analysed(monkeypatch, case: str, run_name: str) -> CaptureGroup:
    group, _ = record_group(monkeypatch, case, run_name=run_name)
    return CaptureGroup.objects.get(pk=group.pk)


def _failing_for(monkeypatch, run_name: str) -> None:
    """The job report raises for this run's groups only (a bug yet to be found)."""
    real = group_report.job_report

    def job_report(group, captures):
        if group.run.name == run_name:
            raise ZeroDivisionError("float division by zero")
        return real(group, captures)

    monkeypatch.setattr(group_report, "job_report", job_report)


def test_a_report_that_raises_is_stored_as_failed_with_its_reason_not_pending(
    monkeypatch, teammate_client
):
    _failing_for(monkeypatch, "broken")
    group = _analysed(monkeypatch, "straggler", "broken")
    assert group.job_report is None
    assert group.report_error == "ZeroDivisionError: float division by zero"
    body = teammate_client.get(f"/api/groups/{group.pk}/").json()
    assert body["report_status"] == "failed"
    assert body["report_error"] == "ZeroDivisionError: float division by zero"
    assert "could not be computed (ZeroDivisionError" in body["job_report_reason"]
    assert (body["straggler"], body["classes"], body["findings"]) == (None, [], [])
    page = teammate_client.get(f"/api/groups/{group.pk}/live/").json()["report"]
    assert page["ready"] is False and page["failed"] is True and page["ended"] is True


def test_report_status_is_pending_until_the_last_rank_ends_then_stored(
    recorded_group, teammate_client
):
    group, ids = recorded_group
    statuses = []
    for pk in ids:
        statuses.append(teammate_client.get(f"/api/groups/{group.pk}/").json()["report_status"])
        pipeline.capture_analyze_stored(capture_id=pk)
    body = teammate_client.get(f"/api/groups/{group.pk}/").json()
    assert statuses == ["pending"] * 4
    assert body["report_status"] == "stored" and body["report_error"] is None
    assert body["findings"]  # stored: an empty list would now mean "no findings"


def test_the_catch_up_stores_other_groups_reports_past_one_that_fails_and_the_task_succeeds(
    monkeypatch,
):
    """A failing group comes first in the catch-up's order; the group after it, whose
    report was missed, is still stored, and the reaper's periodic task returns."""
    from profiles import beat

    _failing_for(monkeypatch, "broken")
    broken = _analysed(monkeypatch, "straggler", "broken")
    missed = _analysed(monkeypatch, "balanced", "missed")
    CaptureGroup.objects.filter(pk__in=[broken.pk, missed.pk]).update(
        job_report=None, report_error=""
    )
    assert beat.reap_lost_captures() == 0  # runs the catch-up; raises nothing
    broken.refresh_from_db()
    missed.refresh_from_db()
    assert broken.report_error.startswith("ZeroDivisionError") and broken.job_report is None
    assert missed.job_report is not None and missed.report_error == ""
    # A failed report is not retried every 30 s by the catch-up; re-analysing a rank does.
    assert group_report.group_reports_catch_up() == 0


def test_the_catch_up_goes_on_when_storing_one_group_raises(monkeypatch, recorded_group):
    group, ids = recorded_group
    for pk in ids:
        pipeline.capture_analyze_stored(capture_id=pk)
    other = _analysed(monkeypatch, "balanced", "other")
    CaptureGroup.objects.filter(pk__in=[group.pk, other.pk]).update(job_report=None)
    real, calls = group_report.group_report_update, []

    def update(*, group_id):
        calls.append(group_id)
        if len(calls) == 1:
            raise RuntimeError("the database went away")
        return real(group_id=group_id)

    monkeypatch.setattr(group_report, "group_report_update", update)
    assert group_report.group_reports_catch_up() == 1
    assert sorted(calls) == sorted([group.pk, other.pk])


def test_a_recorded_capture_of_a_hung_job_says_it_is_stuck_not_that_a_step_is_slow(
    monkeypatch, teammate_client
):
    """The real 4-rank job whose rank 2 waits for a lock file (tests/data/jobs/hung)."""
    group, _ = record_group(monkeypatch, "hung")
    body = teammate_client.get(f"/api/groups/{group.pk}/").json()
    assert body["report_status"] == "stored"
    rules = [f["rule"] for f in body["findings"]]
    assert "stuck" in rules and "straggler" not in rules
    stuck = body["findings"][rules.index("stuck")]
    assert stuck["severity"] == "high" and stuck["ranks"] == ["rank-2"]
    assert "wait_for_lock (hang_train.py:" in stuck["title"]
    assert "remove that excess" not in stuck["advice"]


def test_a_failing_reaper_step_is_logged_and_the_catch_up_still_stores_a_missed_report(
    monkeypatch, caplog
):
    """The steps of the reaper's periodic task are independent: the reaper meets a real
    database error, the re-send raises too; both are logged with their cause, the
    catch-up after them still stores the missed report, and the task returns."""
    from django.db import connection

    from profiles import beat
    from profiles.captures import redelivery, services

    missed = _analysed(monkeypatch, "balanced", "missed")
    CaptureGroup.objects.filter(pk=missed.pk).update(job_report=None, report_error="")

    def reaper(*, timeout_s):
        with connection.cursor() as cursor:  # aborts the transaction it runs in
            cursor.execute("SELECT * FROM no_such_table")

    def resend(*, timeout_s):
        raise ConnectionError("the broker went away")

    monkeypatch.setattr(services, "reap_lost_captures", reaper)
    monkeypatch.setattr(redelivery, "captures_resend_lost", resend)
    with caplog.at_level("ERROR", logger="profiles.beat"):
        assert beat.reap_lost_captures() == 0
    missed.refresh_from_db()
    assert missed.job_report is not None and missed.report_error == ""
    failed = [r.getMessage() for r in caplog.records if r.name == "profiles.beat"]
    assert len(failed) == 2
    assert "'reap lost captures' failed (ProgrammingError" in failed[0]
    assert "no_such_table" in failed[0]
    assert "'re-send lost captures' failed (ConnectionError: the broker went away)" in failed[1]


def test_a_catch_up_that_cannot_list_the_groups_logs_it_and_the_task_still_counts(
    monkeypatch, caplog
):
    from profiles import beat
    from profiles.captures import services

    def listing(*args, **kwargs):
        raise ConnectionError("the database went away")

    monkeypatch.setattr(services, "reap_lost_captures", lambda *, timeout_s: 2)
    monkeypatch.setattr(CaptureGroup.objects, "filter", listing)
    with caplog.at_level("ERROR"):
        assert group_report.group_reports_catch_up() == 0
        assert beat.reap_lost_captures() == 2
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("the report catch-up could not list the groups missing a report") == 2
    assert not [r for r in caplog.records if r.name == "profiles.beat"]  # handled inside


def test_ranks_that_registered_their_layout_are_named_with_their_parallel_group(monkeypatch):
    run = factories.job_run(ranks=4, name="gloo-3d")
    for process in run.processes.all():
        number = int(process.role.removeprefix("rank-"))
        process.layout = {"dp": number // 2, "pp": number % 2}
        process.save(update_fields=["layout"])
    group, _ = record_group(monkeypatch, "straggler", run=run)
    stored = CaptureGroup.objects.get(pk=group.pk).job_report
    assert stored["straggler"]["name"] == "rank-3"
    assert stored["straggler"]["group"] == "pipeline stage 1 of data-parallel replica 1"
    (finding,) = [f for f in stored["findings"] if f["rule"] == "straggler"]
    assert finding["title"].startswith(
        "The other ranks wait for rank-3 (pipeline stage 1 of data-parallel replica 1) "
    )
