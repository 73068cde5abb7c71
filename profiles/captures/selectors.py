"""Reads for captures: lists, stored stats and flamegraph views.

Pages read stored stats and never the raw samples: a thread filter sums the
per-thread tables stored at analysis time.
"""

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KT, KeyTransform
from django.urls import reverse

from profiles import pyspy
from profiles.captures import redact
from profiles.models import Capture, CaptureGroup, Comment
from profiles.storage import files as capture_files
from runs import capture_fields
from runs import selectors as run_selectors
from runs.models import Run
from runs.permissions import can_launch


def capture_rows(qs: QuerySet[Capture]) -> QuerySet[Capture]:
    """Captures for a table: a few stats keys, never the whole stats JSON. A table
    shows each row's states (`with_row_states`), not a keyword lens."""
    comments = (
        Comment.objects.filter(capture=OuterRef("pk"))
        .values("capture")
        .annotate(c=Count("pk"))
        .values("c")
    )
    return (
        qs.select_related("host", "run", "process", "process__launch")
        .prefetch_related("tags")
        .defer("stats", "progress", "gpu_samples", "error")
        .annotate(
            total_samples=KeyTransform("total_samples", "stats"),
            step_threads=KeyTransform("step_threads", "stats"),
            all_states=KeyTransform("states", "stats"),
            verdict=KT("stats__lag__verdict"),
            max_behind_s=KeyTransform("max_behind_s", KeyTransform("lag", "stats")),
            recommended_rate=KeyTransform("recommended_rate", KeyTransform("lag", "stats")),
            comment_count=Subquery(comments),
            retry_line=KT("progress__retry__message"),
        )
    )


def state_shares(step_threads: dict[str, Any] | None) -> dict[str, float]:
    """Percent per state of the step threads as the analysis stored them (states with
    samples only, in the engine's order)."""
    return {s["state"]: s["percent"] for s in (step_threads or {}).get("states") or []}


def step_states(capture: Capture, reported: dict[str, float] | None = None) -> dict[str, float]:
    """Percent per state of the capture's step threads, as its analysis stored them (the
    threads and states the findings and the whole-job report judge); for a capture
    analysed before they were stored, as the stored job report has them (`reported`),
    else none."""
    stats = capture.stats or {}
    if not stats.get("total_samples"):
        return {}
    if "step_threads" in stats:
        return state_shares(stats["step_threads"])
    return reported or {}


def row_states(
    step_threads: dict[str, Any] | None, all_states: list[dict[str, Any]] | None = None
) -> dict[str, Any] | None:
    """What a table row shows of a capture: its step threads' states (the words of the
    capture page's headline and of the whole-job report), or every thread's for a
    capture analysed before step threads were stored; None when it stored no states."""
    shares = state_shares(step_threads)
    who = _step_who(step_threads or {})
    if not shares and all_states:
        shares = {s["state"]: s["percent"] for s in all_states if s.get("samples")}
        who = "all threads"
    # The engine's vocabulary only: a state name becomes a CSS class.
    shares = {s: p for s, p in shares.items() if s in pyspy.STATES}
    if not shares:
        return None
    order = sorted(shares, key=lambda s: -shares[s])
    return {
        "who": who,
        "segments": [{"state": s, "percent": round(p, 1)} for s, p in shares.items() if p > 0],
        "top": {"state": order[0], "percent": shares[order[0]]},
        "title": " · ".join(f"{s} {shares[s]:.1f}%" for s in order[:4]),
    }


def _step_who(step_threads: dict[str, Any]) -> str:
    names = step_threads.get("names") or []
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"step thread{'s' if len(names) != 1 else ''}: {shown}" if names else "step threads"


def with_row_states(rows: Iterable[Capture]) -> list[Capture]:
    """`capture_rows` rows with `table_states` (row_states) set on each, for the tables."""
    found = list(rows)
    for capture in found:
        capture.table_states = row_states(capture.step_threads, capture.all_states)
    return found


def lag_history(condition: Q, limit: int = 200) -> list[dict[str, Any]]:
    """Earlier captures whose sampler fell behind, for the capture button's warning."""
    rows = (
        Capture.objects.filter(condition, stats__lag__verdict__in=["degraded", "unreliable"])
        .order_by("-queued_at")
        .values(
            "pk",
            "host_id",
            "pid",
            "process_id",
            "rate",
            "stats__lag__verdict",
            "stats__lag__recommended_rate",
            "stats__lag__max_behind_s",
        )[:limit]
    )
    return [
        {
            "id": r["pk"],
            "host": r["host_id"],
            "pid": r["pid"],
            "process": r["process_id"],
            "rate": r["rate"],
            "verdict": r["stats__lag__verdict"],
            "recommended_rate": r["stats__lag__recommended_rate"],
            "max_behind_s": r["stats__lag__max_behind_s"],
        }
        for r in rows
    ]


def capture_flamegraph(
    *, capture: Capture, max_nodes: int = 8192, threads: list[str] | None = None
) -> dict[str, Any] | None:
    """The stored tree, optionally limited to some threads, pruned to `max_nodes`."""
    tree = capture_files.read_flamegraph(capture)
    if tree is None:
        return None
    if threads:
        tree = pyspy.select_threads(tree, threads)
    return pyspy.prune_flamegraph(tree, max_nodes)


def capture_stats(*, capture: Capture, threads: list[str] | None = None) -> dict[str, Any] | None:
    """Stored stats; for a thread subset, the sum of the stored per-thread tables.

    The tables hold every count per thread, so this reads no raw samples and still
    works after the raw file was pruned. Lag is the whole process's (py-spy samples
    all threads together) and so are the step threads: both are kept from the full
    analysis.
    """
    if not threads or not capture.stats:
        return capture.stats
    tables = capture_files.read_thread_tables(capture)
    if tables is None:
        return None
    stats = dict(pyspy.combine_threads(tables, threads))
    # Facts of the whole process: py-spy's lag, which threads run the step, its time.
    for key in ("lag", "step_threads", "time"):
        if key in capture.stats:
            stats[key] = capture.stats[key]
    return stats


def group_captures(*, group: CaptureGroup) -> list[Capture]:
    """The group's captures in page order, for reading their files: without their
    stats (a 1,024-rank job's are tens of megabytes) or GPU samples."""
    captures = group.captures.select_related("host", "process").defer("stats", "gpu_samples")
    return list(captures.order_by("process__role", "pk"))


def group_flamegraph(
    *, captures: list[Capture], max_nodes: int = 8192, only: set[int] | None = None
) -> dict[str, Any]:
    """The whole job's flamegraph: each process's stored tree under a process node."""
    children = []
    for capture in captures:
        if only and capture.pk not in only:
            continue
        tree = capture_files.read_flamegraph(capture)
        if tree is not None:
            children.append({**tree, "name": f"process {capture.target_label}"})
    total = sum(child["value"] for child in children)
    return pyspy.prune_flamegraph({"name": "job", "value": total, "children": children}, max_nodes)


def group_trees(*, captures: list[Capture], user: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each process's stored tree under its label, read one at a time (a 64-rank job
    is never held whole), with command lines hidden from a viewer who may not see
    them, as in the per-capture downloads."""
    for capture in captures:
        tree = capture_files.read_flamegraph(capture)
        if tree is None:
            continue
        yield capture.target_label, redact.for_viewer(tree, user=user, captures=[capture])


def capture_sandwich(
    *,
    capture: Capture,
    frame: str,
    threads: list[str] | None = None,
    max_nodes: int = 2000,
    hide_commands: bool = False,
) -> dict[str, Any] | None:
    """One frame's callers and callees from the stored tree (never the raw samples).

    With no exact match, `suggestions` lists frames whose name contains the text.
    With `hide_commands` the search runs on the redacted tree, so a guessed command
    line is neither found nor suggested.
    """
    tree = capture_files.read_flamegraph(capture)
    if tree is None:
        return None
    if hide_commands:
        tree = redact.redaction.hide(tree)
    if threads:
        tree = pyspy.select_threads(tree, threads)
    result: dict[str, Any] = dict(pyspy.sandwich(tree, frame))
    result["callers"] = pyspy.prune_flamegraph(result["callers"], max_nodes)
    result["callees"] = pyspy.prune_flamegraph(result["callees"], max_nodes)
    result["suggestions"] = (
        [] if result["occurrences"] else [f for f, _ in pyspy.frames_like(tree, frame)]
    )
    return result


def launch_groups(*, run: Run, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The launch rows of runs.launches.launch_timeline with their whole-job captures:
    each goes to the launch most of its processes belong to."""
    by_launch = {row["pk"]: row for row in rows}
    seen: dict[int, dict[int, int]] = {}
    created: dict[int, tuple[datetime, str]] = {}
    captures = Capture.objects.filter(group__run=run, process__launch__isnull=False).values_list(
        "group_id", "process__launch_id", "group__created_at", "group__kind"
    )
    for group_id, launch_id, at, kind in captures:
        counts = seen.setdefault(group_id, {})
        counts[launch_id] = counts.get(launch_id, 0) + 1
        created[group_id] = (at, kind)
    for group_id, counts in sorted(seen.items()):
        launch_id = max(counts, key=lambda k: counts[k])
        at, kind = created[group_id]
        by_launch[launch_id]["groups"].append(
            {
                "pk": group_id,
                "created_at": at,
                "kind": kind,
                "url": reverse("profiles:group_detail", args=[group_id]),
            }
        )
    return rows


def launch_context(user, run: Run | None, condition: Q) -> dict[str, Any]:
    """What the capture buttons of a page need (json_script "launch-context"): the
    settings they start with (those "Capture all" remembered on the run, if any), the
    settings' description to build the advanced panel from, and the lag history."""
    allowed = can_launch(user)
    return {
        "canLaunch": allowed,
        "run": run.pk if run else None,
        "defaults": run_selectors.capture_settings_for(run, job=False),
        "schema": capture_fields.page_description() if allowed else None,
        "lagHistory": lag_history(condition) if allowed else [],
    }
