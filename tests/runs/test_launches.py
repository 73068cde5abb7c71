"""A run is one job across its launches (runs.launches): a role registered again from
another PID retires the old process when it has exited or its launch differs, and
"Capture all" takes only the current process of each role. Real processes (sleepers)
on the local host; tests/runs/test_launches_torch.py does the same with gloo ranks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from profiles.captures import enqueue
from profiles.captures import selectors as profile_selectors
from profiles.jobs import report as group_report
from profiles.jobs import selectors as group_selectors
from profiles.jobs import services as jobs
from runs import launches, selectors, services
from runs.models import Host, Run, RunProcess

pytestmark = pytest.mark.django_db


@pytest.fixture
def local():
    return Host.objects.get(name="local")


class Ranks:
    """Real sleeping processes standing in for a launch's ranks."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, count: int) -> list[int]:
        started = [
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            for _ in range(count)
        ]
        self.procs += started
        return [p.pid for p in started]

    def stop(self, pids: list[int]) -> None:
        for proc in self.procs:
            if proc.pid in pids:
                proc.kill()
                proc.wait()


@pytest.fixture
def ranks():
    made = Ranks()
    yield made
    made.stop([p.pid for p in made.procs])


def register(local: Host, pids: list[int], launch: str = "", run: str = "job") -> Run:
    for rank, pid in enumerate(pids):
        found, _, _ = services.run_register(
            user=None, run_name=run, host=local, pid=pid, role=f"rank-{rank}", launch=launch
        )
    return found


def current_pids(run: Run) -> list[int]:
    return sorted(p.pid for p in selectors.capturable_processes(run=run)[0])


def test_a_relaunch_after_the_ranks_exited_replaces_them_in_a_second_launch(local, ranks):
    first = ranks.start(2)
    run = register(local, first)
    ranks.stop(first)
    second = ranks.start(2)
    assert register(local, second) == run
    assert current_pids(run) == sorted(second)
    old = run.processes.get(pid=first[0])
    assert old.replaced_at is not None and old.replaced_by.pid == second[0]
    assert old.launch.number == 1 and old.replaced_by.launch.number == 2
    assert selectors.capture_all_plan(run=run)["skipped"] == []  # replaced: history, not skipped
    group = jobs.capture_group_create(user=None, run=run, duration=5, rate=20)
    assert sorted(group.captures.values_list("pid", flat=True)) == sorted(second)
    # The exited ranks of launch 1 are history, not "skipped" on the new capture's page.
    assert group_selectors.skipped_processes(group) == []


def relaunched(local: Host, ranks: Ranks, how: str) -> tuple[Run, list[int], list[int]]:
    """(run, launch 1's PIDs, launch 2's PIDs): 3 ranks, relaunched either after they
    exited, or under another launch key while launch 1's processes still run (a
    liveness check alone would capture those)."""
    first = ranks.start(3)
    run = register(local, first, launch="" if how == "exited" else "a")
    if how == "exited":
        ranks.stop(first)
    second = ranks.start(3)
    assert register(local, second, launch="" if how == "exited" else "b") == run
    replaced = run.processes.filter(replaced_at__isnull=False)
    assert sorted(replaced.values_list("pid", flat=True)) == sorted(first)
    return run, first, second


def captured(group) -> tuple[list[int], set[str], set[int]]:
    """(PIDs, roles, launch numbers) of a group's captures, through their processes."""
    rows = list(group.captures.values_list("pid", "process__role", "process__launch__number"))
    assert not group.captures.filter(process__replaced_at__isnull=False).exists()
    assert not group.captures.filter(process__isnull=True).exists()
    return sorted(r[0] for r in rows), {r[1] for r in rows}, {r[2] for r in rows}


@pytest.mark.parametrize("how", ["exited", "launch key"])
def test_dump_all_ranks_takes_only_the_current_process_of_each_role(
    owner_client, local, ranks, monkeypatch, how
):
    run, first, second = relaunched(local, ranks, how)
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    body = {"kind": "dump", "repeat": 2, "interval": 0.5}
    answer = owner_client.post(f"/api/runs/{run.pk}/capture/", body, "application/json")
    assert answer.status_code == 201, answer.content
    group = run.capture_groups.get(pk=answer.json()["id"])
    assert group.kind == "dump" and group.captures.count() == 3
    pids, roles, numbers = captured(group)
    assert pids == sorted(second) and not set(pids) & set(first)
    assert roles == {"rank-0", "rank-1", "rank-2"} and numbers == {2}
    # The service the page's "Dump all ranks" button calls takes the same three (once
    # the first dump has ended: py-spy attaches to a process once at a time).
    group.captures.update(status="done")
    direct = jobs.capture_group_create(user=None, run=run, kind="dump", repeat=2, interval=0.5)
    assert captured(direct)[0] == sorted(second)


@pytest.mark.parametrize("how", ["exited", "launch key"])
def test_a_scheduled_capture_takes_only_the_current_process_of_each_role(
    local, ranks, monkeypatch, how
):
    run, first, second = relaunched(local, ranks, how)
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    Run.objects.filter(pk=run.pk).update(schedule_every_min=5)
    (group,) = jobs.scheduled_captures_due()
    assert group.run_id == run.pk and group.scheduled and group.kind == "record"
    pids, roles, numbers = captured(group)
    assert pids == sorted(second) and not set(pids) & set(first)
    assert roles == {"rank-0", "rank-1", "rank-2"} and numbers == {2}
    assert all(c.scheduled for c in group.captures.all())


def test_dumps_and_schedules_mid_relaunch_take_each_roles_newest_process(
    owner_client, local, ranks, monkeypatch
):
    """Launch b has re-registered rank-0 only: rank-1 and rank-2 of launch a are still
    their roles' current processes; rank-0 of launch a, still running, is not."""
    first, second = ranks.start(3), ranks.start(1)
    run = register(local, first, launch="a")
    register(local, second, launch="b")
    expected = sorted([second[0], first[1], first[2]])
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    answer = owner_client.post(f"/api/runs/{run.pk}/capture/", {"kind": "dump"}, "application/json")
    assert answer.status_code == 201, answer.content
    dump = run.capture_groups.get(pk=answer.json()["id"])
    assert captured(dump)[0] == expected
    dump.captures.update(status="done")
    Run.objects.filter(pk=run.pk).update(schedule_every_min=5)
    (scheduled,) = jobs.scheduled_captures_due()
    assert captured(scheduled)[0] == expected
    assert not RunProcess.objects.filter(pid=first[0], captures__group__in=[dump, scheduled])


def test_another_launch_key_replaces_a_rank_that_still_runs(local, ranks):
    first, second = ranks.start(2), ranks.start(2)
    run = register(local, first, launch="elastic-a")
    register(local, second[:1], launch="elastic-b")
    # rank-0 moved to launch b; rank-1 of launch a keeps its place until b's registers.
    assert current_pids(run) == sorted([second[0], first[1]])
    register(local, second, launch="elastic-b")
    assert current_pids(run) == sorted(second)
    assert [launch.key for launch in run.launches.all()] == ["elastic-a", "elastic-b"]


def test_a_second_live_process_of_one_role_in_the_same_launch_keeps_both(local, ranks):
    first, other = ranks.start(1), ranks.start(1)
    run = register(local, first, launch="a")
    register(local, other, launch="a")
    assert current_pids(run) == sorted(first + other)
    assert run.launches.count() == 1


def test_registering_again_from_the_same_pid_changes_nothing(local, ranks):
    pids = ranks.start(2)
    run = register(local, pids)
    register(local, pids)
    assert run.launches.count() == 1 and current_pids(run) == sorted(pids)


def test_torchruns_none_is_no_launch_key():
    assert launches.launch_key("none") == "" and launches.launch_key(" abc ") == "abc"
    assert launches.launch_key(7) == ""


def test_a_run_ends_when_its_current_ranks_exit_whatever_earlier_launches_left(local, ranks):
    first = ranks.start(1)
    run = register(local, first, launch="a")
    second = ranks.start(1)
    register(local, second, launch="b")  # launch a's rank-0 still runs, but is replaced
    ranks.stop(second)
    services.run_processes_check(processes=list(run.processes.all()))
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED


def test_two_launches_on_one_page_are_named_by_launch_never_by_id(local, ranks):
    first = ranks.start(1)
    run = register(local, first, launch="a")
    old_group = jobs.capture_group_create(user=None, run=run, duration=5, rate=20)
    second = ranks.start(1)
    register(local, second, launch="b")
    new_group = jobs.capture_group_create(user=None, run=run, duration=5, rate=20)
    captures = list(old_group.captures.all()) + list(new_group.captures.all())
    names = sorted(group_report.rank_names(captures).values())
    assert names == ["rank-0 (launch 1)", "rank-0 (launch 2)"]
    alone = group_report.rank_names(list(new_group.captures.all()))
    assert list(alone.values()) == ["rank-0"]


def test_the_run_page_draws_its_launches_with_their_captures(owner_client, local, ranks):
    first = ranks.start(2)
    run = register(local, first, launch="a")
    group = jobs.capture_group_create(user=None, run=run, duration=5, rate=20)
    register(local, ranks.start(2), launch="b")
    timeline = profile_selectors.launch_groups(run=run, rows=launches.launch_timeline(run=run))
    assert [row["number"] for row in timeline] == [1, 2]
    assert [g["pk"] for g in timeline[0]["groups"]] == [group.pk] and not timeline[1]["groups"]
    assert timeline[0]["end"] is not None and timeline[1]["end"] is None
    page = owner_client.get(run.get_absolute_url()).content.decode()
    assert 'id="launches"' in page and "launch 2" in page and 'class="replaced"' in page
    assert f'href="/groups/{group.pk}/"' in page or f"#{group.pk}" in page
