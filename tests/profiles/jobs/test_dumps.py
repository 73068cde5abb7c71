"""A whole-job dump through the API: the request and its limits, the captures it
queues, and the group's `stacks` once the last rank's dumps are stored (the remote seam
swapped for real `py-spy dump --json` outputs of a hung gloo job, tests/data/dumps)."""

import pytest

from profiles.captures import enqueue
from profiles.models import Capture, CaptureGroup
from runs.models import Host, Run, RunProcess

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(monkeypatch):
    sent = []
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: sent.append(group.pk))
    return sent


@pytest.fixture
def hung_run():
    run = Run.objects.create(name="hung", status="running")
    local = Host.objects.get(name="local")
    for rank in range(4):
        RunProcess.objects.create(run=run, host=local, pid=2000 + rank, role=f"rank-{rank}")
    return run


def _ask(client, run, body):
    return client.post(f"/api/runs/{run.pk}/capture/", body, "application/json")


def test_dump_all_ranks_queues_one_dump_per_process_and_answers_a_pending_group(
    owner_client, hung_run, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        answer = _ask(owner_client, hung_run, {"kind": "dump", "repeat": 4, "interval": 0.5})
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert (body["kind"], body["report_status"], body["stacks"]) == ("dump", "pending", None)
    assert (body["repeat"], body["interval"]) == (4, 0.5)
    group = CaptureGroup.objects.get(pk=body["id"])
    assert queued == [group.pk]
    assert (group.kind, group.dump_repeat, group.dump_interval_s) == ("dump", 4, 0.5)
    kinds = set(Capture.objects.filter(group=group).values_list("kind", flat=True))
    assert kinds == {"dump"} and group.captures.count() == 4


def test_a_dump_defaults_to_three_dumps_one_second_apart(owner_client, hung_run, queued):
    body = _ask(owner_client, hung_run, {"kind": "dump"}).json()
    assert (body["repeat"], body["interval"]) == (3, 1.0)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "dump", "repeat": 0}, "repeat"),
        ({"kind": "dump", "repeat": 11}, "repeat"),
        ({"kind": "dump", "repeat": "many"}, "repeat"),
        ({"kind": "dump", "interval": -1}, "interval"),
        ({"kind": "dump", "interval": 31}, "interval"),
        ({"kind": "dump", "repeat": 10, "interval": 5}, "interval"),  # 45 s in all
        ({"kind": "flame"}, "kind"),
        ({"kind": ["dump"]}, "kind"),
    ],
)
def test_a_dump_request_out_of_bounds_is_a_400_naming_the_field_and_queues_nothing(
    owner_client, hung_run, queued, body, field
):
    answer = _ask(owner_client, hung_run, body)
    assert answer.status_code == 400, answer.content
    assert field in answer.json()
    assert not CaptureGroup.objects.exists() and queued == []


def test_a_viewer_may_not_dump_the_ranks(teammate_client, hung_run, queued):
    assert _ask(teammate_client, hung_run, {"kind": "dump"}).status_code == 403
    assert not CaptureGroup.objects.exists()


def test_a_record_group_says_its_kind_and_carries_no_stacks(owner_client, hung_run, queued):
    body = _ask(owner_client, hung_run, {}).json()
    assert body["kind"] == "record" and "stacks" not in body


# --- the worker side, with the remote seam swapped ----------------------------------


def _py_spy_json(frames: list[tuple[str, str, int]], active: bool = False) -> str:
    """`py-spy dump --json` of a process whose main thread stands at `frames`
    (innermost first: function, file, line)."""
    import json

    return json.dumps([{
        "pid": 1, "thread_id": 1, "thread_name": "MainThread", "os_thread_id": 1,
        "active": active, "owns_gil": False,
        "frames": [{"name": n, "filename": f"/job/{f}", "module": None, "short_filename": f,
                    "line": line, "locals": None, "is_entry": False} for n, f, line in frames],
    }])  # fmt: skip


WAITING = [("all_reduce", "distributed_c10d.py", 3252), ("main", "train.py", 93)]
LOCKED = [("wait_for_lock", "train.py", 62), ("main", "train.py", 90)]


def test_the_last_rank_stored_makes_the_groups_stacks_and_failures_stay_on_their_rank(
    owner_client, hung_run, monkeypatch, django_capture_on_commit_callbacks
):
    from profiles.jobs import pipeline as group_pipeline
    from runs import remote

    pids = sorted(hung_run.processes.values_list("pid", flat=True))
    starts = []

    def fake_dump_many(target, asked, *, repeat, interval_s, native=True, start_at=None):
        assert (asked, repeat, interval_s) == (pids, 3, 1.0)
        starts.append(start_at)
        found = {pid: remote.PidDumps() for pid in asked}
        for pid in pids[:2]:
            found[pid].dumps = [remote.Dump(_py_spy_json(WAITING), 10.0 + i, True)
                                for i in range(3)]  # fmt: skip
        found[pids[2]].dumps = [remote.Dump(_py_spy_json(LOCKED), 10.0 + i, True) for i in range(2)]
        found[pids[2]].error = remote.RemoteError("no_such_pid")
        found[pids[3]].error = remote.RemoteError("not_python")
        found[pids[3]].stderr = "Error: Failed to find python version from target process"
        return found

    monkeypatch.setattr(remote, "dump_many", fake_dump_many)
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    group_id = _ask(owner_client, hung_run, {"kind": "dump"}).json()["id"]
    ids = list(
        Capture.objects.filter(group_id=group_id).order_by("pid").values_list("pk", flat=True)
    )
    host_id = Capture.objects.get(pk=ids[0]).host_id
    with django_capture_on_commit_callbacks(execute=True):
        parsing = group_pipeline.host_captures_execute(
            group_id=group_id, host_id=host_id, capture_ids=ids
        )
    assert parsing == []  # each rank was analysed in the host's task
    group = CaptureGroup.objects.get(pk=group_id)
    assert starts == [pytest.approx(group.start_by.timestamp())]  # the group's instant
    verdict = group.stacks["verdict"]
    assert verdict["kind"] == "stuck" and verdict["odd"] == ["rank-2"]
    assert verdict["user_frame"] == "wait_for_lock (train.py:62)"
    assert group.stacks["failed"] == [{"rank": "rank-3", "cause": "not_python",
                                       "error": remote.model.MESSAGES["not_python"]}]  # fmt: skip
    ranks = {c.process.role: c for c in Capture.objects.filter(group=group)}
    assert ranks["rank-2"].status == "done" and "2 of 3 dumps" in ranks["rank-2"].note
    assert len(ranks["rank-0"].stats["dump_series"]) == 3
    assert ranks["rank-3"].status == "failed" and ranks["rank-3"].error_cause == "not_python"
    body = owner_client.get(f"/api/groups/{group_id}/").json()
    assert body["report_status"] == "stored" and body["stacks"]["verdict"] == verdict
    page = owner_client.get(f"/groups/{group_id}/")
    assert page.status_code == 200 and b"Whole-job dump" in page.content


def test_a_hosts_ranks_ask_for_the_groups_report_once_and_keep_their_session_lead(
    owner_client, hung_run, monkeypatch, django_capture_on_commit_callbacks
):
    from profiles.jobs import pipeline as group_pipeline
    from profiles.jobs import report as group_report
    from runs import remote

    pids = sorted(hung_run.processes.values_list("pid", flat=True))
    ready_after_s = 0.8

    def fake_dump_many(target, asked, *, repeat, interval_s, native=True, start_at=None):
        group = CaptureGroup.objects.get(pk=group_id)
        ready = group.created_at.timestamp() + ready_after_s
        return {pid: remote.PidDumps([remote.Dump(_py_spy_json(WAITING), start_at, True)],
                                     ready_at=ready) for pid in asked}  # fmt: skip

    asked = []
    real_update = group_report.group_report_update

    def counted(*, group_id):
        asked.append(group_id)
        return real_update(group_id=group_id)

    monkeypatch.setattr(group_report, "group_report_update", counted)
    monkeypatch.setattr(remote, "dump_many", fake_dump_many)
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    group_id = _ask(owner_client, hung_run, {"kind": "dump", "repeat": 1}).json()["id"]
    ids = list(Capture.objects.filter(group_id=group_id).values_list("pk", flat=True))
    host_id = Capture.objects.get(pk=ids[0]).host_id
    with django_capture_on_commit_callbacks(execute=True):
        group_pipeline.host_captures_execute(group_id=group_id, host_id=host_id, capture_ids=ids)
    assert len(pids) == 4 and asked == [group_id]  # once for the host, not once a rank
    assert CaptureGroup.objects.get(pk=group_id).stacks["verdict"]["kind"]
    leads = [c.progress["dump_lead_s"] for c in Capture.objects.filter(group_id=group_id)]
    assert leads == [pytest.approx(ready_after_s, abs=0.002)] * len(pids)
