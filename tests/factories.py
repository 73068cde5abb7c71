"""Object builders for tests: one place that knows how to make a run, a process, a
done capture with stats, a notification target and a watch."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from profiles.models import Capture
from profiles.watch_models import NotifyTarget, Watch
from runs.models import Host, Run, RunProcess

STATES = ("compute", "data_wait", "host_sync", "collective", "idle")


def run(name: str = "llama-70b") -> Run:
    return Run.objects.create(name=name)


def host(name: str = "gpu-node-1") -> Host:
    return Host.objects.get_or_create(name=name, defaults={"address": f"{name}.example"})[0]


def process(run_: Run, role: str = "rank-0", pid: int = 4242) -> RunProcess:
    return RunProcess.objects.create(run=run_, host=host(), pid=pid, role=role)


def state_stats(total: int, **shares: float) -> dict:
    """Stats whose `states` hold `shares` (percent of `total`), the rest `compute`;
    one category per state so both kinds of rows exist."""
    counts = {state: round(total * shares.get(state, 0) / 100) for state in STATES[1:]}
    counts["compute"] = total - sum(counts.values())
    return {
        "format": "raw",
        "total_samples": total,
        "states": [
            {"state": s, "samples": n, "percent": 100 * n / total} for s, n in counts.items()
        ],
        "categories": [{"category": "sync", "samples": counts["host_sync"]}],
        "top_self": [],
        "top_total": [],
        "keywords": [],
    }


def capture(
    process_: RunProcess | None,
    stats: dict | None,
    *,
    minutes_ago: float = 0,
    status: str = Capture.Status.DONE,
    run_: Run | None = None,
) -> Capture:
    at = timezone.now() - timedelta(minutes=minutes_ago)
    made = Capture.objects.create(
        run=run_ or (process_.run if process_ else None),
        process=process_,
        host=process_.host if process_ else None,
        pid=process_.pid if process_ else None,
        kind=Capture.Kind.RECORD,
        status=status,
        stats=stats,
    )
    Capture.objects.filter(pk=made.pk).update(queued_at=at, finished_at=at)
    made.refresh_from_db()
    return made


def target(
    name: str = "team-hook", url: str = "json://127.0.0.1:9/hook/s3cr3t-path"
) -> NotifyTarget:
    return NotifyTarget.objects.create(name=name, url=url)


def watch(baseline: Capture, *, targets=(), role: str | None = None, **fields) -> Watch:
    made = Watch.objects.create(
        run=baseline.run,
        role=baseline.process.role if role is None else role,
        baseline=baseline,
        **fields,
    )
    made.targets.set(targets)
    return made
