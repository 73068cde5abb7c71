"""Object builders for tests: one place that knows how to make runs and their processes."""

from __future__ import annotations

from runs.models import Host, Run, RunProcess

FIRST_PID = 4000
"""Processes of `job_run` have pids FIRST_PID + rank."""


def local_host() -> Host:
    return Host.objects.get_or_create(name="local", defaults={"transport": "local"})[0]


def job_run(*, ranks: int, name: str = "gloo-job", host: Host | None = None) -> Run:
    """A run with `ranks` processes on one host, roles rank-0, rank-1, ..."""
    run = Run.objects.create(name=name)
    host = host or local_host()
    RunProcess.objects.bulk_create(
        RunProcess(run=run, host=host, pid=FIRST_PID + i, role=f"rank-{i}") for i in range(ranks)
    )
    return run
