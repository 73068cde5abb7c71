"""Real hung gloo jobs (bench/targets/hang_train.py: DDP, a DataLoader with two worker
processes), each dumped through the product — the API, a real worker, a real sshd on
loopback, real py-spy — and checked against where the hang was planted:
(a) a rank waits in its own code for a lock file, (b) a rank leaves its loop early and
waits at the final barrier (a skipped collective), (c) a rank's DataLoader workers
deadlock. The healthy ranks wait in DDP's all-reduce inside `loss.backward()`.

The three jobs run side by side (3 ranks each, rank 2 the bad one) and are dumped at
once, so the torch start-up is paid once per rank, not once per test."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from profiles.models import CaptureGroup
from runs.models import Host, Run, RunProcess
from tests.support.procs import descendants
from tests.support.requirements import require_torch
from tests.support.sshd import ALIAS
from tests.support.worker import WorkerProcess

pytestmark = [pytest.mark.services, pytest.mark.sshd, pytest.mark.django_db(transaction=True)]
SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "targets" / "hang_train.py"
WORLD, BAD = 3, 2
CASES = ("own_code", "skipped_collective", "loader_deadlock")


def planted(marker: str) -> int:
    """The line of bench/targets/hang_train.py that carries `# marker`."""
    lines = SCRIPT.read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if f"# {marker}" in line)


def backward_line() -> int:
    lines = SCRIPT.read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if line.strip().startswith("loss.backward()"))


class Job:
    """WORLD ranks of hang_train.py with one planted hang, on their own port."""

    def __init__(self, python: str, cause: str, port: int) -> None:
        self.ranks = []
        for rank in range(WORLD):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(WORLD),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))  # fmt: skip
            argv = [python, str(SCRIPT), "--cause", cause, "--bad-rank", str(BAD),
                    "--hang-after", "5", "--pause", "0.02", "--seconds", "120"]  # fmt: skip
            self.ranks.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                               stderr=subprocess.DEVNULL, text=True))  # fmt: skip

    def wait_hung(self) -> None:
        """Until the bad rank says `hung`; the others reach their next all-reduce soon."""
        out = self.ranks[BAD].stdout
        for line in iter(out.readline, ""):
            if line.startswith("hung"):
                return
        raise AssertionError("the bad rank ended before its hang")

    def stop(self) -> None:
        # DataLoader workers first: a killed rank leaves its forked workers behind.
        for pid in [child for proc in self.ranks for child in descendants(proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for proc in self.ranks:
            proc.kill()
        for proc in self.ranks:
            proc.wait()
            proc.stdout.close()


def _dump(client, run: Run) -> int:
    answer = client.post(f"/api/runs/{run.pk}/capture/", {"kind": "dump"}, "application/json")
    assert answer.status_code == 201, answer.content
    return answer.json()["id"]


def _stacks(group_ids: list[int], timeout_s: float) -> dict[int, dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        groups = CaptureGroup.objects.filter(pk__in=group_ids)
        if all(g.stacks is not None or g.report_error for g in groups):
            return {g.pk: g.stacks for g in groups}
        time.sleep(0.3)
    raise AssertionError("no verdict in time")


def test_each_planted_hang_is_named_with_its_rank_and_line(sshd, tmp_path, owner_client):
    python = require_torch()
    py_spy = Host.objects.get(name="local").py_spy
    host = Host.objects.create(name="node", transport="ssh", address=ALIAS, py_spy=py_spy)
    worker = WorkerProcess(tmp_path / "w.log", env={"FLAMEDECK_SSH_CONFIG": str(sshd.config)})
    jobs = {cause: Job(python, cause, 29500 + os.getpid() % 1000 * 3 + i)
            for i, cause in enumerate(CASES)}  # fmt: skip
    try:
        runs = {}
        for cause, job in jobs.items():
            job.wait_hung()
            runs[cause] = Run.objects.create(name=f"hung-{cause}", status="running")
            for rank, proc in enumerate(job.ranks):
                RunProcess.objects.create(run=runs[cause], host=host, pid=proc.pid,
                                          role=f"rank-{rank}")  # fmt: skip
        time.sleep(1.0)  # the healthy ranks reach their next all-reduce
        asked = time.monotonic()
        groups = {cause: _dump(owner_client, run) for cause, run in runs.items()}
        stacks = _stacks(list(groups.values()), timeout_s=90)
        print(f"three whole-job dumps: verdicts {time.monotonic() - asked:.1f} s after the request")
    finally:
        worker.stop()
        for job in jobs.values():
            job.stop()
    where = {
        "own_code": f"wait_for_lock (hang_train.py:{planted('HANG_OWN_CODE')})",
        "skipped_collective": f"teardown (hang_train.py:{planted('HANG_SKIPPED: the others')})",
        "loader_deadlock": None,  # in the DataLoader's own code: the user frame is the loop
    }
    for cause in CASES:
        verdict = stacks[groups[cause]]["verdict"]
        print(f"{cause}: {verdict['kind']}: {verdict['explanation']}")
        assert verdict["kind"] == "stuck", (cause, verdict)
        assert verdict["odd"] == [f"rank-{BAD}"], (cause, verdict)
        if where[cause]:
            assert verdict["user_frame"] == where[cause], (cause, verdict)
        others = stacks[groups[cause]]["classes"][0]
        assert others["ranks"] == ["rank-0", "rank-1"], (cause, others)
        assert others["state"] == "collective", (cause, others)
        assert others["user_frame"] == f"train_step (hang_train.py:{backward_line()})"
    loader = stacks[groups["loader_deadlock"]]["verdict"]
    assert loader["state"] == "data_wait", loader
    assert "_next_data" in " ".join(stacks[groups["loader_deadlock"]]["classes"][1]["frames"])
    assert stacks[groups["skipped_collective"]]["verdict"]["state"] == "collective"
