"""The group page: every process side by side, the straggler marked, the merged
flamegraph with a process filter, and GPU timelines when they were sampled."""

import gzip
import json

import pytest
from django.core.files.base import ContentFile
from django.urls import reverse
from django.utils import timezone

from profiles import pyspy
from profiles.captures import enqueue
from profiles.jobs import report as group_report
from profiles.jobs import services as jobs
from profiles.models import Capture, CaptureGroup
from runs.models import Host, Run, RunProcess
from tests.support.recorded_jobs import record_group

pytestmark = pytest.mark.django_db


def _tree(leaf: str, value: int) -> dict:
    return {
        "name": "all",
        "value": value,
        "children": [
            {
                "name": "thread (1): MainThread",
                "value": value,
                "children": [{"name": leaf, "value": value, "children": []}],
            }
        ],
    }


def _gpu_timeline(busy: bool) -> dict:
    """Four seconds of one GPU: steady when busy, spotty when the host stalls."""
    points = [
        {
            "t": i / 4,
            "util": (88.0 if busy else (70.0 if i % 4 == 0 else 5.0)),
            "mem_used_mib": 40000.0,
            "mem_total_mib": 81559.0,
        }
        for i in range(17)
    ]
    return {"interval_ms": 250, "skipped_lines": 0, "gpus": [{"index": 0, "points": points}]}


@pytest.fixture
def group(monkeypatch):
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    run = Run.objects.create(name="job")
    local = Host.objects.get(name="local")
    for rank in range(3):
        RunProcess.objects.create(run=run, host=local, pid=100 + rank, role=f"rank-{rank}")
    group = jobs.capture_group_create(user=None, run=run)
    mixes = [(30, 10), (31, 11), (2, 70)]
    for capture, (launch, sync) in zip(group.captures.order_by("pid"), mixes, strict=True):
        capture.status = "done"
        capture.stats = {
            "total_samples": 100,
            "categories": [
                {"category": "launch", "samples": launch, "percent": launch},
                {"category": "sync", "samples": sync, "percent": sync},
            ],
        }
        # The stored tree holds what the stats say: launch and sync frames under a step.
        tree = _tree(f"<b>step</b> rank {capture.pid}", 100)
        tree["children"][0]["children"][0]["children"] = [
            {"name": "cuLaunchKernel (libcuda.so.1)", "value": launch, "children": []},
            {"name": "cuStreamSynchronize (libcuda.so.1)", "value": sync, "children": []},
        ]
        capture.flamegraph_file.save(
            "fg.json.gz", ContentFile(gzip.compress(json.dumps(tree).encode()))
        )
        capture.gpu_samples = _gpu_timeline(busy=capture.pid != 102)
        capture.save()
    return group


def page_data(response) -> dict:
    html = response.content.decode()
    return json.loads(
        html.split('id="group-data" type="application/json">')[1].split("</script>")[0]
    )


def test_the_group_page_shows_each_process_and_no_verdict_from_category_shares(
    teammate_client, group
):
    response = teammate_client.get(reverse("profiles:group_detail", args=[group.pk]))
    assert response.status_code == 200
    data = page_data(response)
    assert [row["label"] for row in data["rows"]] == [
        "local:100 rank-0",
        "local:101 rank-1",
        "local:102 rank-2",
    ]
    # rank-2's sync share is far from the others', but a category lens says what a rank
    # does less as readily as what it does more: the verdict is the stored straggler's.
    assert "differs_most" not in data
    assert [p["gpu"]["gpus"][0]["index"] for p in data["processes"]] == [0, 0, 0]


def test_the_processes_table_speaks_states_of_the_step_threads_not_the_keyword_lens(
    teammate_client, group
):
    """Idle queue-feeder threads put "python queue" at 66.7% on every rank in the keyword
    lens; the table shows what "What the job says" shows: the step threads' states."""
    for capture in group.captures.order_by("pid"):
        collective = 40.0 if capture.pid != 102 else 10.0
        capture.stats = {
            **capture.stats,
            "categories": [{"category": "python queue", "samples": 67, "percent": 66.7}],
            "step_threads": {
                "tids": ["11"],
                "names": ["MainThread"],
                "detected_by": "collective",
                "samples": 100,
                "states": [
                    {"state": "compute", "samples": 100 - collective, "percent": 100 - collective},
                    {"state": "collective", "samples": collective, "percent": collective},
                ],
            },
        }
        capture.save()
    data = teammate_client.get(f"/api/groups/{group.pk}/live/").json()
    assert data["states"] == ["compute", "collective"] and "categories" not in data
    assert [row["states"] for row in data["rows"]] == [
        {"compute": 60.0, "collective": 40.0},
        {"compute": 60.0, "collective": 40.0},
        {"compute": 90.0, "collective": 10.0},
    ]
    assert all("shares" not in row for row in data["rows"])


def test_a_failed_process_shows_no_numbers_only_its_cause(teammate_client, group):
    failed = group.captures.order_by("pid").last()
    failed.status, failed.stats = "failed", None
    failed.error, failed.error_cause = "no process with that PID on the host", "no_such_pid"
    # Claimed and ended like a real failure, so it has a wall time that must not show.
    failed.started_at = timezone.now() - timezone.timedelta(seconds=2)
    failed.finished_at = timezone.now()
    failed.save()
    assert failed.wall_s
    data = teammate_client.get(f"/api/groups/{group.pk}/live/").json()
    row = data["rows"][2]
    assert (row["samples"], row["elapsed_s"], row["behind_s"], row["states"]) == (
        None,
        None,
        None,
        {},
    )
    assert row["has_samples"] is False and row["error_cause"] == "no_such_pid"
    assert row["error"] == "no process with that PID on the host"


def test_a_running_process_shows_elapsed_lag_and_estimated_samples(teammate_client, group):
    running = group.captures.order_by("pid").first()
    running.status, running.stats = "running", None
    running.sampling_started_at = timezone.now() - timezone.timedelta(seconds=4.2)
    running.progress = {"elapsed_s": 4.2, "duration_s": 30, "behind_s": 1.3, "expected_samples": 58}
    running.save()
    data = teammate_client.get(f"/api/groups/{group.pk}/live/").json()
    row = data["rows"][0]
    assert (row["status"], row["elapsed_s"], row["behind_s"]) == ("running", 4.2, 1.3)
    assert (row["samples"], row["samples_estimated"], row["final"]) == (None, 58, False)
    assert row["attaching"] is False
    assert data["final"] is False and data["report"]["ready"] is False


def test_a_process_py_spy_has_not_attached_to_reads_attaching_and_holds_the_skew(
    teammate_client, group
):
    attaching = group.captures.order_by("pid").first()
    attaching.status, attaching.stats = "running", None
    attaching.progress = {"sampling": False, "elapsed_s": 0.0, "duration_s": 10,
                          "behind_s": 0.0, "expected_samples": 0}  # fmt: skip
    attaching.save()
    others = group.captures.exclude(pk=attaching.pk)
    started = timezone.now()
    others.update(sampling_started_at=started)
    data = teammate_client.get(f"/api/groups/{group.pk}/live/").json()
    row = data["rows"][0]
    assert row["attaching"] is True and row["status"] == "running"
    assert data["start_skew_s"] is None  # not before every process has started
    assert teammate_client.get(f"/api/groups/{group.pk}/").json()["start_skew_s"] is None
    attaching.sampling_started_at = started + timezone.timedelta(seconds=0.4)
    attaching.save()
    data = teammate_client.get(f"/api/groups/{group.pk}/live/").json()
    assert data["rows"][0]["attaching"] is False
    assert data["start_skew_s"] == pytest.approx(0.4, abs=0.1)


def test_a_done_row_keeps_its_last_rounds_estimate_beside_the_sample_count(teammate_client, group):
    done = group.captures.order_by("pid").first()
    done.progress = {"elapsed_s": 9.6, "expected_samples": 48, "sampled_s": 9.8}
    done.save()
    row = teammate_client.get(f"/api/groups/{group.pk}/live/").json()["rows"][0]
    assert (row["samples"], row["rounds_estimated"]) == (100, 48)


def test_a_done_process_shows_the_seconds_its_pyspy_sampled_not_its_wall_time(
    teammate_client, group
):
    done, legacy = group.captures.order_by("pid")[:2]
    for capture in (done, legacy):  # claimed 14 s before it ended: connect, sample, parse
        capture.started_at = timezone.now() - timezone.timedelta(seconds=14)
        capture.finished_at = timezone.now()
    done.progress = {"elapsed_s": 9.4, "duration_s": 10, "sampled_s": 9.4}
    for capture in (done, legacy):
        capture.save()
    rows = {r["id"]: r for r in teammate_client.get(f"/api/groups/{group.pk}/live/").json()["rows"]}
    assert rows[done.pk]["elapsed_s"] == 9.4
    # A capture recorded before spans were kept still shows its claim-to-finish time.
    assert rows[legacy.pk]["elapsed_s"] == pytest.approx(14, abs=0.5)


def test_the_live_json_needs_a_login(client, group):
    assert client.get(f"/api/groups/{group.pk}/live/").status_code in (401, 403)


def test_the_group_page_needs_a_login(client, group):
    response = client.get(reverse("profiles:group_detail", args=[group.pk]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_merged_flamegraph_puts_each_process_under_its_own_node(teammate_client, group):
    tree = teammate_client.get(f"/api/groups/{group.pk}/flamegraph/").json()
    assert tree["value"] == 300
    assert sorted(c["name"] for c in tree["children"]) == [
        "process local:100 rank-0",
        "process local:101 rank-1",
        "process local:102 rank-2",
    ]
    first = Capture.objects.filter(group=group).order_by("pid").first()
    only = teammate_client.get(f"/api/groups/{group.pk}/flamegraph/?capture={first.pk}").json()
    assert only["value"] == 100 and len(only["children"]) == 1


def test_the_group_page_queries_stay_bounded(teammate_client, group, django_assert_max_num_queries):
    with django_assert_max_num_queries(12):
        teammate_client.get(reverse("profiles:group_detail", args=[group.pk]))
    with django_assert_max_num_queries(10):
        teammate_client.get(f"/api/groups/{group.pk}/live/")


def test_the_page_shows_the_stored_report_of_a_real_straggler_job_with_links(
    teammate_client, monkeypatch
):
    group, ids = record_group(monkeypatch, "straggler")
    report = page_data(teammate_client.get(reverse("profiles:group_detail", args=[group.pk])))[
        "report"
    ]
    assert report["ready"] is True
    assert report["straggler"]["name"] == "rank-3"
    assert report["findings"][0]["rule"] == "straggler"
    assert len(report["classes"]) >= 2 and "rank 3" in report["classes"][-1]["label"]
    assert [r["name"] for r in report["ranks"]] == ["rank-0", "rank-1", "rank-2", "rank-3"]
    assert report["urls"]["rank-3"] == f"/captures/{ids[3]}/"
    rank3 = report["ranks"][3]
    assert rank3["url"] == f"/captures/{ids[3]}/" and rank3["step_threads"] == ["trainer"]
    assert sum(s["samples"] for s in rank3["states"]) == rank3["samples"]
    assert all(len(s["user_callers"]) <= 1 for s in rank3["states"])


def test_the_page_and_the_api_name_the_wait_model_of_the_report(teammate_client, monkeypatch):
    """A gloo (CPU) job: collectives block the host, so the report counts them alone."""
    group, _ = record_group(monkeypatch, "straggler")
    api = teammate_client.get(f"/api/groups/{group.pk}/").json()
    assert api["wait_model"]["kind"] == "blocking"
    assert api["wait_model"]["waiting_states"] == ["collective"]
    page = teammate_client.get(reverse("profiles:group_detail", args=[group.pk])).content.decode()
    assert "Wait model: <strong>blocking</strong>" in page
    assert api["wait_model"]["explanation"].split(":")[0] in page


def test_the_page_reads_the_report_as_stored_and_never_reclassifies(teammate_client, monkeypatch):
    """Edit the stored report and the page follows it: nothing is recomputed on view,
    whatever the keyword sets or rules say today."""
    group, _ = record_group(monkeypatch, "straggler")
    stored = CaptureGroup.objects.get(pk=group.pk).job_report
    stored["straggler"]["name"] = "rank-1"
    CaptureGroup.objects.filter(pk=group.pk).update(job_report=stored)
    data = teammate_client.get(f"/api/groups/{group.pk}/live/").json()
    assert data["report"]["straggler"]["name"] == "rank-1"


def test_no_verdict_while_a_rank_is_still_running_only_the_reason(teammate_client, group):
    running = group.captures.order_by("pid").first()
    running.status, running.stats = "running", None
    running.save()
    report = teammate_client.get(f"/api/groups/{group.pk}/live/").json()["report"]
    assert report == {
        "ready": False,
        "ended": False,
        "reason": "1 of 3 ranks have not ended: no verdict until every rank's samples are analysed",
        "failed": False,
    }


def test_ranks_that_did_not_sample_the_same_window_are_flagged_on_the_report(
    teammate_client, monkeypatch
):
    from profiles.jobs import selectors as group_selectors

    group, _ = record_group(monkeypatch, "straggler")
    real = group_selectors.jobs.group_summary
    monkeypatch.setattr(
        group_selectors.jobs, "group_summary", lambda g: {**real(g), "start_skew_s": 3.2}
    )
    report = teammate_client.get(f"/api/groups/{group.pk}/live/").json()["report"]
    assert (report["same_window"], report["start_skew_s"]) == (False, 3.2)
    assert report["straggler"]["name"] == "rank-3"  # stored; the page adds the caveat


@pytest.mark.parametrize(("skew_s", "same"), [(1.0, True), (1.5, False), (None, False)])
def test_the_same_window_means_starts_within_one_second(skew_s, same):
    from profiles.jobs.selectors import same_window

    assert same_window(skew_s) is same


def test_capture_all_skips_exited_processes_and_the_group_page_says_so(owner_client, monkeypatch):
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    run = Run.objects.create(name="job-x")
    local = Host.objects.get(name="local")
    RunProcess.objects.create(run=run, host=local, pid=300, role="rank-0", alive=True)
    RunProcess.objects.create(run=run, host=local, pid=301, role="rank-1", alive=False)
    RunProcess.objects.create(run=run, host=local, pid=302, role="rank-2")
    response = owner_client.post(f"/api/runs/{run.pk}/capture/", {}, "application/json")
    assert response.status_code == 201
    group_id = response.json()["id"]
    assert sorted(Capture.objects.filter(group_id=group_id).values_list("pid", flat=True)) == [
        300,
        302,
    ]
    page = owner_client.get(reverse("profiles:group_detail", args=[group_id]))
    assert page_data(page)["skipped"][0]["label"] == "local:301 (rank-1)"
    assert "Skipped 1 process that had exited: local:301 (rank-1)." in page.content.decode()


def test_capture_all_of_a_run_whose_processes_all_exited_is_a_409(owner_client):
    run = Run.objects.create(name="job-y")
    RunProcess.objects.create(run=run, host=Host.objects.get(name="local"), pid=9, alive=False)
    response = owner_client.post(f"/api/runs/{run.pk}/capture/", {}, "application/json")
    # The run's state refuses it, not the body's shape (docs/api.md, "Errors").
    assert response.status_code == 409 and "exited" in response.json()["detail"]


def test_a_64_rank_group_page_stays_bounded_in_queries_and_time(
    teammate_client, monkeypatch, django_assert_max_num_queries, capsys
):
    import time

    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    run = Run.objects.create(name="job-64")
    local = Host.objects.get(name="local")
    RunProcess.objects.bulk_create(
        RunProcess(run=run, host=local, pid=1000 + r, role=f"rank-{r:02d}") for r in range(64)
    )
    group = jobs.capture_group_create(user=None, run=run)
    for n, capture in enumerate(group.captures.order_by("pid")):
        _store(capture, (400, 10) if n == 17 else (100, 250))
    # Stored as the last rank's analysis stores it (the stats are the engine's).
    assert group_report.group_report_update(group_id=group.pk) is not None
    teammate_client.get(f"/api/groups/{group.pk}/live/")  # warm: URL resolver, templates
    with django_assert_max_num_queries(10):
        start = time.monotonic()
        response = teammate_client.get(f"/api/groups/{group.pk}/live/")
        elapsed = time.monotonic() - start
    data = response.json()
    with capsys.disabled():
        print(f"\ngroup live JSON, 64 done ranks: {elapsed * 1000:.0f} ms")
    assert data["report"]["straggler"]["name"] == "rank-17"
    assert len(data["report"]["ranks"]) == 64 and len(data["report"]["classes"]) == 2
    assert len(response.content) < 80_000  # states with samples, one call site each


def _store(capture, mix) -> None:
    compute, nccl = mix
    step = "thread (1): MainThread;train (train.py:40);step (train.py:12)"
    lines = [
        f"{step};forward (model.py:88);cuLaunchKernel (libcuda.so.1) {compute}",
        f"{step};all_reduce (distributed.py:2050);ncclAllReduce (libnccl.so.2);"
        f"pthread_cond_wait (libc.so.6) {nccl}",
    ]
    stats = pyspy.analyze(pyspy.parse_raw_lines(lines))
    stats.pop("flamegraph")
    capture.status, capture.stats = "done", stats
    capture.save()
