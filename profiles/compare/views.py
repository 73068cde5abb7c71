"""Comparison of two captures and differential flamegraphs (trends: trend_views.py).

The page and `GET /api/compare/` both take their numbers from `comparison_for()`, which
hands stored stats to the engine (`profiles.pyspy.compare.captures`). Of two captures the
earlier (by queue time) is "before", the later "after", whatever order the URL gives.
"""

from __future__ import annotations

from typing import Any, TypedDict

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from config.api import api
from config.api_errors import Conflict
from config.params import parse_id, query_int
from profiles.api import schema as api_schema
from profiles.captures import redact, selectors
from profiles.compare.lens import capture_set_name
from profiles.models import Capture
from profiles.pyspy import compare as engine
from profiles.pyspy import select_threads
from profiles.storage import files as capture_files

DIFF_MAX_NODES = 3000
FRAME_ROWS_SHOWN = 15


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
        for c in Capture.objects.select_related("host", "run", "process", "keyword_set").filter(
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
            context.update(_compare_context(before, after, threads, request.user))
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


def _compare_context(before: Capture, after: Capture, threads: list[str], user) -> dict[str, Any]:
    result = comparison_for(before, after, threads)
    result = redact.for_viewer(result, user=user, captures=(before, after))
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
        "share_tables": _share_tables(result, _pair_lens(before, after)),
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


def _pair_lens(before: Capture, after: Capture) -> str:
    """The keyword lens of the two captures, naming their sets ("Keyword lens: GPU
    training (default set)"; each side's when they differ)."""
    a, b = capture_set_name(before.keyword_set), capture_set_name(after.keyword_set)
    return f"Keyword lens: {a}" if a == b else f"Keyword lens: {a} (before), {b} (after)"


def _share_tables(result: dict[str, Any], lens: str) -> list[dict[str, Any]]:
    def with_sides(rows: list[engine.ShareRow]) -> list[dict[str, Any]]:
        return [{**r, "sides": [r["before"], r["after"]]} for r in rows]

    def matched(row: engine.ShareRow) -> bool:
        return any(side and side["samples"] for side in (row["before"], row["after"]))

    keywords = [r for r in result["keywords"] if matched(r) or r["verdict"] == engine.NOT_MEASURED]
    return [
        {
            "id": "states",
            "title": "Thread states",
            "label": "State",
            "rows": with_sides(result["states"]),
            "silent": 0,
            # The headline: "collective 61.9% -> 31.0%", real changes only, both measured.
            "moved": [
                r
                for r in result["states"]
                if r["verdict"] == engine.REAL_CHANGE and r["before"] and r["after"]
            ],
            "empty": "No thread states: a capture was analysed before they were stored "
            "(re-analyse it).",
        },
        # A keyword set is a lens the user picked: its tables say so and name the set.
        {
            "id": "categories",
            "title": "Categories",
            "lens": lens,
            "label": "Category",
            "rows": with_sides(result["categories"]),
            "silent": 0,
        },
        {
            "id": "keywords",
            "title": "Keywords",
            "lens": lens,
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
        result = comparison_for(before, after, _threads(request.query_params))
        return Response(redact.for_viewer(result, user=request.user, captures=(before, after)))
    except Http404 as exc:
        raise NotFound("No such capture.") from exc
    except Incomparable as exc:  # the captures' state: no samples yet, or failed
        raise Conflict(str(exc)) from exc
    except ValueError as exc:
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
    body = {"view": view, "shown": shown.pk, "other": other.pk, "tree": tree}
    return JsonResponse(redact.for_viewer(body, user=request.user, captures=(before, after)))


def _full_tree(capture: Capture, threads: list[str] | None) -> dict[str, Any] | None:
    # The other side is matched by path, so it is not pruned further than stored.
    tree = capture_files.read_flamegraph(capture)
    if tree is not None and threads:
        tree = dict(select_threads(tree, threads))
    return tree


def _max_nodes(request: HttpRequest) -> int:
    wanted = query_int(request.GET, "max_nodes")
    return min(max(DIFF_MAX_NODES if wanted is None else wanted, 100), 8192)
