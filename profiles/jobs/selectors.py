"""Reads for the group page, `GET /api/groups/<id>/live/` and `GET /api/groups/<id>/`:
one row per process (live while it runs) and the whole-job report (findings, the
straggler explained by what it does more, classes, each rank's step-thread states) as
the analysis stored it on the group (profiles.jobs.report).

Everything comes from stored stats, progress and the stored report; nothing here
classifies samples or re-reads raw ones. (An earlier "differs most" verdict, worked
out here from category shares, named a rank by what it did *less*; the stored
straggler replaced it.)
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from profiles import pyspy
from profiles.captures import redact, selectors
from profiles.jobs import services as jobs
from profiles.models import Capture, CaptureGroup

SAME_WINDOW_S = 1.0  # start skew within which ranks sampled the same moments


def group_page(group: CaptureGroup) -> dict[str, Any]:
    """Everything the group page draws, as JSON-ready data."""
    captures = selectors.group_captures(group=group)
    summary = jobs.group_summary(group)
    reported = _reported_states(group)
    rows = [process_row(c, reported=reported.get(c.pk)) for c in captures]
    # States no rank's step threads are in would be columns of zeros.
    states = [s for s in pyspy.STATES if any(row["states"].get(s) for row in rows)]
    final = all(row["final"] for row in rows)
    return {
        "group": group.pk,
        "kind": group.kind,
        "run": group.run_id,
        "status": summary["status"],
        "start_skew_s": summary["start_skew_s"],
        "final": final,
        "states": states,
        "rows": rows,
        "report": group_evidence(group, captures, summary),
        "skipped": skipped_processes(group, captures),
        # GPU timelines, once every process has ended (they arrive with the samples)
        "processes": [{"id": c.pk, "label": c.target_label, "gpu": c.gpu_samples}
                      for c in captures] if final else [],
    }  # fmt: skip


def page_for_viewer(group: CaptureGroup, user) -> dict[str, Any]:
    """The group page's numbers as `user` may see them (`GET /api/groups/<id>/live/`)."""
    captures = group.captures.select_related("host").defer("stats")
    return redact.for_viewer(group_page(group), user=user, captures=captures)


def _samples(capture: Capture) -> int:
    return int((capture.stats or {}).get("total_samples") or 0)


def process_row(capture: Capture, *, reported: dict[str, float] | None = None) -> dict[str, Any]:
    """Status, elapsed, lag and samples of one process; None where there is no number."""
    if capture.kind == Capture.Kind.DUMP:
        return _dump_row(capture)
    progress, stats = capture.progress or {}, capture.stats or {}
    lag = stats.get("lag") or {}
    running = capture.status == Capture.Status.RUNNING
    failed = capture.status == Capture.Status.FAILED
    samples = _samples(capture) if capture.stats else None
    # Claimed, but py-spy has not said it samples yet (ssh, py-spy's attach): no
    # elapsed, lag or rounds to show, only that it is attaching.
    attaching = running and capture.sampling_started_at is None
    return {
        **_row_head(capture),
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
        # The step threads' states, the words of "What the job says" (not a keyword lens).
        "states": {} if failed else selectors.step_states(capture, reported),
        "has_samples": not failed and bool(samples),
        "error": capture.error if failed else "",
        "error_cause": capture.error_cause if failed else "",
        "note": capture.note,
        "python_only": bool(progress.get("python_only")),
        # Its DataLoader workers (--subprocesses): the rank's, never rows of their own.
        "workers": _workers_at_once(progress),
    }


def _workers_at_once(progress: dict[str, Any]) -> int | None:
    workers = progress.get("workers")
    count = workers.get("count") if isinstance(workers, dict) else None
    return count if isinstance(count, int) else None


def _row_head(capture: Capture) -> dict[str, Any]:
    """What every process row starts with: which capture, its label and status."""
    return {
        "id": capture.pk,
        "url": capture.get_absolute_url(),
        "label": capture.target_label,
        "role": capture.process.role if capture.process_id else "",
        "status": capture.status,
        "final": capture.is_final,
    }


def _dump_row(capture: Capture) -> dict[str, Any]:
    """A rank of a whole-job dump: stacks, no samples, lag or states (its stats, every
    dump of the rank, are not even loaded: a 1,024-rank page would read megabytes)."""
    failed = capture.status == Capture.Status.FAILED
    return {
        **_row_head(capture),
        "elapsed_s": None if failed else capture.wall_s,
        "duration_s": None,
        "behind_s": None,
        "samples": None,
        "samples_estimated": None,
        "attaching": capture.status == Capture.Status.RUNNING,
        "rounds_estimated": None,
        "verdict": None,
        "states": {},
        "has_samples": False,
        "error": capture.error if failed else "",
        "error_cause": capture.error_cause if failed else "",
        "note": capture.note,
        "python_only": False,
        "workers": None,
    }


def _reported_states(group: CaptureGroup) -> dict[int, dict[str, float]]:
    """Capture id -> its rank's step-thread states in the stored job report."""
    report = group.job_report or {}
    ids = report.get("captures") or {}
    return {
        ids[rank["name"]]: {s["state"]: s["percent"] for s in rank["states"] if s.get("samples")}
        for rank in report.get("ranks") or []
        if rank.get("name") in ids
    }


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
    status = group.report_status
    if status == "failed":
        return (
            f"the job report could not be computed ({group.report_error}); the ranks' own "
            "captures are complete: open them below, and report this error"
        )
    if status == "pending":
        return (
            "every rank has ended and the job report is being stored (the analysis of "
            "the last rank computes it; a missed one is stored within a minute)"
        )
    return None


def group_report_fields(group: CaptureGroup) -> dict[str, Any]:
    """`report_status`, `straggler`, `classes`, `findings`, `workers` (each rank's
    DataLoader workers), `job_report_reason` (and `stacks` for a whole-job dump) for
    the API."""
    reason = report_reason(group, list(group.captures.only("pk", "group_id", "status")))
    report = (group.job_report or {}) if reason is None else {}
    fields = {
        "kind": group.kind,
        "report_status": group.report_status,
        "report_error": group.report_error or None,
        "straggler": report.get("straggler"),
        "classes": report.get("classes") or [],
        "findings": report.get("findings") or [],
        "workers": {
            rank["name"]: rank["workers"]
            for rank in report.get("ranks") or []
            if rank.get("workers")
        },
        "wait_model": report.get("wait_model"),
        "job_report_reason": reason,
    }
    if group.kind == "dump":
        fields["stacks"] = group.stacks if reason is None else None
        fields["repeat"], fields["interval"] = group.dump_repeat, group.dump_interval_s
    return fields


def group_evidence(
    group: CaptureGroup, captures: list[Capture], summary: dict[str, Any]
) -> dict[str, Any]:
    """The stored report for the page: findings, straggler, classes, and each rank's
    step-thread states, with links to the ranks' captures; only its reason until then."""
    reason = report_reason(group, captures)
    if reason is not None:
        failed = group.report_status == "failed"
        return {"ready": False, "ended": not _unended(captures), "reason": reason,
                "failed": failed}  # fmt: skip
    if group.kind == "dump":
        return group_stacks(group)
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


def group_stacks(group: CaptureGroup) -> dict[str, Any]:
    """A whole-job dump's stored verdict and classes, with links to each rank's dumps."""
    stacks = group.stacks or {}
    ids = stacks.get("captures") or {}
    return {
        "ready": True,
        "kind": "dump",
        "stacks": {k: stacks.get(k) for k in ("verdict", "classes", "ranks", "failed")},
        "urls": {name: reverse("profiles:capture_detail", args=[pk]) for name, pk in ids.items()},
        "repeat": group.dump_repeat,
        "interval": group.dump_interval_s,
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
        "workers": _page_workers(rank.get("workers")),
    }


def _page_workers(workers: Any) -> dict[str, Any] | None:
    """A rank's workers as the page shows them: without their PIDs and command lines
    (the API keeps those), the top 5 functions."""
    if not isinstance(workers, dict):
        return None
    keep = ("count", "processes_seen", "dataloader", "samples", "sampled_percent",
            "outside_percent")  # fmt: skip
    return {**{k: workers.get(k) for k in keep}, "functions": (workers.get("functions") or [])[:5]}


def skipped_processes(group: CaptureGroup, captures: list[Capture]) -> list[dict[str, Any]]:
    """Processes of the run, attached before the group, that it did not capture
    because their last check found them exited (not those an earlier relaunch had
    already replaced: runs.launches)."""
    captured = {c.process_id for c in captures}
    rows = (
        group.run.processes.select_related("host")
        .filter(created_at__lte=group.created_at, alive=False)
        .exclude(replaced_at__lte=group.created_at)
    )
    return [{"label": str(p), "checked_at": p.checked_at} for p in rows if p.pk not in captured]


def _sampled(capture: Capture, progress: dict[str, Any], running: bool) -> float | None:
    """Seconds sampled: live from py-spy's first sample, then py-spy's own span (the
    claim-to-finish time only for captures recorded before spans were kept)."""
    if running:
        return progress.get("elapsed_s")
    return progress.get("sampled_s", capture.wall_s)
