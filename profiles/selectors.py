"""Reads for captures: lists, stored stats and flamegraph views.

Pages read stored stats and never the raw samples: a thread filter sums the
per-thread tables stored at analysis time.
"""

from collections.abc import Iterator
from typing import Any

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KT, KeyTransform

from profiles import pyspy

from . import capture_files, pipeline, redact
from .models import Capture, CaptureGroup, Comment


def capture_rows(qs: QuerySet[Capture]) -> QuerySet[Capture]:
    """Captures for a table: a few stats keys, never the whole stats JSON."""
    comments = (
        Comment.objects.filter(capture=OuterRef("pk"))
        .values("capture")
        .annotate(c=Count("pk"))
        .values("c")
    )
    return (
        qs.select_related("host", "run", "process")
        .prefetch_related("tags")
        .defer("stats", "progress", "gpu_samples", "error")
        .annotate(
            total_samples=KeyTransform("total_samples", "stats"),
            categories=KeyTransform("categories", "stats"),
            verdict=KT("stats__lag__verdict"),
            max_behind_s=KeyTransform("max_behind_s", KeyTransform("lag", "stats")),
            recommended_rate=KeyTransform("recommended_rate", KeyTransform("lag", "stats")),
            comment_count=Subquery(comments),
            retry_line=KT("progress__retry__message"),
        )
    )


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
    tree = pipeline.read_flamegraph(capture)
    if tree is None:
        return None
    if threads:
        tree = pyspy.select_threads(tree, threads)
    return pyspy.prune_flamegraph(tree, max_nodes)


def capture_stats(*, capture: Capture, threads: list[str] | None = None) -> dict[str, Any] | None:
    """Stored stats; for a thread subset, the sum of the stored per-thread tables.

    The tables hold every count per thread, so this reads no raw samples and still
    works after the raw file was pruned. Lag is the whole process's (py-spy samples
    all threads together), so it is kept from the full analysis.
    """
    if not threads or not capture.stats:
        return capture.stats
    tables = pipeline.read_thread_tables(capture)
    if tables is None:
        return None
    stats = dict(pyspy.combine_threads(tables, threads))
    if "lag" in capture.stats:
        stats["lag"] = capture.stats["lag"]
    return stats


def group_captures(*, group: CaptureGroup) -> list[Capture]:
    # Keyword sets come along: the "who waits" table classifies frames with them.
    captures = group.captures.select_related("host", "process", "keyword_set")
    return list(captures.prefetch_related("keyword_set__keywords").order_by("process__role", "pk"))


def group_rows(*, captures: list[Capture]) -> list[dict[str, Any]]:
    """One row per process: category shares, lag verdict, samples, and how far its
    category mix sits from the others' mean (the straggler stands out)."""
    shares = [_category_shares(c) for c in captures]
    categories = sorted({name for share in shares for name in share})
    rows = []
    for index, capture in enumerate(captures):
        others = [s for i, s in enumerate(shares) if i != index and s]
        distance = _distance(shares[index], others, categories) if shares[index] and others else 0.0
        rows.append(
            {
                "capture": capture,
                "shares": [shares[index].get(c, 0.0) for c in categories],
                "distance": round(distance, 1),
            }
        )
    if rows and max(r["distance"] for r in rows) > 0:
        max(rows, key=lambda r: r["distance"])["outlier"] = True
    return rows


def _category_shares(capture: Capture) -> dict[str, float]:
    stats = capture.stats or {}
    return {c["category"]: c["percent"] for c in stats.get("categories", [])}


def _distance(
    own: dict[str, float], others: list[dict[str, float]], categories: list[str]
) -> float:
    """L1 distance in percentage points between a process and the mean of the others."""
    mean = {c: sum(o.get(c, 0.0) for o in others) / len(others) for c in categories}
    return sum(abs(own.get(c, 0.0) - mean[c]) for c in categories)


def group_flamegraph(
    *, captures: list[Capture], max_nodes: int = 8192, only: set[int] | None = None
) -> dict[str, Any]:
    """The whole job's flamegraph: each process's stored tree under a process node."""
    children = []
    for capture in captures:
        if only and capture.pk not in only:
            continue
        tree = pipeline.read_flamegraph(capture)
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
        if redact.hides_server_details(capture, user):
            tree = redact.tree(tree)
        yield capture.target_label, tree


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
    tree = pipeline.read_flamegraph(capture)
    if tree is None:
        return None
    if hide_commands:
        tree = redact.tree(tree)
    if threads:
        tree = pyspy.select_threads(tree, threads)
    result: dict[str, Any] = dict(pyspy.sandwich(tree, frame))
    result["callers"] = pyspy.prune_flamegraph(result["callers"], max_nodes)
    result["callees"] = pyspy.prune_flamegraph(result["callees"], max_nodes)
    result["suggestions"] = (
        [] if result["occurrences"] else [f for f, _ in pyspy.frames_like(tree, frame)]
    )
    return result
