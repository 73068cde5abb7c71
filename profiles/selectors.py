"""Reads for captures: lists, stored stats and flamegraph views.

Pages read stored stats; raw samples are re-parsed only for a thread filter, and
that result is cached.
"""

import hashlib
from typing import Any

from django.core.cache import cache
from django.db.models import Count, QuerySet

from profiles import pyspy
from runs.models import Run

from . import pipeline
from .models import Capture


def capture_list(*, run: Run | None = None, status: str | None = None) -> QuerySet[Capture]:
    qs = Capture.objects.select_related("host", "run", "process", "requested_by").prefetch_related(
        "tags"
    )
    if run is not None:
        qs = qs.filter(run=run)
    if status:
        qs = qs.filter(status=status)
    return qs.annotate(comment_count=Count("comments"))


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
    """Stored stats; for a thread subset, the engine's stats on those threads (cached)."""
    if not threads or not capture.stats:
        return capture.stats
    if not capture.raw_file or capture.raw_pruned_at or capture.raw_format == "dump":
        return None
    key_src = f"{capture.pk}:{capture.raw_file.name}:{capture.keyword_set_id}:{sorted(threads)}"
    key = "stats:" + hashlib.sha256(key_src.encode()).hexdigest()
    stats = cache.get(key)
    if stats is None:
        stats = _thread_stats(capture, threads)
        cache.set(key, stats, timeout=3600)
    return stats


def _thread_stats(capture: Capture, threads: list[str]) -> dict[str, Any]:
    options = pyspy.AnalysisOptions(
        keywords=pipeline.keywords_for(capture.keyword_set),
        threads=frozenset(threads),
        include_flamegraph=False,
    )
    with pipeline.local_copy(capture.raw_file) as path:
        profile = pyspy.read_profile(path)
    stats = dict(pyspy.analyze(profile, options, log_text=pipeline.read_log(capture)))
    stats.pop("flamegraph", None)
    return stats
