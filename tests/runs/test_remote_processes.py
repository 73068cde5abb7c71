"""Process listing for finding a job on a host: parent PIDs (launcher → ranks), the
ranks' RANK/LOCAL_RANK read on the host without the rest of the environment, and a
bounded liveness check. Real processes, locally and over a real sshd."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from runs.remote import RemoteError, Target, alive_pids, list_processes, parse_ps, ps_argv, run
from runs.remote.build import ENV_MARKER
from tests.support.sshd import free_port

SECRET = "hunter2-do-not-leak"
# The secret reaches the ranks through the environment only (not a command line).
LAUNCHER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)"],
            env={**os.environ, "RANK": str(4 + r), "LOCAL_RANK": str(r), "WORLD_SIZE": "8"},
        )
        for r in range(2)
    ]
    print(" ".join(str(p.pid) for p in ranks), flush=True)
    time.sleep(120)
    """
)


@pytest.fixture
def launcher() -> Iterator[tuple[int, list[int]]]:
    """A torchrun-like launcher with two ranks (RANK 4 and 5 of 8)."""
    env = {**os.environ, "WANDB_API_KEY": SECRET, "RANK_NOTE": "7"}
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True, env=env
    )
    ranks = [int(pid) for pid in proc.stdout.readline().split()]
    yield proc.pid, ranks
    for pid in ranks:
        subprocess.run(["kill", str(pid)], check=False)
    proc.kill()
    proc.wait()


def test_parse_ps_attaches_only_numeric_rank_variables_to_their_process():
    text = (
        "  10   1 u 0.0 1 python -m torch.distributed.run train.py\n"
        "  11  10 u 99.0 9 /usr/bin/python3 train.py\n"
        f"{ENV_MARKER}\n"
        "11 RANK=3\n11 LOCAL_RANK=1\n11 WORLD_SIZE=16\n11 SECRET=5\n12 RANK=9\n11 RANK=x\n"
    )
    launcher, rank = parse_ps(text)
    assert (launcher.pid, launcher.rank, launcher.ppid) == (10, None, 1)
    assert (rank.ppid, rank.rank, rank.local_rank, rank.world_size) == (10, 3, 1, 16)


def test_a_listing_running_beside_this_one_does_not_cut_it_short():
    """Another `ps` listing on the host (a second user, a second worker) shows up in
    this one with the marker inside its command line; only the marker's own line
    ends the listing."""
    other = f"sh -c printf '%s\\n' {ENV_MARKER} >&2"
    text = (
        f"   5   1 root 0.0 1 {other}\n"
        "  10   1 u 0.0 1 python -m torch.distributed.run train.py\n"
        "  11  10 u 99.0 9 /usr/bin/python3 train.py\n"
        f"{ENV_MARKER}\n"
        "11 RANK=3\n"
    )
    assert [(p.pid, p.rank) for p in parse_ps(text)] == [(10, None), (11, 3)]


def _check_tree(target: Target, launcher: tuple[int, list[int]]) -> None:
    found = {p.pid: p for p in list_processes(target)}
    parent, ranks = launcher
    assert parent in found and found[parent].rank is None
    assert [(found[pid].ppid, found[pid].rank, found[pid].local_rank) for pid in ranks] == [
        (parent, 4, 0),
        (parent, 5, 1),
    ]
    assert found[ranks[0]].world_size == 8


def test_a_launcher_and_its_ranks_are_listed_as_a_tree_with_their_ranks(local_target, launcher):
    _check_tree(local_target, launcher)


@pytest.mark.sshd
def test_the_tree_and_ranks_come_the_same_way_over_ssh(ssh_target, launcher):
    _check_tree(ssh_target, launcher)


def test_nothing_else_of_the_environment_leaves_the_host(local_target, launcher):
    done = run(ps_argv(local_target), stdin_open=False, timeout_s=30)
    output = done.text
    assert SECRET not in output and "WANDB_API_KEY" not in output and "RANK_NOTE" not in output
    assert f"{launcher[1][0]} RANK=4" in output


def test_alive_pids_tells_running_from_exited_and_zombie_processes(local_target, launcher):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    zombie = subprocess.Popen(["true"])  # exits at once; unreaped, it stays a zombie
    time.sleep(0.3)
    try:
        asked = [launcher[0], *launcher[1], gone.pid, zombie.pid]
        assert alive_pids(local_target, asked) == {launcher[0], *launcher[1]}
    finally:
        zombie.wait()


@pytest.mark.sshd
def test_alive_pids_works_over_ssh(ssh_target, launcher):
    assert alive_pids(ssh_target, [launcher[0], 4194304]) == {launcher[0]}


def test_an_unreachable_host_fails_the_liveness_check_quickly_with_its_cause():
    target = Target("ssh", "127.0.0.1", port=free_port())
    start = time.monotonic()
    with pytest.raises(RemoteError) as raised:
        alive_pids(target, [1])
    assert raised.value.cause == "unreachable" and time.monotonic() - start < 6


def test_alive_pids_refuses_what_is_not_a_pid(local_target):
    with pytest.raises(ValueError):
        alive_pids(local_target, [1, 0])
