"""Whole-job captures made of the real 4-rank recordings in tests/data/jobs/ (see its
SOURCES.md: straggler, starved, hostsync, backpressure, gil, balanced, straggler_noidle),
run through the real group pipeline with only the remote seam swapped, then analysed
by the real analysis step (which stores the job report on the group)."""

from __future__ import annotations

import gzip
from pathlib import Path

from django.utils import timezone

from profiles.captures import enqueue, pipeline
from profiles.jobs import pipeline as group_pipeline
from profiles.jobs import services as jobs
from profiles.models import Capture, CaptureGroup
from runs import remote
from runs.models import Launch, Run, RunProcess
from tests import factories
from tests.support.seam import finished

JOBS = Path(__file__).resolve().parents[1] / "data" / "jobs"
RANKS = 4
NO_IDLE = {"straggler_noidle"}  # recorded without --idle


def recorded(case: str, rank: int) -> tuple[bytes, str]:
    """The rank's raw samples and py-spy log, as the recorder stored them."""
    plain = JOBS / case / f"rank-{rank}.txt"
    raw = (
        plain.read_bytes() if plain.exists() else gzip.decompress(Path(f"{plain}.gz").read_bytes())
    )
    return raw, Path(f"{plain}.log").read_text(encoding="utf-8")


PIDS_PER_LAUNCH = 100


def relaunch(run: Run) -> Launch:
    """A new launch of `run`: each current process exits and is replaced by a process of
    the same role with a new PID (FIRST_PID + 100 × launches before + rank)."""
    if not run.launches.exists():
        first = Launch.objects.create(run=run, number=1, key="launch-1")
        run.processes.filter(launch=None).update(launch=first)
    number = run.launches.count() + 1
    launch = Launch.objects.create(run=run, number=number, key=f"launch-{number}")
    now = timezone.now()
    for old in run.processes.filter(replaced_at__isnull=True).order_by("pid"):
        new = RunProcess.objects.create(
            run=run,
            host=old.host,
            pid=old.pid + PIDS_PER_LAUNCH,
            role=old.role,
            launch=launch,
            alive=True,
            checked_at=now,
        )
        RunProcess.objects.filter(pk=old.pk).update(alive=False, replaced_at=now, replaced_by=new)
    return launch


def record_group(
    monkeypatch, case: str, *, analyse: bool = True, run_name: str = "", run: Run | None = None
) -> tuple[CaptureGroup, list[int]]:
    """A 4-rank group whose ranks recorded `case`; (group, capture ids by rank).

    With `analyse` every rank is analysed (the last one stores the job report);
    without, the ranks wait in `parsing` for the test to analyse them. With `run`, the
    group is of that run's current processes (after `relaunch`, the new launch's)."""
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    run = run or factories.job_run(ranks=RANKS, name=run_name or f"gloo-{case}")
    group = jobs.capture_group_create(
        user=None, run=run, duration=10, rate=40, idle=case not in NO_IDLE
    )

    def fake_record_many(target, pids, settings, session, **kwargs):
        session.on_ready()
        results, logs = {}, {}
        for pid in pids:
            raw, log = recorded(case, (pid - factories.FIRST_PID) % PIDS_PER_LAUNCH)
            results[pid] = remote.RecordResult(raw, log, "", 0, "duration", 10.1)
            logs[pid] = log
        return finished(remote.ManyResult(results, logs), kwargs)

    monkeypatch.setattr(remote, "record_many", fake_record_many)
    ids = list(group.captures.order_by("pid").values_list("pk", flat=True))
    host_id = Capture.objects.get(pk=ids[0]).host_id
    parsing = group_pipeline.host_captures_execute(
        group_id=group.pk, host_id=host_id, capture_ids=ids
    )
    assert parsing == ids
    if analyse:
        for pk in ids:
            assert pipeline.capture_analyze_stored(capture_id=pk) == "done"
    return group, ids
