"""Reads for the group page, `GET /api/groups/<id>/live/` and `GET /api/groups/<id>/`:
one row per process (live while it runs) and the whole-job report (findings, the
straggler explained by what it does more, classes, each rank's step-thread states) as
the analysis stored it on the group (profiles.jobs.report).

Everything comes from stored stats, progress and the stored report; nothing here
classifies samples or re-reads raw ones. (An earlier "differs most" verdict, worked
out here from category shares, named a rank by what it did *less*; the stored
straggler replaced it.) Every process is counted (profiles.jobs.roster, without its
stats); a page of them gets rows and its ranks' states (profiles.jobs.bounds), so a
1,024-rank job reads a page's worth of stats.
"""

from __future__ import annotations

from typing import Any

from django.db.models import BooleanField, Case, Value, When
from django.db.models.fields.json import KeyTransform

from profiles import pyspy
from profiles.captures import redact, selectors
from profiles.jobs import bounds, roster
from profiles.jobs import services as jobs
from profiles.models import Capture, CaptureGroup

SAME_WINDOW_S = 1.0  # start skew within which ranks sampled the same moments
# What a process row reads of a capture's stats (a rank's whole stats are tens of KB).
ROW_STATS = ("total_samples", "lag", "step_threads", "idle_included", "rounds")


def group_page(group: CaptureGroup, params: Any = None) -> dict[str, Any]:
    """Everything the group page draws, as JSON-ready data: every process's status
    counted, a page of processes (`?offset=&limit=`, profiles.jobs.bounds) in rows."""
    ranks = roster.roster(group)
    page = bounds.page_from(params or {}, len(ranks))
    captures = page_captures(group, page)
    summary = jobs.group_summary(group)
    reported = _reported_states(group, {c.pk for c in captures})
    rows = [process_row(c, reported=reported.get(c.pk)) for c in captures]
    # States no rank's step threads are in would be columns of zeros.
    states = [s for s in pyspy.STATES if any(row["states"].get(s) for row in rows)]
    final = all(rank.final for rank in ranks)
    return {
        "group": group.pk,
        "kind": group.kind,
        "run": group.run_id,
        "status": summary["status"],
        "start_skew_s": summary["start_skew_s"],
        "final": final,
        "states": states,
        "rows": rows,
        "rows_page": page.as_json(),
        "counts": roster.status_counts(ranks),
        "report": group_evidence(group, captures, summary, ranks),
        "skipped": skipped_processes(group),
        "flame": flame_processes(group, ranks),
        # GPU timelines, once every process has ended (they arrive with the samples)
        "processes": [{"id": c.pk, "label": c.target_label, "gpu": c.gpu_samples}
                      for c in captures] if final else [],
    }  # fmt: skip


def page_captures(group: CaptureGroup, page: bounds.Page) -> list[Capture]:
    """The page's captures, in page order. Read-only rows: their `stats` hold only the
    keys a row shows (ROW_STATS; None when not analysed), read in the database."""
    captures = roster.ordered(group.captures.select_related("host", "process")).defer("stats")
    if group.kind == "dump":  # its rows need no stats: each holds every dump of a rank
        return list(captures[page.offset : page.offset + page.limit])
    ids = roster.page_ids(group, page)
    parts = {f"stats_{key}": KeyTransform(key, "stats") for key in ROW_STATS}
    analysed = Case(When(stats__isnull=True, then=Value(False)), default=Value(True),
                    output_field=BooleanField())  # fmt: skip
    rows = list(captures.filter(pk__in=ids).annotate(stats_stored=analysed, **parts))
    for capture in rows:
        stored = {key: getattr(capture, f"stats_{key}") for key in ROW_STATS}
        capture.stats = (
            {k: v for k, v in stored.items() if v is not None} if capture.stats_stored else None
        )
    return rows


def page_for_viewer(group: CaptureGroup, user, params: Any = None) -> dict[str, Any]:
    """The group page's numbers as `user` may see them (`GET /api/groups/<id>/live/`)."""
    captures = roster.redaction_captures(group)
    return redact.for_viewer(group_page(group, params), user=user, captures=captures)


def flame_processes(group: CaptureGroup, ranks: list[roster.RankRow]) -> list[dict[str, Any]]:
    """The processes the page's merged flamegraph offers: every one with samples, or, past
    FLAMEGRAPH_PROCESSES of them, one rank of each class of the stored report (the
    straggler for its own; `alike`: how many ranks it stands for), the first ones
    until the report is stored."""
    sampled = [rank for rank in ranks if rank.has_samples]
    every = [{"id": r.id, "label": r.label, "url": r.url, "alike": None} for r in sampled]
    if len(sampled) <= bounds.FLAMEGRAPH_PROCESSES:
        return every
    by_id = {rank.id: rank for rank in sampled}
    chosen = [
        {"id": pk, "label": by_id[pk].label, "url": by_id[pk].url, "alike": count}
        for pk, count, _ in class_representatives(group.job_report or {})
        if pk in by_id
    ]
    return chosen or every[: bounds.FLAMEGRAPH_PROCESSES]


def class_representatives(report: dict[str, Any]) -> list[tuple[int, int, str]]:
    """(capture id, ranks in its class, the class's label) of one rank of each class of
    a job report (its `classes`, `captures` and `straggler`): the straggler for its
    class, else the class's first rank."""
    ids = report.get("captures") or {}
    straggler = (report.get("straggler") or {}).get("name")
    chosen = []
    for klass in report.get("classes") or []:
        names = [n for n in klass.get("ranks") or [] if n in ids]
        if names:
            name = straggler if straggler in names else names[0]
            chosen.append((ids[name], len(klass["ranks"]), str(klass.get("label") or "")))
    return chosen


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


def _reported_states(group: CaptureGroup, ids: set[int]) -> dict[int, dict[str, float]]:
    """Capture id -> its rank's step-thread states in the stored job report, for the
    captures `ids` (a page)."""
    report = group.job_report or {}
    names = {name: pk for name, pk in (report.get("captures") or {}).items() if pk in ids}
    return {
        names[rank["name"]]: {s["state"]: s["percent"] for s in rank["states"] if s.get("samples")}
        for rank in report.get("ranks") or []
        if rank.get("name") in names
    }


def same_window(skew_s: float | None) -> bool:
    """Whether the ranks sampled the same moments: every py-spy said it samples within
    SAME_WINDOW_S of the others, by its host's clock (group_pipeline), whatever the
    duration (a longer capture does not make a late start the same window); not known
    (None) until every rank has started."""
    return skew_s is not None and skew_s <= SAME_WINDOW_S


# --- the whole-job report, as stored ---------------------------------------------------


def report_reason(group: CaptureGroup, captures: list[Any]) -> str | None:
    """Why the group shows no verdict, or None when its stored report is there
    (`captures`: every capture of the group, its roster, or their statuses)."""
    if not captures:
        return "the group has no captures"
    if pending := sum(not _final(c) for c in captures):
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


def _final(capture: Any) -> bool:
    if isinstance(capture, str):
        return capture in Capture.FINAL
    return capture.final if isinstance(capture, roster.RankRow) else capture.is_final


def group_report_fields(group: CaptureGroup, page_ids: set[int] | None = None) -> dict[str, Any]:
    """`report_status`, `straggler`, `classes`, `findings`, `workers` (the DataLoader
    workers of the ranks of `page_ids`, default every rank), `job_report_reason` (and
    `stacks` for a whole-job dump) for the API."""
    reason = report_reason(group, list(group.captures.values_list("status", flat=True)))
    report = (group.job_report or {}) if reason is None else {}
    ids = report.get("captures") or {}
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
            if rank.get("workers") and (page_ids is None or ids.get(rank["name"]) in page_ids)
        },
        "wait_model": report.get("wait_model"),
        "job_report_reason": reason,
    }
    if group.kind == "dump":
        fields["stacks"] = group.stacks if reason is None else None
        fields["repeat"], fields["interval"] = group.dump_repeat, group.dump_interval_s
    return fields


def group_evidence(
    group: CaptureGroup,
    captures: list[Capture],
    summary: dict[str, Any],
    ranks: list[roster.RankRow],
) -> dict[str, Any]:
    """The stored report for the page: findings, straggler, classes, and the step-thread
    states of the ranks of `captures` (a page of `ranks`, every capture of the group),
    with links to the ranks' captures; only its reason until then."""
    reason = report_reason(group, ranks)
    if reason is not None:
        failed = group.report_status == "failed"
        return {"ready": False, "ended": all(r.final for r in ranks), "reason": reason,
                "failed": failed}  # fmt: skip
    if group.kind == "dump":
        return group_stacks(group)
    report = group.job_report or {}
    ids = report.get("captures") or {}
    shown = {c.pk for c in captures}
    stats = {c.pk: c.stats or {} for c in captures}
    sampled = {name: stats[pk] for name, pk in ids.items() if pk in shown}
    reported = report.get("ranks") or []
    without = report.get("without_samples") or []
    straggler = report.get("straggler")
    findings = report.get("findings") or []
    # Links for the names the page shows: its ranks, the straggler, each finding's first
    # rank (its frames open there) and the ranks without samples listed.
    firsts = [(f.get("ranks") or [None])[0] for f in findings]
    named = [*sampled, (straggler or {}).get("name"), *firsts, *without[: bounds.RANKS_PER_PAGE]]
    urls = {name: roster.capture_url(ids[name]) for name in named if name in ids}
    skew = summary.get("start_skew_s")
    return {
        "ready": True,
        "findings": findings,
        "straggler": straggler,
        "classes": report.get("classes") or [],
        "ranks": [_rank_row(rank, urls, sampled) for rank in reported if rank["name"] in sampled],
        "ranks_total": len(reported),
        "without_samples": without[: bounds.RANKS_PER_PAGE],
        "without_samples_total": len(without),
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
        "urls": {name: roster.capture_url(pk) for name, pk in ids.items()},
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


def skipped_processes(group: CaptureGroup) -> list[dict[str, Any]]:
    """Processes of the run, attached before the group, that it did not capture
    because their last check found them exited (not those an earlier relaunch had
    already replaced: runs.launches)."""
    rows = (
        group.run.processes.select_related("host")
        .filter(created_at__lte=group.created_at, alive=False)
        .exclude(replaced_at__lte=group.created_at)
        .exclude(captures__group=group)
    )
    return [{"label": str(p), "checked_at": p.checked_at} for p in rows]


def _sampled(capture: Capture, progress: dict[str, Any], running: bool) -> float | None:
    """Seconds sampled: live from py-spy's first sample, then py-spy's own span (the
    claim-to-finish time only for captures recorded before spans were kept)."""
    if running:
        return progress.get("elapsed_s")
    return progress.get("sampled_s", capture.wall_s)
