"""Object builders for tests: runs with ranked processes and done captures whose
stored stats say given shares, without running the engine."""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timedelta

from django.core.files.base import ContentFile
from django.utils import timezone

from profiles.models import Capture, CaptureGroup
from runs.models import Host, Run, RunProcess


def local_host() -> Host:
    return Host.objects.get_or_create(name="local", defaults={"transport": "local"})[0]


def share_stats(
    shares: dict[str, float], *, total: int = 1000, verdict: str | None = None, callers: int = 0
) -> dict:
    """Stored stats whose categories have these percentages of `total` samples (with
    `callers` python_callers each, as heavy as the engine's)."""
    return {
        "format": "raw",
        "total_samples": total,
        "categories": [
            {
                "category": name,
                "samples": round(total * pct / 100),
                "percent": pct,
                "python_callers": [
                    {"frame": f"step_{i} (train.py:{i})", "samples": 1, "percent": 0.1}
                    for i in range(callers)
                ],
            }
            for name, pct in shares.items()
        ],
        "keywords": [],
        "lag": {"verdict": verdict} if verdict else None,
    }


def ranked_processes(run: Run, count: int, *, host: Host | None = None, role: str = "rank-{}"):
    """`count` processes of `run`, roles rank-0, rank-1, … (or `role` for all when it
    has no `{}`), pids 1000 + i."""
    host = host or local_host()
    return RunProcess.objects.bulk_create(
        RunProcess(run=run, host=host, pid=1000 + i, role=role.format(i)) for i in range(count)
    )


def done_capture(
    *,
    run: Run | None = None,
    process: RunProcess | None = None,
    shares: dict[str, float],
    at: datetime | None = None,
    group: CaptureGroup | None = None,
    original_name: str = "",
) -> Capture:
    """A done capture of `process` (or an import when None) finished at `at`."""
    at = at or timezone.now()
    capture = Capture.objects.create(
        run=run or (process.run if process else None),
        process=process,
        host=process.host if process else None,
        pid=process.pid if process else None,
        group=group,
        kind=Capture.Kind.RECORD if process else Capture.Kind.IMPORT,
        status=Capture.Status.DONE,
        stats=share_stats(shares),
        original_name=original_name,
    )
    Capture.objects.filter(pk=capture.pk).update(queued_at=at, finished_at=at)
    capture.queued_at = capture.finished_at = at
    return capture


def whole_job_capture(
    run: Run,
    processes: list[RunProcess],
    shares: list[dict[str, float]],
    *,
    at: datetime,
    callers: int = 0,
) -> CaptureGroup:
    """A whole-job capture: one done capture per process, `shares[i]` for process i."""
    group = CaptureGroup.objects.create(run=run)
    CaptureGroup.objects.filter(pk=group.pk).update(created_at=at)
    Capture.objects.bulk_create(
        Capture(
            run=run,
            process=p,
            host=p.host,
            pid=p.pid,
            group=group,
            status=Capture.Status.DONE,
            stats=share_stats(s, callers=callers),
            queued_at=at,
            finished_at=at + timedelta(seconds=30),
        )
        for p, s in zip(processes, shares, strict=True)
    )
    # auto_now_add ignores the given queued_at: set it afterwards.
    Capture.objects.filter(group=group).update(queued_at=at)
    return group


def minutes_ago(minutes: float) -> datetime:
    return timezone.now() - timedelta(minutes=minutes)


def store_tree(capture: Capture, tree: dict) -> Capture:
    """Give a capture a stored flamegraph tree (as the analysis writes it)."""
    capture.flamegraph_file.save(
        "flamegraph.json.gz", ContentFile(gzip.compress(json.dumps(tree).encode()))
    )
    return capture


def thread_tree(threads: dict[str, dict[str, int]]) -> dict:
    """A flamegraph tree: `{"thread (1): main": {"leaf (a.py:1)": 5}}` → root, thread
    nodes, one leaf per count under a shared `step (train.py:9)` frame."""
    children = []
    for thread, leaves in threads.items():
        step = [{"name": name, "value": n, "children": []} for name, n in leaves.items()]
        total = sum(leaves.values())
        body = [{"name": "step (train.py:9)", "value": total, "children": step}]
        children.append({"name": thread, "value": total, "children": body})
    return {"name": "all", "value": sum(c["value"] for c in children), "children": children}
