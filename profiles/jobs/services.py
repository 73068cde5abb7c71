"""Whole-job work: whole-job captures (CaptureGroup: every process of a run at once),
scheduled captures, and the raw-file retention budget."""

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from profiles.captures.enqueue import group_enqueue_on_commit
from profiles.captures.services import captures_create_for_group
from profiles.jobs.schedule import group_start_at
from profiles.models import Capture, CaptureGroup, Watch
from profiles.storage.files import capture_delete_files
from runs import capture_fields
from runs.models import Run
from runs.selectors import capturable_processes

log = logging.getLogger(__name__)
LATE_AFTER_S = 0.3
"""A rank whose first sample came later than this past the group's instant started
late: the start skew target at any size."""


@transaction.atomic
def capture_group_create(
    *,
    user: AbstractBaseUser | None,
    run: Run,
    scheduled: bool = False,
    kind: str = "record",
    repeat: int = 3,
    interval: float = 1.0,
    **py_spy_settings: Any,
) -> CaptureGroup:
    """One capture per process of the run, same settings, sampled in one window.

    One task per host starts all of that host's py-spy in one session; every host
    samples from one instant a little ahead (profiles.jobs.schedule), whatever the
    number of hosts: a host whose session comes up late samples from then, and the
    group's start skew says so.
    Processes known to have exited are skipped. The settings take a whole-job
    capture's defaults (runs.capture_settings): `idle` is on, since without it py-spy
    drops blocked threads' samples, and the waits between ranks are the point.
    With `kind` "dump" ("Dump all ranks") each process is dumped `repeat` times,
    `interval` seconds apart, instead (profiles.jobs.dumps).
    """
    if kind not in ("record", "dump"):
        raise ValidationError({"kind": "kind must be record or dump"})
    py_spy_settings = capture_fields.clean(py_spy_settings, kind=kind, job=True)
    processes, exited = capturable_processes(run=run)
    if not processes and exited:
        raise ValidationError("Every process of this run has exited; attach the new ones.")
    if not processes:
        raise ValidationError("This run has no processes to capture; attach some first.")
    host_ids = {p.host_id for p in processes}
    group = CaptureGroup.objects.create(
        run=run,
        requested_by=user,
        scheduled=scheduled,
        hosts_total=len(host_ids),
        start_by=group_start_at(host_ids=host_ids, kind=kind),
        kind=kind,
        dump_repeat=repeat,
        dump_interval_s=interval,
    )
    captures_create_for_group(
        user=user,
        processes=processes,
        group=group,
        kind=kind,
        scheduled=scheduled,
        **py_spy_settings,
    )
    group_enqueue_on_commit(group=group)
    return group


def group_summary(group: CaptureGroup) -> dict[str, Any]:
    """Status across the group (done, partial, failed, running), the start skew: the
    spread of the moments each rank's first kept sample was taken, None until every
    capture has either started sampling or ended (a rank still attaching may start
    late), the hosts whose ranks failed, each with its cause (`failed_hosts`: a host
    that could not be reached fails its ranks alone; the report covers the rest), and
    those that started sampling past the group's instant (`late_hosts`: a slow ssh, no
    free capture thread), each with how late. One query of plain rows: a page polls it."""
    fields = ("status", "sampling_started_at", "host__name", "error_cause", "error")
    captures = list(group.captures.values(*fields))
    statuses = {c["status"] for c in captures}
    if statuses & {Capture.Status.QUEUED, Capture.Status.RUNNING, Capture.Status.PARSING}:
        status = "running"
    elif statuses <= {Capture.Status.DONE}:
        status = "done"
    elif Capture.Status.DONE in statuses:
        status = "partial"
    else:
        status = "failed"
    starts = [c["sampling_started_at"] for c in captures if c["sampling_started_at"]]
    waiting = any(
        not c["sampling_started_at"] and c["status"] not in Capture.FINAL for c in captures
    )
    skew = (max(starts) - min(starts)).total_seconds() if len(starts) > 1 else 0.0
    return {
        "status": status,
        "start_skew_s": None if waiting else round(skew, 3),
        "captures": len(captures),
        "failed_hosts": failed_hosts(captures),
        "late_hosts": late_hosts(captures, group.start_by),
    }


def failed_hosts(captures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per host and cause, the ranks that failed there (most first): {host, cause,
    error, ranks}; the first rank's error stands for them. `captures`: rows of
    group_summary's query."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for capture in captures:
        if capture["status"] != Capture.Status.FAILED:
            continue
        key = (capture["host__name"] or "(deleted host)", capture["error_cause"] or "unknown")
        row = found.setdefault(
            key, {"host": key[0], "cause": key[1], "error": capture["error"], "ranks": 0}
        )
        row["ranks"] += 1
    return sorted(found.values(), key=lambda row: (-row["ranks"], row["host"], row["cause"]))


def late_hosts(captures: list[dict[str, Any]], instant: Any) -> list[dict[str, Any]]:
    """Per host whose ranks' first samples came over LATE_AFTER_S past the instant:
    {host, late_s (its latest rank), ranks}, latest first."""
    if instant is None:
        return []
    found: dict[str, dict[str, Any]] = {}
    for capture in captures:
        started, host = capture["sampling_started_at"], capture["host__name"]
        if started is None or host is None:
            continue
        late = (started - instant).total_seconds()
        if late <= LATE_AFTER_S:
            continue
        row = found.setdefault(host, {"host": host, "late_s": 0.0, "ranks": 0})
        row["late_s"] = round(max(row["late_s"], late), 3)
        row["ranks"] += 1
    return sorted(found.values(), key=lambda row: (-row["late_s"], row["host"]))


def scheduled_captures_due(*, now: Any = None) -> list[CaptureGroup]:
    """Start a whole-job capture for every running run whose schedule is due.

    Each run is claimed with a conditional UPDATE on `schedule_last_at`, so two beat
    ticks (or two beat processes) never start the same scheduled capture twice.
    """
    now = now or timezone.now()
    groups = []
    for run in Run.objects.filter(status=Run.Status.RUNNING, schedule_every_min__gt=0):
        due_before = now - timezone.timedelta(minutes=run.schedule_every_min)
        claimed = (
            Run.objects.filter(pk=run.pk)
            .filter(Q(schedule_last_at__isnull=True) | Q(schedule_last_at__lte=due_before))
            .update(schedule_last_at=now)
        )
        if not claimed or not run.processes.exists():
            continue
        try:
            group = capture_group_create(
                user=None,
                run=run,
                scheduled=True,
                duration=settings.FLAMEDECK_SCHEDULE_DURATION_S,
                rate=settings.FLAMEDECK_SCHEDULE_RATE,
            )
        except (ValidationError, PermissionDenied) as exc:
            # py-spy is already on one of its processes (CaptureConflict), every process
            # has exited, or one is flamedeck's own (OwnProcessRefused): skip this run's
            # tick, not the other runs'.
            said = exc.messages[0] if isinstance(exc, ValidationError) else str(exc)
            log.info("scheduled capture of run %s skipped: %s", run.pk, said)
            continue
        groups.append(group)
        scheduled_captures_trim(run=run)
    return groups


def scheduled_captures_trim(*, run: Run) -> int:
    """Keep only the newest `schedule_keep` scheduled captures of a run, and every
    capture a watch judges against: its baseline, and for an all-roles watch the
    baseline's whole-job capture (each rank is judged against its role there)."""
    keep = run.schedule_keep
    old = Capture.objects.filter(run=run, scheduled=True).order_by("-queued_at")[keep:]
    baselines = Watch.objects.exclude(baseline=None).values_list("baseline_id", flat=True)
    groups = Capture.objects.filter(
        pk__in=Watch.objects.filter(all_roles=True).values_list("baseline_id", flat=True)
    ).exclude(group=None)
    held = set(baselines) | set(
        Capture.objects.filter(group__in=groups.values("group")).values_list("pk", flat=True)
    )
    doomed = [c for c in old.select_related(None) if c.is_final and c.pk not in held]
    for capture in doomed:
        capture_delete_files(capture=capture)
        capture.delete()
    return len(doomed)


def raw_prune(*, budget_bytes: int, dry_run: bool = False) -> dict[str, int]:
    """Delete the oldest raw files until the kept ones fit in `budget_bytes`.

    Stats, the flamegraph tree, the py-spy log and comments stay, so pages still
    work; the capture page says the raw file was pruned.
    """
    kept = Capture.objects.filter(raw_pruned_at__isnull=True).exclude(raw_file="")
    total = kept.aggregate(total=Sum("raw_size"))["total"] or 0
    pruned = freed = 0
    for capture in kept.filter(status__in=Capture.FINAL).order_by("queued_at").iterator():
        if total - freed <= budget_bytes:
            break
        freed += capture.raw_size
        pruned += 1
        if not dry_run:
            # The export is the same samples in another format: it goes with them.
            for field in (capture.raw_file, capture.export_file):
                if field:
                    field.delete(save=False)
            Capture.objects.filter(pk=capture.pk).update(
                raw_pruned_at=timezone.now(), raw_file="", export_file=""
            )
    return {
        "total_bytes": total,
        "freed_bytes": freed,
        "pruned": pruned,
        "kept_bytes": total - freed,
    }
