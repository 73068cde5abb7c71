"""Whole-job compare: two whole-job captures of a run, rank by rank (before → after).

`GET /api/compare/groups/?a=&b=` and the page `/compare/groups/?a=&b=` both take their
numbers from `group_comparison()`, which hands the two stored job reports and each
rank's stored step-thread functions to the engine (profiles.pyspy.compare.jobs). Of the
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
from config.api_errors import Conflict
from config.params import parse_id
from profiles.captures import redact
from profiles.compare import groups_schema as schema
from profiles.jobs import bounds, roster
from profiles.models import Capture, CaptureGroup
from profiles.pyspy.compare import (
    compare_jobs,
    compared_classes,
    rank_functions,
)


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


def group_comparison(a: CaptureGroup, b: CaptureGroup, params: Any = None) -> dict[str, Any]:
    """The engine's comparison, with the two captures named (`groups`): every role's
    states pooled, per class and overall, and a page of roles compared one by one
    (`?offset=&limit=`, profiles.jobs.bounds; past one page the stragglers lead);
    the functions pooled over at most FUNCTION_RANKS_PER_CLASS ranks of each class."""
    report_a, report_b = a.job_report, b.job_report
    names_a = {r["name"] for r in report_a.get("ranks") or []}
    shared = [r["name"] for r in report_b.get("ranks") or [] if r["name"] in names_a]
    page = bounds.page_from(params or {}, len(shared))
    stragglers = [(report.get("straggler") or {}).get("name") for report in (report_b, report_a)]
    order = bounds.lead_order(shared, stragglers) if len(shared) > page.limit else shared
    pooled = [
        (label, bounds.spread(names, bounds.FUNCTION_RANKS_PER_CLASS, keep=stragglers))
        for label, names in compared_classes(report_b, report_a)
    ]
    wanted = {name for _, names in pooled for name in names}
    result = compare_jobs(
        report_a,
        report_b,
        _functions(a, wanted),
        _functions(b, wanted),
        roles=page.of(order),
        function_classes=pooled,
    )
    result["roles_page"] = page.as_json()
    result["groups"] = {"a": _summary(a), "b": _summary(b)}
    return result


def _functions(group: CaptureGroup, wanted: set[str]) -> dict[str, Any]:
    """{rank name: its step-thread functions} of the `wanted` ranks, reading only the
    two keys it needs."""
    captures = group.job_report.get("captures") or {}
    names = {pk: name for name, pk in captures.items() if name in wanted}
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
        raise ValueError("Give two whole-job capture ids: ?a=<id>&b=<id>.") from exc


def _captures(*groups: CaptureGroup) -> QuerySet[Capture]:
    return roster.redaction_captures(*groups)


@schema.compare_groups
@api(["GET"])
def compare_groups_api(request) -> Response:
    """`GET /api/compare/groups/?a=&b=`: the whole-job comparison (module doc)."""
    try:
        a, b = pair(*_ids(request.query_params))
    except CaptureGroup.DoesNotExist as exc:
        raise NotFound(str(exc)) from exc
    except Incomparable as exc:  # the groups' state: a dump, no report yet
        raise Conflict(str(exc)) from exc
    except ValueError as exc:
        raise ValidationError({"detail": str(exc)}) from exc
    result = group_comparison(a, b, request.query_params)
    return Response(redact.for_viewer(result, user=request.user, captures=_captures(a, b)))


def _pager(request: HttpRequest, page: dict[str, Any]) -> dict[str, Any] | None:
    """The page's links to the previous and next roles, when they do not fit one page."""
    if page["total"] <= page["limit"]:
        return None
    query = request.GET.copy()

    def link(offset: int) -> str:
        query["offset"] = str(offset)
        return f"?{query.urlencode()}"

    start, limit = page["offset"], page["limit"]
    return {
        "first": start + 1,
        "last": min(page["total"], start + limit),
        "total": page["total"],
        "previous": link(max(0, start - limit)) if start > 0 else None,
        "next": link(page["next"]) if page["next"] is not None else None,
    }


@require_GET
def compare_groups(request: HttpRequest) -> HttpResponse:
    """`/compare/groups/?a=&b=`: the page; with `a` alone, pick the other capture."""
    context: dict[str, Any] = {}
    status = 200
    try:
        first = parse_id(request.GET.get("a"), name="a") if request.GET.get("a") else None
    except DjangoValidationError:
        first = None
    # The anchor and the choices are named, not compared: their reports stay unread.
    light = CaptureGroup.objects.defer("job_report", "stacks")
    anchor = light.select_related("run").filter(pk=first).first() if first else None
    if anchor is not None:
        context["anchor"] = anchor
        choices = list(
            light.filter(run=anchor.run, kind="record")
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
            result = group_comparison(a, b, request.GET)
            result = redact.for_viewer(result, user=request.user, captures=_captures(a, b))
            findings = result["findings"]
            context.update(
                result=result,
                a=a,
                b=b,
                findings_groups=[(k, findings[k]) for k in ("new", "resolved", "persisting")],
                roles_pager=_pager(request, result["roles_page"]),
            )
        except CaptureGroup.DoesNotExist as exc:
            context["problem"], status = str(exc), 404
        except (Incomparable, ValueError) as exc:  # ValueError: ids that are no ids
            context["problem"], status = str(exc), 400
    return render(request, "profiles/compare_groups.html", context, status=status)
