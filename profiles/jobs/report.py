"""The whole-job report of a capture group, stored on the group once every rank has ended.

It comes from the ranks' stored stats (profiles.pyspy.job.report: straggler, classes of
ranks, findings) and what each rank's DataLoader workers did (`progress["workers"]`,
profiles.pyspy.job.loader_workers), never from raw samples, and is computed here, on the worker
side,
never when a page is viewed (pages read it through `group_selectors`). Every capture
that ends (done, failed, cancelled: `capture_ended`, sent by the state machine) asks
for it; the group's last rank to end computes and stores it. Two ranks ending in two
uncommitted transactions at once could each miss the other: the reaper's periodic
pass (`group_reports_catch_up`) stores what is missing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

from django.db.models import Q
from django.utils import timezone

from profiles.models import Capture, CaptureGroup
from profiles.pyspy.job import analyze_job, analyze_stacks, with_workers
from profiles.pyspy.timed import DEVICE_RULES, with_device

log = logging.getLogger(__name__)
CATCH_UP_DAYS = 7  # older groups missing a report get one when a rank is re-analysed
CATCH_UP_BATCH = 20


def capture_ended_received(*, capture_id: int, **_: Any) -> None:
    """`capture_ended`: a capture reached done, failed or cancelled."""
    group_id = Capture.objects.filter(pk=capture_id).values_list("group_id", flat=True).first()
    if group_id and group_id not in _deferred_groups():
        group_report_update(group_id=group_id)


@contextlib.contextmanager
def group_report_deferred(group_id: int) -> Iterator[None]:
    """While a host's task ends its ranks one after the other, their ends leave the
    group's report alone; it is asked for once, when the block ends (a host of a
    1,024-rank dump ended 8 ranks, and asked 8 times). Per thread: the capture
    worker's threads each run one host."""
    held = _deferred_groups()
    outer = group_id in held
    held.add(group_id)
    try:
        yield
    finally:
        if not outer:
            held.discard(group_id)
            group_report_update(group_id=group_id)


_DEFERRED = threading.local()


def _deferred_groups() -> set[int]:
    groups = getattr(_DEFERRED, "groups", None)
    if groups is None:
        groups = _DEFERRED.groups = set()
    return groups


def group_report_update(*, group_id: int) -> dict[str, Any] | None:
    """Compute and store the group's report when every rank has ended; else None.

    A whole-job record stores `job_report`; a whole-job dump, `stacks`. A report that
    raises is stored as failed (`report_error`, the exception in one line) and logged:
    the group then says why it has no verdict instead of "being stored" for ever.
    """
    # One cheap question first: each of a 64-rank group's ranks asks as it ends, and only
    # the last one needs the ranks' stats.
    if Capture.objects.filter(group_id=group_id).exclude(status__in=Capture.FINAL).exists():
        return None
    group = CaptureGroup.objects.select_related("run").filter(pk=group_id).first()
    if group is None:
        return None
    captures = list(group.captures.select_related("process", "host").order_by("pk"))
    if not captures or not all(c.is_final for c in captures):
        return None
    field = "stacks" if group.kind == "dump" else "job_report"
    try:
        report = (
            stacks_report(group, captures) if field == "stacks" else job_report(group, captures)
        )
    except Exception as exc:  # a report that fails must say so, not stay pending
        log.exception("group %s: the %s could not be computed", group_id, field)
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
        CaptureGroup.objects.filter(pk=group_id).update(**{field: None}, report_error=error)
        return None
    CaptureGroup.objects.filter(pk=group_id).update(**{field: report}, report_error="")
    return report


def group_reports_catch_up(*, now: Any = None) -> int:
    """Store the reports of recent groups whose ranks have all ended but that have none.

    Each group on its own: one whose report fails is stored as failed and never keeps
    the next group's report from being stored, and this never raises (it runs at the
    end of the reaper's periodic task)."""
    since = (now or timezone.now()) - timezone.timedelta(days=CATCH_UP_DAYS)
    ongoing = [status for status in Capture.Status.values if status not in Capture.FINAL]
    unfinished = Q(captures__status__in=ongoing)
    no_report = Q(kind="record", job_report__isnull=True) | Q(kind="dump", stacks__isnull=True)
    try:
        missing = list(
            CaptureGroup.objects.filter(no_report, report_error="", created_at__gte=since)
            .exclude(unfinished)
            .filter(captures__isnull=False)
            .distinct()
            .values_list("pk", flat=True)[:CATCH_UP_BATCH]
        )
    except Exception:  # the database, say: the next pass asks again
        log.exception("the report catch-up could not list the groups missing a report")
        return 0
    stored = 0
    for pk in missing:
        try:
            stored += group_report_update(group_id=pk) is not None
        except Exception:  # the database, say: the next group and the next pass go on
            log.exception("group %s: the report catch-up failed", pk)
    if stored:
        log.info("stored the job report of %d group(s) that missed it", stored)
    return stored


def stacks_report(group: CaptureGroup, captures: list[Capture]) -> dict[str, Any]:
    """The whole-job dump's verdict and classes, from each rank's stored dumps, with the
    ranks that have none named apart with their cause."""
    names = rank_names(captures)
    dumped = [c for c in captures if (c.stats or {}).get("dump_series")]
    ranks = [(names[c.pk], [d["threads"] for d in c.stats["dump_series"]]) for c in dumped]
    steps, layouts = group.run.step_thread_names, rank_layouts(captures, names)
    report: dict[str, Any] = dict(analyze_stacks(ranks, steps, layouts))
    report["failed"] = [
        {"rank": names[c.pk], "cause": c.error_cause, "error": c.error}
        for c in captures
        if c not in dumped
    ]
    report["captures"] = {name: pk for pk, name in names.items()}
    return report


def job_report(group: CaptureGroup, captures: list[Capture]) -> dict[str, Any]:
    """The report of these ranks, with the ranks that have no samples named apart."""
    names = rank_names(captures)
    measured = [(names[c.pk], c.stats) for c in captures if _has_samples(c)]
    steps, layouts = group.run.step_thread_names, rank_layouts(captures, names)
    report: dict[str, Any] = dict(analyze_job(measured, steps, layouts))
    # Each rank's DataLoader workers (kept apart from its own samples by the pipeline)
    # name what they do in an input_bound finding or a data_wait straggler.
    report = with_workers(report, {names[c.pk]: _workers(c) for c in captures if _has_samples(c)})
    # Each rank's device (profiles.pyspy.timed.device): the straggler's against the others',
    # and the device findings of the ranks, one per rule.
    report = with_device(report, {names[c.pk]: _device(c) for c in captures if _has_samples(c)})
    # The threads of every rank are on each capture already: the group keeps the rest.
    report["ranks"] = [{k: v for k, v in r.items() if k != "threads"} for r in report["ranks"]]
    report["without_samples"] = [names[c.pk] for c in captures if not _has_samples(c)]
    # Rank name -> capture id: the page links each rank, and the frames of its
    # explanation, to that rank's capture without knowing how names were made.
    report["captures"] = {name: pk for pk, name in names.items()}
    # Each rank's clock: the whole-job timeline spans the job from these without opening
    # every rank's stats (profiles.jobs.timeline).
    report["clocks"] = rank_clocks(captures, names)
    return report


def _device(capture: Capture) -> tuple[Any, list[Any]]:
    """(stats["device"], its device findings) of a rank."""
    stats = capture.stats or {}
    found = [f for f in stats.get("findings") or [] if isinstance(f, dict)
             and f.get("rule") in DEVICE_RULES]  # fmt: skip
    return stats.get("device"), found


def rank_clocks(captures: list[Capture], names: dict[int, str]) -> dict[str, list[float]]:
    """Per rank name that keeps time: [its first sample, its last sample (host epoch
    seconds), its rate, the seconds added to its host's clock to read the server's]."""
    clocks = {}
    for capture in captures:
        time = (capture.stats or {}).get("time") or {}
        clock = [time.get(key) for key in ("start", "end", "rate")]
        if capture.status != Capture.Status.DONE or not time.get("available"):
            continue
        if all(_number(value) for value in clock):
            progress = capture.progress if isinstance(capture.progress, dict) else {}
            offset = progress.get("clock_offset_s")
            clocks[names[capture.pk]] = [*clock, offset if _number(offset) else 0.0]
    return clocks


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def rank_layouts(captures: list[Capture], names: dict[int, str]) -> dict[str, Any]:
    """Per rank name: its process's place in the parallel layout, as it registered it
    (the report names parallel groups with it; profiles.pyspy.job.layout)."""
    return {names[c.pk]: c.process.layout for c in captures if c.process_id and c.process.layout}


def _workers(capture: Capture) -> Any:
    return (capture.progress or {}).get("workers") if isinstance(capture.progress, dict) else None


def _has_samples(capture: Capture) -> bool:
    return bool(capture.stats and capture.stats.get("total_samples") and "threads" in capture.stats)


def rank_names(captures: list[Capture]) -> dict[int, str]:
    """Per capture id: its process's role (`rank-3`), else its target label. Where two
    ranks would read the same (two launches, or two processes given one role), the
    launch is named (`rank-3 (launch 2)`), else the host and PID: never a bare id."""
    names = {c.pk: (c.process.role if c.process_id and c.process.role else c.target_label)
             for c in captures}  # fmt: skip
    seen = list(names.values())
    twins = [c for c in captures if seen.count(names[c.pk]) > 1]
    launches = {c.pk: _launch_number(c) for c in twins}
    base = dict(names)
    for c in twins:
        alike = [o for o in twins if base[o.pk] == base[c.pk]]
        apart = len({launches[o.pk] for o in alike}) == len(alike)
        where = f"launch {launches[c.pk]}" if apart else f"{c.host.name}:{c.pid}"
        names[c.pk] = f"{base[c.pk]} ({where})"
    return names


def _launch_number(capture: Capture) -> int | None:
    process = capture.process if capture.process_id else None
    return process.launch.number if process is not None and process.launch_id else None
