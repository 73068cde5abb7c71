"""The whole-job report is stored on the group when its last rank's analysis ends, from
the ranks' stored stats; the group API carries it, and says why while ranks still run.

The ranks' samples are the real 4-rank straggler job (tests/data/jobs/straggler), handed
to the real group pipeline with only the remote seam swapped."""

import gzip
from pathlib import Path

import pytest

from profiles import enqueue, group_pipeline, group_report, jobs, pipeline, pyspy
from profiles.models import Capture, CaptureGroup
from runs import remote
from tests import factories

pytestmark = pytest.mark.django_db

JOBS = Path(__file__).resolve().parents[1] / "data" / "jobs"


def recorded(case: str, rank: int) -> tuple[bytes, str]:
    """The rank's raw samples and py-spy log, as the recorder stored them."""
    plain = JOBS / case / f"rank-{rank}.txt"
    raw = (
        plain.read_bytes() if plain.exists() else gzip.decompress(Path(f"{plain}.gz").read_bytes())
    )
    return raw, Path(f"{plain}.log").read_text(encoding="utf-8")


@pytest.fixture
def recorded_group(monkeypatch):
    """A 4-rank group whose ranks recorded the straggler job; returns (group, ids)."""
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    run = factories.job_run(ranks=4)
    group = jobs.capture_group_create(user=None, run=run, duration=10, rate=40, idle=True)

    def fake_record_many(target, pids, settings, session, **kwargs):
        session.on_ready()
        results, logs = {}, {}
        for pid in pids:
            raw, log = recorded("straggler", pid - factories.FIRST_PID)
            results[pid] = remote.RecordResult(raw, log, "", 0, "duration", 10.1)
            logs[pid] = log
        return remote.ManyResult(results, logs)

    monkeypatch.setattr(remote, "record_many", fake_record_many)
    ids = list(group.captures.order_by("pid").values_list("pk", flat=True))
    host_id = Capture.objects.get(pk=ids[0]).host_id
    parsing = group_pipeline.host_captures_execute(
        group_id=group.pk, host_id=host_id, capture_ids=ids
    )
    assert parsing == ids
    return group, ids


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


def test_a_group_whose_last_rank_failed_gets_its_report_on_first_read_from_the_others(
    recorded_group, teammate_client
):
    group, ids = recorded_group
    for pk in ids[:3]:
        pipeline.capture_analyze_stored(capture_id=pk)
    Capture.objects.filter(pk=ids[3]).update(status=Capture.Status.FAILED, error="gone")
    assert CaptureGroup.objects.get(pk=group.pk).job_report is None
    body = teammate_client.get(f"/api/groups/{group.pk}/").json()
    assert body["job_report_reason"] is None and body["straggler"] is None
    stored = CaptureGroup.objects.get(pk=group.pk).job_report
    assert stored["without_samples"] == ["rank-3"]
    assert [r["name"] for r in stored["ranks"]] == ["rank-0", "rank-1", "rank-2"]


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
    assert sorted(names.values()) == sorted(f"worker #{c.pk}" for c in captures)


def test_anonymous_requests_get_no_report(recorded_group, client):
    group, _ = recorded_group
    assert client.get(f"/api/groups/{group.pk}/").status_code in (401, 403)
