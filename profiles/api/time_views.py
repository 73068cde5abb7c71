"""JSON API for time (contract 3, issue 39): a capture's timeline, a window of it as a
capture of its own, and a whole-job capture's ranks on one clock.

- `GET /api/captures/<id>/timeline/?bucket=S`
- `GET /api/captures/<id>/flamegraph/?from=S&to=S` (profiles.api.views hands it here)
- `GET /api/captures/<id>/window/?from=S&to=S`
- `GET /api/groups/<id>/timeline/?bucket=S`

A capture without time answers 409 with the reason (imported, recorded without
`--idle`, samples pruned); a bad number 400.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers as s
from rest_framework.response import Response

from config.api import api
from config.api_schema import READ_ERRORS, errors, shape_of, typed
from config.params import parse_float
from profiles import pyspy
from profiles.api.schema import (
    FindingSerializer,
    RankPageSerializer,
    State,
    rank_page_parameters,
)
from profiles.captures import redact, timelines
from profiles.jobs import roster
from profiles.jobs import timeline as job_timeline
from profiles.jobs.bounds import RANKS_PER_PAGE, TIMELINE_MAX_RANKS
from profiles.models import Capture, CaptureGroup
from profiles.pyspy.core import types

TIME = ["time"]
FrameStatSerializer = shape_of(types.FrameStat)
# Seconds: a bucket from 10 ms (a 100 Hz capture's own step) to an hour; a window
# inside a day-long capture.
BUCKET = {"minimum": 0.01, "maximum": 3600.0}
SECONDS = {"minimum": 0.0, "maximum": 86400.0}


# The answer shapes come from the engine's types (profiles.pyspy.core.types), described here.
THREAD = {"name": "The thread's name (untrusted text).", "tid": "Its OS thread id."}
TimelineThreadSerializer = typed(
    types.TimelineThread,
    {
        **THREAD,
        "dominant": "Per bucket, the state of the largest share (null: no samples).",
        "states": "Per state the thread has, its share of the bucket's samples, 0-1.",
    },
    hints={"dominant": list[State | None]},
)
UntimedThreadSerializer = typed(
    types.UntimedThread,
    {
        **THREAD,
        "samples": "Its samples: fewer than the capture's rounds.",
        "reason": "Why it cannot be placed in time.",
    },
)
TimelineSerializer = typed(
    types.Timeline,
    {
        "start": "Host epoch seconds where bucket 0 starts.",
        "bucket_s": "Seconds per bucket.",
        "threads": "Each thread sampled in every round.",
        "untimed": "Threads that cannot be placed in time.",
    },
)


class TimelineMissingRankSerializer(s.Serializer):
    """A rank of the whole job without a timeline (the dashboard's own answer)."""

    name = s.CharField(help_text="The rank's role (or `pid N`).")
    capture = s.IntegerField(help_text="Its capture's id.")
    reason = s.CharField(help_text="Why it has no timeline (its status, or the reason).")


class TimelineClassSerializer(s.Serializer):
    """A class of ranks of the stored job report (`?class=` its index, from 0)."""

    label = s.CharField(help_text="What its ranks do alike.")
    ranks = s.IntegerField(help_text="How many ranks it has.")


typed(
    types.AlignedRank,
    {
        "name": "The rank's role (or `pid N`).",
        "capture": "Its capture's id.",
        "clock": "Its first and last samples, epoch seconds on its host's clock.",
        "offset_s": "Seconds added to its host's clock.",
        "threads": "Each thread sampled in every round.",
        "untimed": "Threads that cannot be placed in time.",
    },
    hints={"capture": int, "clock": list[float]},
    name="TimelineRank",
)
GroupTimelineSerializer = typed(
    types.AlignedTimeline,
    {
        "start": "Epoch seconds on the server's clock where bucket 0 starts (the job's "
        "first sample: the same on every page).",
        "bucket_s": "Seconds per bucket.",
        "ranks": "The page's ranks with time (capture order; past one page the straggler "
        "and one rank of each class first).",
        "missing": "The page's ranks without time, and why.",
        "page": "Where the page lies among the ranks asked for (all, a class, or named).",
        "classes": "The stored report's classes of ranks (empty before the report).",
    },
    hints={
        "missing": list[TimelineMissingRankSerializer],
        "page": RankPageSerializer,
        "classes": list[TimelineClassSerializer],
    },
    name="GroupTimeline",
)
WindowThreadSerializer = typed(
    types.WindowThread,
    {**THREAD, "samples": "Its samples in the span.", "states": "Samples per state it has."},
)


class WindowSerializer(s.Serializer):
    threads = WindowThreadSerializer(many=True, help_text="Each placed thread's states in it.")
    rest = WindowThreadSerializer(many=True, help_text="The same outside it: the rest.")
    total_samples = s.IntegerField(help_text="Samples in the window (placed threads).")
    top_self = FrameStatSerializer(many=True, help_text="Hottest leaf frames in it.")
    top_total = FrameStatSerializer(many=True, help_text="Inclusive, each sample once.")
    findings = FindingSerializer(many=True, help_text="The window's findings.")


# `from` is a keyword: declared apart.
WindowSerializer._declared_fields["from"] = s.FloatField(
    help_text="The window's start, seconds since the first sample."
)
WindowSerializer._declared_fields["to"] = s.FloatField(
    help_text="Its end (excluded), seconds since the first sample."
)
TIMELINE, GROUP_TIMELINE, WINDOW = TimelineSerializer, GroupTimelineSerializer, WindowSerializer
NO_TIME = inline_serializer("NoTime", {"detail": s.CharField(help_text="Why there is no time.")})
_BUCKET = OpenApiParameter(
    "bucket",
    {"type": "number", **BUCKET},
    description="Seconds per bucket (default: a few hundred buckets).",
)
_FROM = OpenApiParameter(
    "from",
    {"type": "number", **SECONDS},
    required=True,
    description="Seconds since the first sample.",
)
_TO = OpenApiParameter(
    "to", {"type": "number", **SECONDS}, required=True, description="Seconds since the start."
)


def _bucket(params) -> float | None:
    return parse_float(params["bucket"], name="bucket", **BUCKET) if "bucket" in params else None


def window_bounds(params) -> tuple[float, float]:
    start = parse_float(params.get("from"), name="from", **SECONDS)
    end = parse_float(params.get("to"), name="to", **SECONDS)
    return start, end


def _answer(request, compute: Callable[[], Any], captures: Any) -> Response:
    """A time read's answer: 409 with the reason when the capture keeps no time, 400
    when the engine cannot do what the request asks, else `compute()` redacted for the
    viewer."""
    try:
        body = compute()
    except (timelines.NoTime, job_timeline.NotInReport) as exc:
        return Response({"detail": str(exc)}, status=409)
    except job_timeline.NoSuchRank as exc:
        return Response({"detail": str(exc)}, status=404)
    except pyspy.ProfileError as exc:
        return Response({"detail": str(exc)}, status=400)
    return Response(redact.for_viewer(body, user=request.user, captures=captures))


@extend_schema(
    summary="A capture's timeline",
    description="Each placed thread's states bucket by bucket on the host's clock; 409 when "
    "the capture keeps no time (the reason in `detail`).",
    parameters=[_BUCKET],
    responses={200: TIMELINE, 409: NO_TIME, **errors(400, *READ_ERRORS)},
    tags=TIME,
)
@api(["GET"])
def capture_timeline(request, pk: int):
    capture = get_object_or_404(Capture, pk=pk)
    params = request.query_params
    return _answer(request, lambda: timelines.capture_timeline(capture, _bucket(params)), [capture])


def window_flamegraph(request, capture: Capture, max_nodes: int) -> Response:
    """`flamegraph/?from=&to=`: that window's flamegraph (profiles.api.views); without
    `to` the window runs to the capture's end, without `from` from its start."""
    params = request.query_params
    start = parse_float(params["from"], name="from", **SECONDS) if "from" in params else 0.0
    end = parse_float(params["to"], name="to", **SECONDS) if "to" in params else SECONDS["maximum"]
    return _answer(
        request,
        lambda: timelines.capture_window_flamegraph(capture, start, end, max_nodes),
        [capture],
    )


@extend_schema(
    summary="A window of a capture, as a capture of its own",
    description="Per thread its states in [from, to) and in the rest of the capture, and "
    "the window's findings and top frames (analysed in a bounded process).",
    parameters=[_FROM, _TO],
    responses={200: WINDOW, 409: NO_TIME, **errors(400, *READ_ERRORS)},
    tags=TIME,
)
@api(["GET"])
def capture_window(request, pk: int):
    capture = get_object_or_404(Capture.objects.select_related("run"), pk=pk)
    start, end = window_bounds(request.query_params)
    return _answer(request, lambda: timelines.window_analysis(capture, start, end), [capture])


@extend_schema(
    summary="A whole-job capture's ranks on one clock",
    description="Each rank's timeline, its host's clock moved by the offset measured when "
    "its session started; ranks without time under `missing` with the reason. A page of "
    f"ranks at a time (at most {TIMELINE_MAX_RANKS}, default {RANKS_PER_PAGE}): every "
    "rank, one class's (`class`) or those named (`ranks`); the buckets cover the whole "
    "job on every page.",
    parameters=[
        _BUCKET,
        OpenApiParameter(
            "ranks",
            {"type": "string", "pattern": job_timeline.RANKS_PATTERN},
            description="Only these ranks, comma-separated role names (at most "
            f"{TIMELINE_MAX_RANKS}); 404 naming one the capture does not have.",
        ),
        OpenApiParameter(
            "class",
            {"type": "integer", "minimum": 0, "maximum": job_timeline.CLASS_MAX},
            description="Only the ranks of this class of the stored report (its index in "
            "`classes`, from 0); 409 before the report is stored or past its classes.",
        ),
        *rank_page_parameters("ranks", TIMELINE_MAX_RANKS),
    ],
    responses={
        200: GROUP_TIMELINE,
        409: OpenApiResponse(
            NO_TIME, "No rank has time, or `class` names a class the report lacks (yet)."
        ),
        **errors(400, *READ_ERRORS),
    },
    tags=TIME,
)
@api(["GET"])
def group_timeline(request, pk: int):
    group = get_object_or_404(roster.without_report(CaptureGroup.objects), pk=pk)
    params = request.query_params
    return _answer(
        request,
        lambda: job_timeline.group_timeline(group, _bucket(params), params),
        roster.redaction_captures(group),
    )
