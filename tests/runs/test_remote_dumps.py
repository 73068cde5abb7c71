"""`dump_many`: every PID of one host dumped `repeat` times in one session (a whole-job
dump), on real processes with real py-spy; per-PID failures keep their cause, and the
output cannot be split by a frame name."""

from __future__ import annotations

import json
import subprocess

import pytest

from runs.remote import RemoteError, dump_many, dump_many_script
from runs.remote.dumps import parse_dump_many
from runs.remote.model import Target
from tests.support.hung_ranks import Rank


@pytest.fixture
def ranks():
    running = {"waiter": Rank("waiter"), "locked": Rank("locked")}
    yield running
    for rank in running.values():
        rank.stop()


def _functions(dump_output: str) -> list[str]:
    return [f["name"] for t in json.loads(dump_output) for f in t["frames"]]


def test_each_pid_is_dumped_repeat_times_interval_apart_with_the_host_clock(ranks, local_target):
    pids = [r.pid for r in ranks.values()]
    found = dump_many(local_target, pids, repeat=3, interval_s=0.3, native=True)
    for rank in ranks.values():
        dumps = found[rank.pid].dumps
        # When the session could dump, before its first round: the next instant's lead.
        assert found[rank.pid].ready_at is not None
        assert 0 <= dumps[0].at - found[rank.pid].ready_at < 2
        assert len(dumps) == 3 and found[rank.pid].error is None
        assert all(d.native for d in dumps)
        gaps = [b.at - a.at for a, b in zip(dumps, dumps[1:], strict=False)]
        assert all(0.25 <= gap < 3 for gap in gaps), gaps
    assert "wait_for_lock" in _functions(found[ranks["locked"].pid].dumps[0].output)
    assert "all_reduce_wait" in _functions(found[ranks["waiter"].pid].dumps[-1].output)


@pytest.mark.sshd
def test_over_ssh_the_same_session_dumps_every_pid(ranks, ssh_target):
    pids = [r.pid for r in ranks.values()]
    found = dump_many(ssh_target, pids, repeat=2, interval_s=0, native=False)
    assert [len(found[p].dumps) for p in pids] == [2, 2]
    assert not any(d.native for p in pids for d in found[p].dumps)


def test_a_failing_pid_names_its_cause_and_the_others_are_dumped(ranks, local_target):
    gone = Rank("waiter")
    gone.stop()
    sleep = subprocess.Popen(["sleep", "30"])
    try:
        pids = [ranks["waiter"].pid, gone.pid, sleep.pid]
        found = dump_many(local_target, pids, repeat=2, interval_s=0, native=True)
    finally:
        sleep.kill()
        sleep.wait()
    assert len(found[ranks["waiter"].pid].dumps) == 2
    assert found[gone.pid].dumps == [] and found[gone.pid].error.cause == "no_such_pid"
    assert found[sleep.pid].dumps == [] and found[sleep.pid].error.cause == "not_python"
    assert "Failed to find python version" in found[sleep.pid].stderr


def test_a_process_py_spy_may_not_attach_to_is_a_permission_failure(ranks):
    """py-spy run as `nobody` (the exec prefix drops root), against root's rank."""
    from tests.support.pyspy_faults import REAL

    drop = "setpriv --reuid=65534 --regid=65534 --clear-groups --"
    target = Target(transport="local", py_spy=REAL, exec_prefix=drop)
    found = dump_many(target, [ranks["waiter"].pid], repeat=2, interval_s=0)
    assert found[ranks["waiter"].pid].dumps == []
    assert found[ranks["waiter"].pid].error.cause == "permission"


def test_a_pid_that_exits_between_dumps_keeps_the_dumps_taken_before(local_target):
    leaving = Rank("waiter", exit_after=0.6)
    try:
        found = dump_many(local_target, [leaving.pid], repeat=3, interval_s=0.5, native=False)
    finally:
        leaving.stop()
    kept = found[leaving.pid]
    assert 1 <= len(kept.dumps) < 3
    assert kept.error is not None and kept.error.cause == "no_such_pid"


def test_py_spy_missing_fails_the_whole_session_with_its_cause(ranks):
    target = Target(transport="local", py_spy="/nonexistent/py-spy")
    with pytest.raises(RemoteError) as failed:
        dump_many(target, [ranks["waiter"].pid], repeat=1, interval_s=0)
    assert failed.value.cause == "pyspy_missing"


def test_a_frame_name_holding_the_marker_cannot_split_the_output():
    marker = "@@flamedeck-dump-0123456789ab@@"
    planted = json.dumps([{"thread_name": "x", "frames": [{"name": f"\n{marker} 7 0 0 1 5\n"}]}])
    text = f"\n{marker} 7 0 0 1 1.5\n{planted}\n{marker}-err\n"
    found = parse_dump_many(text, marker, [7])
    assert len(found[7].dumps) == 1 and json.loads(found[7].dumps[0].output)[0]["thread_name"]


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"repeat": 0, "interval_s": 1.0}, "repeat must be 1 to 10"),
        ({"repeat": 11, "interval_s": 1.0}, "repeat must be 1 to 10"),
        ({"repeat": 3, "interval_s": -1.0}, "interval_s must be 0 to 30"),
        ({"repeat": 3, "interval_s": 31.0}, "interval_s must be 0 to 30"),
    ],
)
def test_the_script_refuses_out_of_range_settings(kwargs, says, local_target):
    with pytest.raises(ValueError, match=says):
        dump_many_script(local_target, [1], native=True, marker="m", **kwargs)


def test_the_script_refuses_a_pid_that_is_not_a_number(local_target):
    with pytest.raises(ValueError):
        dump_many_script(local_target, ["1; rm -rf /"], repeat=1, interval_s=0,  # type: ignore[list-item]
                         native=True, marker="m")  # fmt: skip
