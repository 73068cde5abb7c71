"""JSON API for captures (contract 3)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.shortcuts import get_object_or_404
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from config.api import api
from config.api_errors import Conflict
from config.api_fields import IdField, NameOrIdField, PidField
from config.middleware import refusal
from config.params import parse_id, parse_int, query_int
from profiles.api import schema, time_views
from profiles.captures import redact, selectors, services
from profiles.jobs import bounds, merged, roster
from profiles.jobs import selectors as group_selectors
from profiles.jobs import services as jobs
from profiles.models import Capture, CaptureGroup
from profiles.storage.uploads import UploadTooLarge
from runs.capture_serializers import CaptureSettingsSerializer, JobCaptureSettingsSerializer
from runs.capture_settings import BY_NAME as SETTING_NAMES
from runs.models import Host, Run, RunProcess
from runs.selectors import host_by_id_or_name


class CaptureRequestSerializer(CaptureSettingsSerializer):
    """A capture of `host` + `pid`, or of a run's `process` (which gives both), with
    its py-spy settings (runs.capture_settings). A host, process or run that does not
    exist is a 404 naming it."""

    one_of = (("host", "pid"), ("process",))

    host = NameOrIdField(max_length=100, required=False, help_text="Host name or id.")
    pid = PidField(required=False, help_text="Process id on that host.")
    process = IdField(required=False, help_text="A run process's id (instead of host+pid).")
    kind = serializers.ChoiceField(
        choices=["record", "dump"], default="record", help_text="py-spy record or dump."
    )
    run = IdField(required=False, allow_null=True, help_text="File it under this run's id.")

    def validate_process(self, value: int) -> RunProcess:
        process = RunProcess.objects.select_related("host", "run").filter(pk=value).first()
        if process is None:
            raise NotFound(f"process: no run process {value}")
        return process

    def validate(self, attrs: dict) -> dict:
        process = attrs.get("process")
        if process is not None:
            attrs.update(host=process.host, pid=process.pid, run=attrs.get("run") or process.run)
        return super().validate(attrs)

    def validate_host(self, value: str | int) -> Host:
        host = host_by_id_or_name(value)
        if host is None:
            raise NotFound(f"host: no host {value!r}")
        return host

    def validate_run(self, value: int | None) -> Run | None:
        if value is None:
            return None
        run = Run.objects.filter(pk=value).first()
        if run is None:
            raise NotFound(f"run: no run {value}")
        return run


def capture_json(capture: Capture, threads: list[str] | None = None, stats: bool = True) -> dict:
    return {
        "id": capture.pk,
        "status": capture.status,
        "kind": capture.kind,
        "host": capture.host.name if capture.host else None,
        "pid": capture.pid,
        "run": capture.run_id,
        "settings": capture.pyspy_settings,
        "error": capture.error,
        "error_cause": capture.error_cause,
        "error_detail": capture.error_detail,
        "attempts": capture.attempts,
        "attempt_log": capture.attempt_log,
        "note": capture.note,
        "progress": capture.progress,
        "queued_at": capture.queued_at,
        "started_at": capture.started_at,
        "finished_at": capture.finished_at,
        "raw_pruned": capture.raw_pruned_at is not None,
        **({"stats": selectors.capture_stats(capture=capture, threads=threads)} if stats else {}),
    }


def _threads_param(request) -> list[str] | None:
    values = [v for raw in request.query_params.getlist("thread") for v in raw.split(",") if v]
    return values or None


@schema.capture_list(CaptureRequestSerializer)
@api(["GET", "POST"])
def capture_list(request):
    if request.method == "GET":
        captures = Capture.objects.select_related("host")[:100]
        rows = [{k: v for k, v in capture_json(c).items() if k != "stats"} for c in captures]
        return Response(redact.for_viewer(rows, user=request.user, captures=captures))
    serializer = CaptureRequestSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    # Settings the body left out are left to the service: on flamedeck's own
    # processes their defaults differ (non-blocking).
    given = serializer.validated_data.items()
    data = {k: v for k, v in given if k not in SETTING_NAMES or k in request.data}
    try:
        capture = services.capture_create(
            user=request.user,
            host=data.pop("host"),
            pid=data.pop("pid"),
            kind=data.pop("kind"),
            run=data.pop("run", None),
            process=data.pop("process", None),
            **data,
        )
    except services.CaptureConflict as exc:
        return _conflict(exc)
    except DjangoValidationError as exc:
        detail = exc.message_dict if hasattr(exc, "message_dict") else exc.messages
        raise ValidationError(detail) from None
    capture.refresh_from_db(fields=["status", "error", "error_cause"])
    body = {"id": capture.pk, "status": capture.status}
    if capture.error_cause == QUEUE_UNAVAILABLE:
        return Response({"detail": capture.error, **body}, status=503)
    if capture.error:
        body.update(error=capture.error, error_cause=capture.error_cause)
    return Response(body, status=status.HTTP_201_CREATED)


QUEUE_UNAVAILABLE = "queue_unavailable"


def _conflict(exc: "services.CaptureConflict") -> Response:
    body = {"detail": exc.messages[0], "busy": exc.busy.pk, "busy_status": exc.busy.status}
    return Response(body, status=status.HTTP_409_CONFLICT)


@schema.capture_detail
@api(["GET"])
def capture_detail(request, pk: int):
    capture = get_object_or_404(Capture.objects.select_related("host"), pk=pk)
    data = capture_json(capture, threads=_threads_param(request))
    return Response(redact.for_viewer(data, user=request.user, captures=[capture]))


@schema.capture_flamegraph
@api(["GET"])
def capture_flamegraph(request, pk: int):
    capture = get_object_or_404(Capture, pk=pk)
    wanted = query_int(
        request.query_params, "max_nodes", minimum=10, maximum=50000, allow_blank=False
    )
    max_nodes = 8192 if wanted is None else wanted
    if "from" in request.query_params or "to" in request.query_params:
        return time_views.window_flamegraph(request, capture, max_nodes)
    tree = selectors.capture_flamegraph(
        capture=capture, max_nodes=max_nodes, threads=_threads_param(request)
    )
    if tree is None:
        return Response({"detail": "This capture has no flamegraph."}, status=404)
    return Response(redact.for_viewer(tree, user=request.user, captures=[capture]))


@schema.capture_cancel
@api(["POST"])
def capture_cancel(request, pk: int):
    capture = get_object_or_404(Capture, pk=pk)
    if not services.capture_cancel(capture=capture):
        return Response(
            {
                "detail": f"A {capture.status} capture cannot be cancelled.",
                "status": capture.status,
            },
            status=status.HTTP_409_CONFLICT,
        )
    capture.refresh_from_db()
    return Response({"id": capture.pk, "status": capture.status, "cancel_requested": True})


@schema.capture_import
@api(["POST"])
def capture_import(request):
    upload = request.FILES.get("file")
    if upload is None:
        raise ValidationError({"file": ["attach a py-spy raw or speedscope file as `file`"]})
    run = None
    if "run" in request.data:  # given, it is an id: an empty one is a 400 like any other
        run = get_object_or_404(Run, pk=parse_id(request.data["run"], name="run"))
    try:
        capture = services.capture_import(
            user=request.user, file=upload, log=request.FILES.get("log"), run=run, enqueue=True
        )
    except UploadTooLarge as exc:
        return refusal(request, str(exc), status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    body = {"id": capture.pk, "status": capture.status, "error": capture.error}
    return Response(body, status=status.HTTP_201_CREATED)


def group_json(group: CaptureGroup, params=None) -> dict:
    """The group with a page of its processes (`?offset=&limit=`, profiles.jobs.bounds)."""
    summary = jobs.group_summary(group)
    page = bounds.page_from(params or {}, summary["captures"])
    captures = group_process_page(group, page)
    return {
        "id": group.pk,
        "run": group.run_id,
        "scheduled": group.scheduled,
        **summary,
        "processes": [
            {
                **capture_json(c, stats=False),
                "role": c.process.role if c.process else "",
                "verdict": None if c.kind == Capture.Kind.DUMP else c.stats_verdict,
            }
            for c in captures
        ],
        "processes_page": page.as_json(),
        **group_selectors.group_report_fields(group, {c.pk for c in captures}),
    }


def group_process_page(group: CaptureGroup, page: bounds.Page) -> list[Capture]:
    """A page of the group's captures without their stats (their lag verdict read in
    the database) or GPU samples."""
    captures = roster.ordered(group.captures.select_related("host", "process"))
    verdict = KeyTextTransform("verdict", KeyTransform("lag", "stats"))
    captures = captures.defer("stats", "gpu_samples").annotate(stats_verdict=verdict)
    return list(captures.filter(pk__in=roster.page_ids(group, page)))


def _group_for_viewer(group: CaptureGroup, user, params=None) -> dict:
    captures = roster.redaction_captures(group)
    return redact.for_viewer(group_json(group, params), user=user, captures=captures)


@schema.run_capture_all(JobCaptureSettingsSerializer)
@api(["POST"])
def run_capture_all(request, pk: int):
    """Capture every process of the run at once, with the same settings."""
    run = get_object_or_404(Run, pk=pk)
    serializer = JobCaptureSettingsSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    try:
        group = jobs.capture_group_create(user=request.user, run=run, **serializer.validated_data)
    except services.CaptureConflict as exc:
        return _conflict(exc)
    except DjangoValidationError as exc:
        raise Conflict("run: " + "; ".join(exc.messages)) from None  # no processes, ...
    unsent = group.captures.filter(error_cause=QUEUE_UNAVAILABLE).first()
    if unsent is not None:
        body = {"detail": unsent.error, **_group_for_viewer(group, request.user)}
        return Response(body, status=503)
    return Response(_group_for_viewer(group, request.user), status=status.HTTP_201_CREATED)


@schema.group_detail
@api(["GET"])
def group_detail(request, pk: int):
    group = get_object_or_404(CaptureGroup, pk=pk)
    return Response(_group_for_viewer(group, request.user, request.query_params))


@schema.group_live
@api(["GET"])
def group_live(request, pk: int):
    """The group page's numbers; the page polls it until every process has ended."""
    group = get_object_or_404(CaptureGroup.objects.select_related("run", "requested_by"), pk=pk)
    return Response(group_selectors.page_for_viewer(group, request.user, request.query_params))


@schema.group_flamegraph
@api(["GET"])
def group_flamegraph(request, pk: int):
    group = get_object_or_404(roster.without_report(CaptureGroup.objects), pk=pk)
    given = request.query_params.getlist("capture")
    if len(given) > bounds.FLAMEGRAPH_PROCESSES:  # counted as sent: the schema's maxItems
        most = bounds.FLAMEGRAPH_PROCESSES
        raise ValidationError({"capture": f"at most {most} captures in one merged flamegraph"})
    only = {parse_id(value, name="capture") for value in given}
    tree = merged.group_flamegraph(group, only)
    captures = roster.redaction_captures(group)
    return Response(redact.for_viewer(tree, user=request.user, captures=captures))


@schema.capture_sandwich
@api(["GET"])
def capture_sandwich(request, pk: int):
    """`?frame=NAME[&thread=…&max_nodes=]`: callers and callees of one frame."""
    capture = get_object_or_404(Capture, pk=pk)
    frame = request.query_params.get("frame", "")
    if not frame.strip() or "\x00" in frame:
        raise ValidationError({"frame": ["give the frame's full name as ?frame="]})
    try:
        max_nodes = parse_int(
            request.query_params.get("max_nodes", "2000"),
            name="max_nodes",
            minimum=10,
            maximum=20000,
        )
    except DjangoValidationError as exc:
        raise ValidationError(exc.message_dict) from None
    result = selectors.capture_sandwich(
        capture=capture,
        frame=frame,
        threads=_threads_param(request),
        max_nodes=max_nodes,
        hide_commands=redact.hides_server_details(capture, request.user),
    )
    if result is None:
        return Response({"detail": "This capture has no flamegraph."}, status=404)
    return Response(redact.for_viewer(result, user=request.user, captures=[capture]))
