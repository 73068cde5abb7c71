"""Comparison of two captures, differential flamegraphs, and share trends.

The page and `GET /api/compare/` both take their numbers from `comparison_for()`, which
hands stored stats to the engine (`profiles.pyspy.compare`). Of two captures the
earlier (by queue time) is "before", the later "after", whatever order the URL gives.
"""

from __future__ import annotations

from statistics import fmean
from typing import Any, TypedDict

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from config.params import parse_id, query_int
from profiles.pyspy import GPU_KEYWORDS, select_threads
from profiles.pyspy import compare as engine
from runs.api import api
from runs.models import Run

from . import api_schema, pipeline, selectors
from .models import Capture, Keyword

DIFF_MAX_NODES = 3000
FRAME_ROWS_SHOWN = 15
TREND_CAPTURES = 500
TREND_RUNS_DEFAULT = 20
TREND_RUNS_MAX = 200
_TREND_FIELDS = (
    "id",
    "queued_at",
    "finished_at",
    "scheduled",
    "stats",
    "run_id",
    "pid",
    "group_id",
)


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
    """`?a=&b=`, or two `?pick=` (the captures list's checkboxes)."""
    picked = [p for p in params.getlist("pick") if p.strip()] if hasattr(params, "getlist") else []
    raw = picked if len(picked) == 2 else [params.get("a", ""), params.get("b", "")]
    try:
        return parse_id(raw[0], name="a"), parse_id(raw[1], name="b")
    except DjangoValidationError as exc:
        raise ValueError("Give two capture ids, as ?a=<id>&b=<id>.") from exc


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
    missing = [f"#{i}" for i in dict.fromkeys((a_id, b_id)) if i not in found]
    if missing:
        raise Http404(f"No capture {' or '.join(missing)}.")
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


@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    """`/compare/?a=&b=`: shares with intervals and verdicts, and the differential tree."""
    context: dict[str, Any] = {"recent": _recent_done(), "frame_rows_shown": FRAME_ROWS_SHOWN}
    status = 200
    if any(k in request.GET for k in ("a", "b", "pick")):
        try:
            before, after = _pair(*_pair_ids(request.GET))
            threads = _threads(request.GET)
            context.update(_compare_context(before, after, threads))
        except Http404 as exc:
            # A full page with the navigation and the form, not the bare 404.
            context["problem"], status = f"{exc} Pick two captures below.", 404
        except ValueError as exc:
            context["problem"], status = str(exc), 400
        except Incomparable as exc:
            context["problem"] = str(exc)
    return render(request, "profiles/compare.html", context, status=status)


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


@api_schema.compare
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


@require_GET
def diff_flamegraph(request: HttpRequest) -> JsonResponse:
    """`/compare/diff.json?a=&b=&view=after|before`: one tree coloured by change.

    view=after is the later tree (what grew or appeared); view=before the earlier one
    (what shrank or vanished). Built from the stored trees, never from raw samples.
    """
    try:
        before, after = _pair(*_pair_ids(request.GET))
    except ValueError as exc:
        return JsonResponse({"detail": str(exc)}, status=400)
    except Http404 as exc:
        return JsonResponse({"detail": str(exc)}, status=404)
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
    wanted = query_int(request.GET, "max_nodes")
    return min(max(DIFF_MAX_NODES if wanted is None else wanted, 100), 8192)


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


def _units(captures: list[Capture]) -> list[list[Capture]]:
    """Captures as plotted: the ranks of one whole-job capture (CaptureGroup) are one
    unit (they ran at the same time; joining them would draw a fake time series)."""
    units: dict[object, list[Capture]] = {}
    for capture in captures:
        units.setdefault(("g", capture.group_id) if capture.group_id else capture.pk, []).append(
            capture
        )
    return list(units.values())


def _unit_point(unit: list[Capture], kind: str, name: str, label: str) -> TrendPoint | None:
    shares = [(c, s) for c in unit if (s := engine.share_of(c.stats, kind, name)) is not None]
    if not shares:
        return None
    first, share = shares[0]
    if len(unit) == 1:
        return _point(first, share, label)
    # One point per whole-job capture: the ranks' mean, the band their range.
    values = [s["percent"] for _, s in shares]
    point = _point(first, share, f"job capture #{first.group_id} ({len(values)} ranks)")
    point.update(percent=round(fmean(values), 2), low=min(values), high=max(values))
    point["url"] = reverse("profiles:group_detail", args=[first.group_id])
    point["at"] = min(c.finished_at or c.queued_at for c in unit).isoformat()
    return point


def _done_with_samples(captures: QuerySet[Capture]) -> list[Capture]:
    rows = captures.filter(status=Capture.Status.DONE).exclude(kind=Capture.Kind.DUMP)
    return [c for c in rows.only(*_TREND_FIELDS) if (c.stats or {}).get("total_samples")]


@require_GET
def run_trends(request: HttpRequest, pk: int) -> JsonResponse:
    """Category shares over a run's captures (x = capture time), one series per category."""
    run = get_object_or_404(Run, pk=pk)
    captures = _done_with_samples(Capture.objects.filter(run=run).order_by("-queued_at"))
    captures = captures[:TREND_CAPTURES][::-1]
    names = list(dict.fromkeys(r["category"] for c in captures for r in c.stats["categories"]))
    series: list[TrendSeries] = []
    units = _units(captures)
    for name in names:
        points = [
            point
            for unit in units
            if (point := _unit_point(unit, "category", name, _capture_label(unit[0]))) is not None
        ]
        series.append({"name": name, "points": points})
    return JsonResponse({"run": {"id": run.pk, "name": run.name}, "series": series})


def _capture_label(capture: Capture) -> str:
    return f"#{capture.pk} pid {capture.pid}" if capture.pid else f"#{capture.pk}"


def _trend_names() -> dict[str, list[str]]:
    keywords = Keyword.objects.values_list("keyword", "category")
    return {
        "category": sorted({c for _, c in keywords} | {k.category for k in GPU_KEYWORDS}),
        "keyword": sorted({k for k, _ in keywords} | {k.keyword for k in GPU_KEYWORDS}),
    }


@require_GET
def trends(request: HttpRequest) -> HttpResponse:
    """`/trends/`: one keyword's or category's share over the last N runs."""
    options = _trend_options(request)
    names = _trend_names()
    page = {**options, "dataUrl": reverse("compare:trends_data")}
    context = {
        "options": options,
        "names": names,
        "page": page,
        "unknown": options["name"] not in names[options["kind"]],
    }
    return render(request, "profiles/trends.html", context)


def _trend_options(request: HttpRequest) -> dict[str, Any]:
    kind = "keyword" if request.GET.get("kind") == "keyword" else "category"
    mode = "mean" if request.GET.get("mode") == "mean" else "latest"
    runs = query_int(request.GET, "runs")
    runs = TREND_RUNS_DEFAULT if runs is None else runs
    name = request.GET.get("name") or ("sync" if kind == "category" else "cuStreamSynchronize")
    return {"kind": kind, "name": name, "mode": mode, "runs": min(max(runs, 1), TREND_RUNS_MAX)}


@require_GET
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
    unknown = options["name"] not in _trend_names()[options["kind"]]
    return JsonResponse({**options, "unknown": unknown, "series": series})


def _run_point(run: Run, captures: list[Capture], options: dict[str, Any]) -> TrendPoint | None:
    """The run's latest unit (a capture, or every rank of a whole-job capture as one),
    or in "mean" mode the mean over its units: a 64-rank job weighs as one capture."""
    kind, name = options["kind"], options["name"]
    units = _units(captures)  # newest first, as `captures` comes
    points = [p for u in units if (p := _unit_point(u, kind, name, run.name)) is not None]
    if not points:
        return None
    if options["mode"] == "latest":
        points = points[:1]
    point = points[0]
    if point["label"] != run.name:  # a whole-job capture: say which one
        point["label"] = f"{run.name} · {point['label']}"
    point["at"] = (run.started_at or run.created_at).isoformat()
    if len(points) > 1:
        # The mean of per-unit shares; the band is their range, not an interval.
        values = [p["percent"] for p in points]
        point.update(percent=round(fmean(values), 2), low=min(values), high=max(values))
        point["label"] = f"{run.name} (mean of {len(values)} captures)"
    return point
