"""A whole-job dump ("Dump all ranks") of a hung job across two real sshd "hosts" on
loopback, through the API, a real worker and real py-spy: the verdict names the rank
that stands apart and where, and py-spy's failures on some ranks (a rank that exits
between dumps, a PID that is gone, a process that is not Python, a process py-spy may
not attach to) name their cause on that rank and leave the others' verdict intact.

The ranks are plain-Python stand-ins (tests/support/hung_ranks.py); the real gloo hangs
are in test_dumps_torch.py."""

import subprocess
import time

import pytest

from profiles.models import Capture, CaptureGroup
from runs.models import Host, Run, RunProcess
from tests.support import hung_ranks
from tests.support.hung_ranks import Rank
from tests.support.worker import WorkerProcess

pytestmark = [pytest.mark.services, pytest.mark.sshd, pytest.mark.django_db(transaction=True)]


# node-c is node-a's sshd again, but its exec prefix drops root before py-spy runs: py-spy
# as `nobody` may not attach to root's rank (ptrace denied), as in a container without
# SYS_PTRACE.
DROP_ROOT = "setpriv --reuid=65534 --regid=65534 --clear-groups --"
HOSTS = {"node-a": ("node-a", ""), "node-b": ("node-b", ""), "node-c": ("node-a", DROP_ROOT)}


def _run(ranks_by_host: dict[str, list[tuple[str, int]]]) -> Run:
    py_spy = Host.objects.get(name="local").py_spy
    run = Run.objects.create(name="hung-job", status="running")
    for node, ranks in ranks_by_host.items():
        address, prefix = HOSTS[node]
        host = Host.objects.create(
            name=node, transport="ssh", address=address, exec_prefix=prefix, py_spy=py_spy
        )
        for role, pid in ranks:
            RunProcess.objects.create(run=run, host=host, pid=pid, role=role)
    return run


def _lines_of(function) -> range:
    import inspect

    lines, first = inspect.getsourcelines(function)
    return range(first, first + len(lines))


def _wait_for_report(group_id: int, timeout_s: float) -> CaptureGroup:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        group = CaptureGroup.objects.get(pk=group_id)
        if group.stacks is not None or group.report_error:
            return group
        time.sleep(0.2)
    raise AssertionError(f"no stacks after {timeout_s} s")


def test_dump_all_ranks_names_the_rank_that_stands_apart_and_each_failure_on_its_rank(
    two_hosts, tmp_path, owner_client
):
    _, config = two_hosts
    worker = WorkerProcess(tmp_path / "w.log", env={"FLAMEDECK_SSH_CONFIG": str(config)})
    waiters = [Rank("waiter") for _ in range(3)]
    # rank-4 exits 3.5 s after it starts, just before the request: after the first
    # dump (at most a few seconds in) and before the third (at least 4 s in).
    locked, leaving = Rank("locked"), Rank("waiter", exit_after=3.5)
    not_python = subprocess.Popen(["sleep", "60"])
    gone = Rank("waiter")
    gone.stop()
    denied = Rank("waiter")  # root's, dumped by py-spy as nobody (node-c)
    run = _run({
        "node-a": [("rank-0", waiters[0].pid), ("rank-1", waiters[1].pid), ("rank-2", locked.pid)],
        "node-b": [("rank-3", waiters[2].pid), ("rank-4", leaving.pid),
                   ("rank-5", not_python.pid), ("rank-6", gone.pid)],
        "node-c": [("rank-7", denied.pid)],
    })  # fmt: skip
    try:
        asked = time.monotonic()
        answer = owner_client.post(
            f"/api/runs/{run.pk}/capture/",
            {"kind": "dump", "repeat": 3, "interval": 2},
            content_type="application/json",
        )
        assert answer.status_code == 201, answer.content
        group = _wait_for_report(answer.json()["id"], timeout_s=60)
        took = time.monotonic() - asked
    finally:
        worker.stop()
        for rank in [*waiters, locked, leaving, denied]:
            rank.stop()
        not_python.kill()
        not_python.wait()
    print(f"verdict {took:.1f} s after the request")
    assert group.report_error == ""
    verdict = group.stacks["verdict"]
    assert verdict["kind"] == "stuck", verdict
    assert verdict["odd"] == ["rank-2"], verdict
    print(verdict["explanation"])
    function, _, line = verdict["user_frame"].rstrip(")").rpartition(":")
    assert function == "wait_for_lock (tests/support/hung_ranks.py", verdict
    assert int(line) in _lines_of(hung_ranks.wait_for_lock)
    assert verdict["state"] == "idle"
    said = verdict["explanation"]
    assert said.startswith("rank-2 stands in `wait_for_lock"), said
    assert "while ranks 0-1, 3-4 stand in `all_reduce_wait" in said, said
    assert "no step thread moved across 3 dumps" in said and "rank-4 gave" in said
    (biggest, *_) = group.stacks["classes"]
    assert sorted(biggest["ranks"]) == ["rank-0", "rank-1", "rank-3", "rank-4"]
    assert biggest["moving"] is False
    failed = {f["rank"]: f for f in group.stacks["failed"]}
    assert failed["rank-5"]["cause"] == "not_python", failed
    assert failed["rank-6"]["cause"] == "no_such_pid", failed
    assert sorted(failed) == ["rank-5", "rank-6", "rank-7"], failed
    assert failed["rank-7"]["cause"] == "permission", failed
    assert "may not attach" in failed["rank-7"]["error"], failed  # the cause, then the fix:
    assert "SYS_PTRACE" in failed["rank-7"]["error"], failed
    by_role = {c.process.role: c for c in Capture.objects.filter(group=group)}
    assert by_role["rank-5"].status == by_role["rank-6"].status == "failed"
    assert by_role["rank-7"].status == "failed" and by_role["rank-7"].error_cause == "permission"
    kept = by_role["rank-4"]
    assert kept.status == "done" and len(kept.stats["dump_series"]) < 3, kept.note
    assert "of 3 dumps" in kept.note and "no_such_pid" not in kept.note
    assert len(by_role["rank-0"].stats["dump_series"]) == 3
    body = owner_client.get(f"/api/groups/{group.pk}/").json()
    assert body["kind"] == "dump" and body["report_status"] == "stored"
    assert body["stacks"]["verdict"] == verdict
