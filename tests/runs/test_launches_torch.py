"""Real gloo ranks (bench/targets/train.py, 2 ranks) registered to a run, stopped, and
relaunched with new PIDs under the same run name: the run keeps both launches, and
"Capture all" takes exactly the live ranks of the second, recorded to the end with the
real py-spy (the Celery tasks run eagerly in this process: `inline_analysis`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from profiles.jobs import services as jobs
from runs.models import Run
from runs.tokens import api_token_create
from tests.support.requirements import require_torch
from tests.support.sshd import free_port

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "targets" / "train.py"
WORLD = 2


def launch(python: str) -> list[subprocess.Popen]:
    """WORLD ranks of one gloo job, each started once it printed `ready`."""
    port = free_port()
    ranks = []
    for rank in range(WORLD):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(WORLD),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))  # fmt: skip
        argv = [python, str(SCRIPT), "--seconds", "60"]
        ranks.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True))  # fmt: skip
    for proc in ranks:
        assert proc.stdout.readline().startswith("ready"), "a rank did not start"
    return ranks


def stop(ranks: list[subprocess.Popen]) -> None:
    for proc in ranks:
        proc.kill()
    for proc in ranks:
        proc.wait()
        proc.stdout.close()


def register(api, ranks: list[subprocess.Popen]) -> int:
    ids = set()
    for rank, proc in enumerate(ranks):
        body = {"run": "gloo-job", "host": "local", "pid": proc.pid, "role": f"rank-{rank}"}
        answer = api.post("/api/register/", body, "application/json")
        assert answer.status_code == 201, answer.content
        ids.add(answer.json()["run"]["id"])
    (run_id,) = ids
    return run_id


def test_capture_all_takes_exactly_the_live_ranks_of_a_relaunched_job(
    client, owner, inline_analysis
):
    python = require_torch()
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {api_token_create(user=owner)[1]}"
    first = launch(python)
    try:
        run_id = register(client, first)
    finally:
        stop(first)
    second = launch(python)
    try:
        assert register(client, second) == run_id
        # Eager: the host's task records both ranks (2 s) and analyses them before the
        # request returns, while launch 2's ranks still run.
        answer = client.post(f"/api/runs/{run_id}/capture/", {"duration": 2}, "application/json")
        assert answer.status_code == 201, answer.content
    finally:
        stop(second)
    run = Run.objects.get(pk=run_id)
    group = run.capture_groups.get()
    captured = sorted(group.captures.values_list("pid", flat=True))
    assert captured == sorted(p.pid for p in second)
    # Run to its end: every rank of launch 2 sampled, none of launch 1 tried.
    ended = {c.process.role: (c.status, c.error_cause, c.error) for c in group.captures.all()}
    assert ended == {"rank-0": ("done", "", ""), "rank-1": ("done", "", "")}
    assert not group.captures.filter(error_cause="no_such_pid").exists()
    assert all(c.stats["total_samples"] > 0 for c in group.captures.all())
    assert jobs.group_summary(group)["status"] == "done"
    group.refresh_from_db()
    assert group.report_status == "stored", group.report_error
    assert [r["name"] for r in group.job_report["ranks"]] == ["rank-0", "rank-1"]
    assert group.job_report["without_samples"] == []
    assert sorted(run.launches.values_list("number", flat=True)) == [1, 2]
    replaced = run.processes.filter(replaced_at__isnull=False)
    assert sorted(replaced.values_list("pid", flat=True)) == sorted(p.pid for p in first)
