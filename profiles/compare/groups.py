"""Whole-job compare: two whole-job captures of a run, rank by rank (before → after).

`GET /api/compare/groups/?a=&b=` and the page `/compare/groups/?a=&b=` both take their
numbers from `group_comparison()`, which hands the two stored job reports and each
rank's stored step-thread functions to the engine (profiles.pyspy.job_compare). Of the
two, the earlier is `a` (before) and the later `b` (after), whatever order the URL gives.
Only the stats' `step_threads` and `thread_functions` are read, never raw samples.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from config.api import api
from config.params import parse_id
from profiles.captures import redact
from profiles.compare import groups_schema as schema
from profiles.models import Capture, CaptureGroup
from profiles.pyspy.job_compare import compare_jobs, rank_functions


class Incomparable(ValueError):
    """The two whole-job captures cannot be compared (the reason, for people)."""


def pair(a_id: int, b_id: int) -> tuple[CaptureGroup, CaptureGroup]:
    """The two groups, earlier first; CaptureGroup.DoesNotExist or Incomparable."""
    found = CaptureGroup.objects.select_related("run").filter(pk__in=[a_id, b_id])
    groups = {g.pk: g for g in found}
    if a_id not in groups or b_id not in groups:
        missing = b_id if a_id in groups else a_id
        raise CaptureGroup.DoesNotExist(f"No whole-job capture {missing}.")
    if a_id == b_id:
        raise Incomparable("Pick two different whole-job captures.")
    a, b = sorted((groups[a_id], groups[b_id]), key=lambda g: (g.created_at, g.pk))
    for group in (a, b):
        if group.kind != "record":
            raise Incomparable(f"Whole-job capture #{group.pk} is a dump: compare recordings.")
        if group.job_report is None:
            why = group.report_error or "its ranks have not all ended yet"
            raise Incomparable(f"Whole-job capture #{group.pk} has no report: {why}.")
    return a, b


def group_comparison(a: CaptureGroup, b: CaptureGroup) -> dict[str, Any]:
    """The engine's comparison, with the two captures named (`groups`)."""
    result = compare_jobs(a.job_report, b.job_report, _functions(a), _functions(b))
    result["groups"] = {"a": _summary(a), "b": _summary(b)}
    return result


def _functions(group: CaptureGroup) -> dict[str, Any]:
    """{rank name: its step-thread functions}, reading only the two keys it needs."""
    names = {pk: name for name, pk in (group.job_report.get("captures") or {}).items()}
    rows = Capture.objects.filter(group=group, pk__in=names).values_list(
        "pk", "stats__step_threads", "stats__thread_functions"
    )
    return {
        names[pk]: rank_functions({"step_threads": step, "thread_functions": functions})
        for pk, step, functions in rows
    }


def _summary(group: CaptureGroup) -> dict[str, Any]:
    launches = sorted(
        set(
            group.captures.filter(process__launch__isnull=False).values_list(
                "process__launch__number", flat=True
            )
        )
    )
    return {
        "id": group.pk,
        "run": group.run_id,
        "created_at": group.created_at,
        "launches": launches,
        "url": group.get_absolute_url(),
    }


def _ids(params: Any) -> tuple[int, int]:
    try:
        return parse_id(params.get("a"), name="a"), parse_id(params.get("b"), name="b")
    except DjangoValidationError as exc:
        raise Incomparable("Give two whole-job capture ids: ?a=<id>&b=<id>.") from exc


def _captures(*groups: CaptureGroup) -> QuerySet[Capture]:
    return Capture.objects.filter(group__in=groups).select_related("host").only("host")


@schema.compare_groups
@api(["GET"])
def compare_groups_api(request) -> Response:
    """`GET /api/compare/groups/?a=&b=`: the whole-job comparison (module doc)."""
    try:
        a, b = pair(*_ids(request.query_params))
    except CaptureGroup.DoesNotExist as exc:
        raise NotFound(str(exc)) from exc
    except Incomparable as exc:
        raise ValidationError({"detail": str(exc)}) from exc
    result = group_comparison(a, b)
    return Response(redact.for_viewer(result, user=request.user, captures=_captures(a, b)))


@require_GET
def compare_groups(request: HttpRequest) -> HttpResponse:
    """`/compare/groups/?a=&b=`: the page; with `a` alone, pick the other capture."""
    context: dict[str, Any] = {}
    status = 200
    try:
        first = parse_id(request.GET.get("a"), name="a") if request.GET.get("a") else None
    except DjangoValidationError:
        first = None
    anchor = CaptureGroup.objects.select_related("run").filter(pk=first).first() if first else None
    if anchor is not None:
        context["anchor"] = anchor
        choices = list(
            CaptureGroup.objects.filter(run=anchor.run, kind="record")
            .exclude(pk=anchor.pk)
            .order_by("-created_at")[:50]
        )
        earlier = [g for g in choices if g.created_at < anchor.created_at]
        context["choices"] = choices
        # Preselected: the one asked for, else the latest before this one.
        context["picked"] = request.GET.get("b") or str((earlier or choices or [anchor])[0].pk)
    if request.GET.get("b"):
        try:
            a, b = pair(*_ids(request.GET))
            result = group_comparison(a, b)
            result = redact.for_viewer(result, user=request.user, captures=_captures(a, b))
            findings = result["findings"]
            context.update(
                result=result,
                a=a,
                b=b,
                findings_groups=[(k, findings[k]) for k in ("new", "resolved", "persisting")],
            )
        except CaptureGroup.DoesNotExist as exc:
            context["problem"], status = str(exc), 404
        except Incomparable as exc:
            context["problem"], status = str(exc), 400
    return render(request, "profiles/compare_groups.html", context, status=status)
