"""Reads for the group page, `GET /api/groups/<id>/live/` and `GET /api/groups/<id>/`:
one row per process (live while it runs) and the whole-job report (findings, the
straggler explained by what it does more, classes, each rank's step-thread states) as
the analysis stored it on the group (profiles.group_report).

Everything comes from stored stats, progress and the stored report; nothing here
classifies samples or re-reads raw ones. (An earlier "differs most" verdict, worked
out here from category shares, named a rank by what it did *less*; the stored
straggler replaced it.)
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from . import jobs, selectors
from .models import Capture, CaptureGroup

SAME_WINDOW_S = 1.0  # start skew within which ranks sampled the same moments


def group_page(group: CaptureGroup) -> dict[str, Any]:
    """Everything the group page draws, as JSON-ready data."""
    captures = selectors.group_captures(group=group)
    summary = jobs.group_summary(group)
    rows = [process_row(c) for c in captures]
    # Categories no process has samples in would be columns of zeros.
    categories = sorted({name for row in rows for name, share in row["shares"].items() if share})
    final = all(row["final"] for row in rows)
    return {
        "group": group.pk,
        "run": group.run_id,
        "status": summary["status"],
        "start_skew_s": summary["start_skew_s"],
        "final": final,
        "categories": categories,
        "rows": rows,
        "report": group_evidence(group, captures, summary),
        "skipped": skipped_processes(group, captures),
        # GPU timelines, once every process has ended (they arrive with the samples)
        "processes": [{"id": c.pk, "label": c.target_label, "gpu": c.gpu_samples}
                      for c in captures] if final else [],
    }  # fmt: skip


def _samples(capture: Capture) -> int:
    return int((capture.stats or {}).get("total_samples") or 0)


def process_row(capture: Capture) -> dict[str, Any]:
    """Status, elapsed, lag and samples of one process; None where there is no number."""
    progress, stats = capture.progress or {}, capture.stats or {}
    lag = stats.get("lag") or {}
    running = capture.status == Capture.Status.RUNNING
    failed = capture.status == Capture.Status.FAILED
    samples = _samples(capture) if capture.stats else None
    # Claimed, but py-spy has not said it samples yet (ssh, py-spy's attach): no
    # elapsed, lag or rounds to show, only that it is attaching.
    attaching = running and capture.sampling_started_at is None
    return {
        "id": capture.pk,
        "url": capture.get_absolute_url(),
        "label": capture.target_label,
        "role": capture.process.role if capture.process_id else "",
        "status": capture.status,
        "final": capture.is_final,
        # A failed process has no numbers, only its cause (shown on a row of its own).
        "elapsed_s": None if failed else _sampled(capture, progress, running),
        "duration_s": capture.duration,
        "behind_s": None
        if failed
        else (progress.get("behind_s") if running else lag.get("max_behind_s")),
        "samples": None if failed else samples,
        "samples_estimated": progress.get("expected_samples") if running else None,
        "attaching": attaching,
        # The live count was py-spy's rounds; the result counts samples (one per thread
        # per round, idle threads left out without --idle): the page explains a gap.
        "rounds_estimated": None if running or failed else progress.get("expected_samples"),
        "verdict": lag.get("verdict"),
        "shares": {} if failed else _shares(capture),
        "has_samples": not failed and bool(samples),
        "error": capture.error if failed else "",
        "error_cause": capture.error_cause if failed else "",
        "note": capture.note,
        "python_only": bool(progress.get("python_only")),
    }


def _shares(capture: Capture) -> dict[str, float]:
    return {c["category"]: c["percent"] for c in (capture.stats or {}).get("categories", [])}


def same_window(skew_s: float | None) -> bool:
    """Whether the ranks sampled the same moments: every py-spy said it samples within
    SAME_WINDOW_S of the others, by its host's clock (group_pipeline), whatever the
    duration (a longer capture does not make a late start the same window); not known
    (None) until every rank has started."""
    return skew_s is not None and skew_s <= SAME_WINDOW_S


# --- the whole-job report, as stored ---------------------------------------------------


def _unended(captures: list[Capture]) -> int:
    return sum(not c.is_final for c in captures)


def report_reason(group: CaptureGroup, captures: list[Capture]) -> str | None:
    """Why the group shows no verdict, or None when its stored report is there."""
    if not captures:
        return "the group has no captures"
    if pending := _unended(captures):
        return (
            f"{pending} of {len(captures)} ranks have not ended: no verdict until every "
            "rank's samples are analysed"
        )
    if group.job_report is None:
        return (
            "every rank has ended and the job report is being stored (the analysis of "
            "the last rank computes it; a missed one is stored within a minute)"
        )
    return None


def group_report_fields(group: CaptureGroup) -> dict[str, Any]:
    """`straggler`, `classes`, `findings` and `job_report_reason` for the API."""
    reason = report_reason(group, list(group.captures.all()))
    report = group.job_report if reason is None else {}
    return {
        "straggler": report.get("straggler"),
        "classes": report.get("classes") or [],
        "findings": report.get("findings") or [],
        "job_report_reason": reason,
    }


def group_evidence(
    group: CaptureGroup, captures: list[Capture], summary: dict[str, Any]
) -> dict[str, Any]:
    """The stored report for the page: findings, straggler, classes, and each rank's
    step-thread states, with links to the ranks' captures; only its reason until then."""
    reason = report_reason(group, captures)
    if reason is not None:
        return {"ready": False, "ended": not _unended(captures), "reason": reason}
    report = group.job_report or {}
    ids = report.get("captures") or {}
    urls = {name: reverse("profiles:capture_detail", args=[pk]) for name, pk in ids.items()}
    stats = {c.pk: c.stats or {} for c in captures}
    sampled = {name: stats.get(pk, {}) for name, pk in ids.items()}
    skew = summary.get("start_skew_s")
    return {
        "ready": True,
        "findings": report.get("findings") or [],
        "straggler": report.get("straggler"),
        "classes": report.get("classes") or [],
        "ranks": [_rank_row(rank, urls, sampled) for rank in report.get("ranks") or []],
        "without_samples": report.get("without_samples") or [],
        "urls": urls,
        "same_window": same_window(skew),
        "start_skew_s": skew,
    }


def _rank_row(rank: dict[str, Any], urls: dict[str, str], sampled: dict) -> dict[str, Any]:
    # The states with samples and one call site each are what the page shows: the rest
    # stays in the API (a 64-rank page would carry ten times the bytes).
    states = [
        {**s, "user_callers": (s.get("user_callers") or [])[:1]}
        for s in rank["states"]
        if s.get("samples")
    ]
    stats = sampled.get(rank["name"]) or {}
    return {
        **{key: rank.get(key) for key in ("name", "step_threads", "detected_by", "samples")},
        "states": states,
        "url": urls.get(rank["name"]),
        # Without --idle a blocked step thread leaves no sample: the page says how many
        # of py-spy's rounds the step threads' samples fill.
        "idle_included": stats.get("idle_included"),
        "rounds": stats.get("rounds"),
    }


def skipped_processes(group: CaptureGroup, captures: list[Capture]) -> list[dict[str, Any]]:
    """Processes of the run, attached before the group, that it did not capture
    because their last check found them exited."""
    captured = {c.process_id for c in captures}
    rows = group.run.processes.select_related("host").filter(
        created_at__lte=group.created_at, alive=False
    )
    return [{"label": str(p), "checked_at": p.checked_at} for p in rows if p.pk not in captured]


def _sampled(capture: Capture, progress: dict[str, Any], running: bool) -> float | None:
    """Seconds sampled: live from py-spy's first sample, then py-spy's own span (the
    claim-to-finish time only for captures recorded before spans were kept)."""
    if running:
        return progress.get("elapsed_s")
    return progress.get("sampled_s", capture.wall_s)
