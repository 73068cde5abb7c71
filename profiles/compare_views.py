"""Comparison of two captures, differential flamegraphs, and share trends.

The page and `GET /api/compare/` both take their numbers from `comparison_for()`, which
hands stored stats to the engine (`profiles.pyspy.compare`). Of two captures the
earlier (by queue time) is "before", the later "after", whatever order the URL gives.
"""

from __future__ import annotations

from statistics import fmean
from typing import Any, TypedDict

from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from profiles.pyspy import GPU_KEYWORDS, select_threads
from profiles.pyspy import compare as engine
from runs.api import api
from runs.models import Run

from . import pipeline, selectors
from .models import Capture, Keyword

DIFF_MAX_NODES = 3000
TREND_CAPTURES = 500
TREND_RUNS_DEFAULT = 20
TREND_RUNS_MAX = 200
_TREND_FIELDS = ("id", "queued_at", "finished_at", "scheduled", "stats", "run_id", "pid")


class Incomparable(Exception):
    """A capture that has no sample statistics (not done, a dump, or failed)."""


class CaptureSummary(TypedDict):
    id: int
    url: str
    target: str
    run: str | None
    at: str
    status: str
    total_samples: int
    lag_verdict: str | None


class TrendPoint(TypedDict):
    capture: int
    url: str
    at: str
    label: str
    percent: float
    low: float
    high: float
    lag: str | None
    scheduled: bool


class TrendSeries(TypedDict):
    name: str
    points: list[TrendPoint]


# --- shared reads -------------------------------------------------------------------


def _pair_ids(params: Any) -> tuple[int, int]:
    try:
        return int(params.get("a", "")), int(params.get("b", ""))
    except ValueError as exc:
        raise ValueError("give two capture ids as ?a=<id>&b=<id>") from exc


def _threads(params: Any) -> list[str]:
    return [t for raw in params.getlist("thread") for t in raw.split(",") if t.strip()]


def _pair(a_id: int, b_id: int) -> tuple[Capture, Capture]:
    """The two captures, earlier first; Http404 when either is missing."""
    found = {
        c.pk: c
        for c in Capture.objects.select_related("host", "run", "process").filter(
            pk__in=[a_id, b_id]
        )
    }
    if a_id not in found or b_id not in found:
        raise Http404("No such capture.")
    pair = sorted({found[a_id], found[b_id]}, key=lambda c: (c.queued_at, c.pk))
    return (pair[0], pair[-1])


def _summary(capture: Capture) -> CaptureSummary:
    stats = capture.stats or {}
    return {
        "id": capture.pk,
        "url": capture.get_absolute_url(),
        "target": capture.target_label,
        "run": capture.run.name if capture.run_id else None,
        "at": (capture.finished_at or capture.queued_at).isoformat(),
        "status": capture.status,
        "total_samples": int(stats.get("total_samples") or 0),
        "lag_verdict": capture.lag_verdict,
    }


def _table_stats(capture: Capture, threads: list[str]) -> tuple[dict[str, Any], bool]:
    """Stats for the tables and whether the thread filter could be applied to them."""
    if not capture.stats or not capture.stats.get("total_samples"):
        raise Incomparable(f"Capture #{capture.pk} has no samples to compare ({capture.status}).")
    if not threads:
        return capture.stats, True
    filtered = selectors.capture_stats(capture=capture, threads=threads)
    return (filtered, True) if filtered else (capture.stats, False)


def comparison_for(before: Capture, after: Capture, threads: list[str]) -> dict[str, Any]:
    """What the compare page and the API show: the engine's comparison plus context."""
    stats_before, ok_before = _table_stats(before, threads)
    stats_after, ok_after = _table_stats(after, threads)
    return {
        "before": _summary(before),
        "after": _summary(after),
        "threads": threads,
        "threads_applied": bool(threads) and ok_before and ok_after,
        **engine.compare_stats(stats_before, stats_after),
    }


def _thread_names(*captures: Capture) -> list[str]:
    names = {t["name"] for c in captures for t in (c.stats or {}).get("threads", []) if t["name"]}
    return sorted(names)


# --- compare page, API and differential flamegraph ------------------------------------


def compare(request: HttpRequest) -> HttpResponse:
    """`/compare/?a=&b=`: shares with intervals and verdicts, and the differential tree."""
    context: dict[str, Any] = {"recent": _recent_done()}
    if "a" in request.GET or "b" in request.GET:
        try:
            before, after = _pair(*_pair_ids(request.GET))
            threads = _threads(request.GET)
            context.update(_compare_context(before, after, threads))
        except (ValueError, Incomparable) as exc:
            context["problem"] = str(exc)
    return render(request, "profiles/compare.html", context)


def _recent_done() -> QuerySet[Capture]:
    return (
        Capture.objects.filter(status=Capture.Status.DONE)
        .exclude(kind=Capture.Kind.DUMP)
        .only("id", "queued_at", "pid", "original_name")[:50]
    )


def _compare_context(before: Capture, after: Capture, threads: list[str]) -> dict[str, Any]:
    result = comparison_for(before, after, threads)
    page = {
        "a": before.pk,
        "b": after.pk,
        "diffUrl": reverse("compare:diff_flamegraph"),
        "threads": threads,
    }
    return {
        "result": result,
        "before": before,
        "after": after,
        "sides": [("before", before, result["before"]), ("after", after, result["after"])],
        "share_tables": _share_tables(result),
        "frame_tables": [
            {"id": "top-self", "title": "Top self (leaf) frames", "rows": result["top_self"]},
            {
                "id": "top-total",
                "title": "Top total (inclusive) frames",
                "rows": result["top_total"],
            },
        ],
        "thread_names": _thread_names(before, after),
        "page": page,
    }


def _share_tables(result: dict[str, Any]) -> list[dict[str, Any]]:
    def with_sides(rows: list[engine.ShareRow]) -> list[dict[str, Any]]:
        return [{**r, "sides": [r["before"], r["after"]]} for r in rows]

    def matched(row: engine.ShareRow) -> bool:
        return any(side and side["samples"] for side in (row["before"], row["after"]))

    keywords = [r for r in result["keywords"] if matched(r) or r["verdict"] == engine.NOT_MEASURED]
    return [
        {
            "id": "categories",
            "title": "Categories",
            "label": "Category",
            "rows": with_sides(result["categories"]),
            "silent": 0,
        },
        {
            "id": "keywords",
            "title": "Keywords",
            "label": "Keyword",
            "rows": with_sides(keywords),
            "silent": len(result["keywords"]) - len(keywords),
        },
    ]


@api(["GET"])
def compare_api(request) -> Response:
    """`GET /api/compare/?a=&b=[&thread=]`: the numbers the compare page shows."""
    try:
        before, after = _pair(*_pair_ids(request.query_params))
        return Response(comparison_for(before, after, _threads(request.query_params)))
    except Http404 as exc:
        raise NotFound("No such capture.") from exc
    except (ValueError, Incomparable) as exc:
        raise ValidationError({"detail": str(exc)}) from exc


def diff_flamegraph(request: HttpRequest) -> JsonResponse:
    """`/compare/diff.json?a=&b=&view=after|before`: one tree coloured by change.

    view=after is the later tree (what grew or appeared); view=before the earlier one
    (what shrank or vanished). Built from the stored trees, never from raw samples.
    """
    try:
        before, after = _pair(*_pair_ids(request.GET))
    except ValueError as exc:
        return JsonResponse({"detail": str(exc)}, status=400)
    threads = _threads(request.GET) or None
    view = "before" if request.GET.get("view") == "before" else "after"
    shown, other = (after, before) if view == "after" else (before, after)
    shown_tree = selectors.capture_flamegraph(
        capture=shown, max_nodes=_max_nodes(request), threads=threads
    )
    other_tree = _full_tree(other, threads)
    if shown_tree is None or other_tree is None:
        return JsonResponse({"detail": "A capture has no stored flamegraph."}, status=404)
    tree = engine.diff_flamegraph(shown_tree, other_tree, shown_is_after=view == "after")
    return JsonResponse({"view": view, "shown": shown.pk, "other": other.pk, "tree": tree})


def _full_tree(capture: Capture, threads: list[str] | None) -> dict[str, Any] | None:
    # The other side is matched by path, so it is not pruned further than stored.
    tree = pipeline.read_flamegraph(capture)
    if tree is not None and threads:
        tree = dict(select_threads(tree, threads))
    return tree


def _max_nodes(request: HttpRequest) -> int:
    try:
        wanted = int(request.GET.get("max_nodes", DIFF_MAX_NODES))
    except ValueError:
        wanted = DIFF_MAX_NODES
    return min(max(wanted, 100), 8192)


# --- trends ---------------------------------------------------------------------------


def _point(capture: Capture, share: engine.ShareSide, label: str) -> TrendPoint:
    return {
        "capture": capture.pk,
        "url": reverse("profiles:capture_detail", args=[capture.pk]),
        "at": (capture.finished_at or capture.queued_at).isoformat(),
        "label": label,
        "percent": share["percent"],
        "low": share["low"],
        "high": share["high"],
        "lag": capture.lag_verdict,
        "scheduled": capture.scheduled,
    }


def _done_with_samples(captures: QuerySet[Capture]) -> list[Capture]:
    rows = captures.filter(status=Capture.Status.DONE).exclude(kind=Capture.Kind.DUMP)
    return [c for c in rows.only(*_TREND_FIELDS) if (c.stats or {}).get("total_samples")]


def run_trends(request: HttpRequest, pk: int) -> JsonResponse:
    """Category shares over a run's captures (x = capture time), one series per category."""
    run = get_object_or_404(Run, pk=pk)
    captures = _done_with_samples(Capture.objects.filter(run=run).order_by("-queued_at"))
    captures = captures[:TREND_CAPTURES][::-1]
    names = list(dict.fromkeys(r["category"] for c in captures for r in c.stats["categories"]))
    series: list[TrendSeries] = []
    for name in names:
        points = [
            _point(c, share, f"#{c.pk} pid {c.pid}" if c.pid else f"#{c.pk}")
            for c in captures
            if (share := engine.share_of(c.stats, "category", name)) is not None
        ]
        series.append({"name": name, "points": points})
    return JsonResponse({"run": {"id": run.pk, "name": run.name}, "series": series})


def trends(request: HttpRequest) -> HttpResponse:
    """`/trends/`: one keyword's or category's share over the last N runs."""
    options = _trend_options(request)
    keywords = Keyword.objects.values_list("keyword", "category")
    names = {
        "category": sorted({c for _, c in keywords} | {k.category for k in GPU_KEYWORDS}),
        "keyword": sorted({k for k, _ in keywords} | {k.keyword for k in GPU_KEYWORDS}),
    }
    page = {**options, "dataUrl": reverse("compare:trends_data")}
    return render(
        request, "profiles/trends.html", {"options": options, "names": names, "page": page}
    )


def _trend_options(request: HttpRequest) -> dict[str, Any]:
    kind = "keyword" if request.GET.get("kind") == "keyword" else "category"
    mode = "mean" if request.GET.get("mode") == "mean" else "latest"
    try:
        runs = int(request.GET.get("runs", TREND_RUNS_DEFAULT))
    except ValueError:
        runs = TREND_RUNS_DEFAULT
    name = request.GET.get("name") or ("sync" if kind == "category" else "cuStreamSynchronize")
    return {"kind": kind, "name": name, "mode": mode, "runs": min(max(runs, 1), TREND_RUNS_MAX)}


def trends_data(request: HttpRequest) -> JsonResponse:
    """The cross-run series: per run, its latest done capture's share, or the mean."""
    options = _trend_options(request)
    runs = list(Run.objects.order_by("-created_at")[: options["runs"]])
    by_run: dict[int, list[Capture]] = {}
    qs = Capture.objects.filter(run__in=runs).order_by("-finished_at", "-queued_at")
    for capture in _done_with_samples(qs):
        by_run.setdefault(capture.run_id, []).append(capture)
    points = [
        point
        for run in reversed(runs)
        if (point := _run_point(run, by_run.get(run.pk, []), options)) is not None
    ]
    series: list[TrendSeries] = [{"name": options["name"], "points": points}]
    return JsonResponse({**options, "series": series})


def _run_point(run: Run, captures: list[Capture], options: dict[str, Any]) -> TrendPoint | None:
    shares = [(c, engine.share_of(c.stats, options["kind"], options["name"])) for c in captures]
    shares = [(c, s) for c, s in shares if s is not None]
    if not shares:
        return None
    latest, share = shares[0]
    point = _point(latest, share, run.name)
    point["at"] = (run.started_at or run.created_at).isoformat()
    if options["mode"] == "mean" and len(shares) > 1:
        # The mean of per-capture shares; the band is their range, not an interval.
        values = [s["percent"] for _, s in shares]
        point.update(percent=round(fmean(values), 2), low=min(values), high=max(values))
        point["label"] = f"{run.name} (mean of {len(values)})"
    return point
