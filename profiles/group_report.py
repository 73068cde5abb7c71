"""The whole-job report of a capture group, stored on the group once every rank has ended.

It comes from the ranks' stored stats (profiles.pyspy.job: straggler, classes of
ranks, findings), never from raw samples and never recomputed on view: the capture
whose analysis ends last stores it (`group_report_update`, called by the pipeline); a
group whose last rank ended without an analysis (failed, cancelled before sampling)
gets it on its first read, once. While any rank is queued, running or parsing there
is no verdict: `group_report` says so and why.
"""

from __future__ import annotations

from typing import Any

from profiles.pyspy.job import analyze_job

from .models import Capture, CaptureGroup

REPORT_KEYS = ("straggler", "classes", "findings")


def group_report_after(*, capture: Capture) -> None:
    """After a capture's analysis ended: its group's report, if it was the last rank."""
    if capture.group_id:
        group_report_update(group_id=capture.group_id)


def group_report_update(*, group_id: int) -> dict[str, Any] | None:
    """Compute and store the group's report when every rank has ended; else None."""
    group = CaptureGroup.objects.select_related("run").filter(pk=group_id).first()
    if group is None:
        return None
    captures = list(group.captures.select_related("process", "host").order_by("pk"))
    if not captures or not all(c.is_final for c in captures):
        return None
    report = job_report(group, captures)
    CaptureGroup.objects.filter(pk=group_id).update(job_report=report)
    return report


def job_report(group: CaptureGroup, captures: list[Capture]) -> dict[str, Any]:
    """The report of these ranks, with the ranks that have no samples named apart."""
    names = rank_names(captures)
    measured = [(names[c.pk], c.stats) for c in captures if _has_samples(c)]
    report: dict[str, Any] = dict(analyze_job(measured, group.run.step_thread_names))
    # The threads of every rank are on each capture already: the group keeps the rest.
    report["ranks"] = [{k: v for k, v in r.items() if k != "threads"} for r in report["ranks"]]
    report["without_samples"] = [names[c.pk] for c in captures if not _has_samples(c)]
    return report


def _has_samples(capture: Capture) -> bool:
    return bool(capture.stats and capture.stats.get("total_samples") and "threads" in capture.stats)


def rank_names(captures: list[Capture]) -> dict[int, str]:
    """Per capture id: its process's role (`rank-3`), else its target label; made
    distinct with `#id` where two ranks would read the same."""
    names = {c.pk: (c.process.role if c.process_id and c.process.role else c.target_label)
             for c in captures}  # fmt: skip
    seen = list(names.values())
    return {pk: name if seen.count(name) == 1 else f"{name} #{pk}" for pk, name in names.items()}


def group_report(group: CaptureGroup) -> dict[str, Any]:
    """`straggler`, `classes` and `findings` for the API, or empty ones and the reason."""
    statuses = list(group.captures.values_list("status", flat=True))
    pending = sum(s not in Capture.FINAL for s in statuses)
    if pending or not statuses:
        reason = (
            f"{pending} of {len(statuses)} ranks have not ended: no verdict until every "
            "rank's samples are analysed"
            if statuses
            else "the group has no captures"
        )
        return {"straggler": None, "classes": [], "findings": [], "job_report_reason": reason}
    report = group.job_report or group_report_update(group_id=group.pk) or {}
    return {**{key: report.get(key) for key in REPORT_KEYS}, "job_report_reason": None}
