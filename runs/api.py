"""JSON API for hosts and runs."""

from datetime import timedelta

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from django.utils import timezone
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from config.api import api
from config.api_fields import StrictIntegerField
from config.params import parse_pid
from profiles.pyspy.layout import layout_problem

from . import api_schema as schema
from . import capture_fields, selectors, services
from .models import Host, Run, RunProcess
from .permissions import redact_check


class HostSerializer(serializers.ModelSerializer):
    port = StrictIntegerField(
        minimum=1,
        maximum=65535,
        required=False,
        allow_null=True,
        help_text=schema.HOST_FIELDS["port"],
    )

    class Meta:
        model = Host
        fields = ["id", *Host.EDITABLE_FIELDS, "last_check", "last_checked_at"]
        read_only_fields = ["last_check", "last_checked_at"]
        extra_kwargs = schema.described(schema.HOST_FIELDS)

    def to_representation(self, instance: Host) -> dict:
        data = super().to_representation(instance)
        user = self.context.get("user")
        data["last_check"] = redact_check(instance.last_check, local=instance.is_local, user=user)
        return data

    def validate(self, attrs):
        host = Host(**{**self._current(), **attrs})
        try:
            host.clean()
        except Exception as exc:  # ValidationError from the model
            raise serializers.ValidationError(getattr(exc, "message_dict", str(exc))) from exc
        return attrs

    def _current(self) -> dict:
        if self.instance is None:
            return {}
        return {f: getattr(self.instance, f) for f in self.Meta.fields if f not in ("id",)}


class RunSerializer(serializers.ModelSerializer):
    tags = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="name", help_text=schema.RUN_FIELDS["tags"]
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "name",
            "description",
            "status",
            "tags",
            "started_at",
            "ended_at",
            "created_at",
            "library_paths",
            "step_threads",
        ]
        extra_kwargs = schema.described(schema.RUN_FIELDS)


def _invalid(exc: DjangoValidationError) -> ValidationError:
    return ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)


def run_json(run: Run) -> dict:
    processes = selectors.run_processes(run=run)
    return {
        **RunSerializer(run).data,
        "url": run.get_absolute_url(),
        "capture_settings": run.capture_settings,
        "processes": [selectors.process_json(p) for p in processes],
    }


@schema.host_list(HostSerializer)
@api(["GET", "POST"])
def host_list(request):
    if request.method == "POST":
        serializer = HostSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        host = Host(**serializer.validated_data)
        services.host_save(host=host, user=request.user, via="api")
        body = HostSerializer(host, context={"user": request.user}).data
        return Response(body, status=status.HTTP_201_CREATED)
    hosts = HostSerializer(Host.objects.all(), many=True, context={"user": request.user})
    return Response(hosts.data)


@schema.host_detail(HostSerializer)
@api(["GET", "PATCH"])
def host_detail(request, pk: int):
    host = get_object_or_404(Host, pk=pk)
    if request.method == "PATCH":
        serializer = HostSerializer(host, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        for field, value in serializer.validated_data.items():
            setattr(host, field, value)
        services.host_save(host=host, user=request.user, via="api")
    return Response(HostSerializer(host, context={"user": request.user}).data)


@schema.host_check
@api(["POST"])
def host_check(request, pk: int):
    host = get_object_or_404(Host, pk=pk)
    result = services.host_check(host=host)
    return Response(redact_check(result, local=host.is_local, user=request.user))


@schema.run_list(RunSerializer)
@api(["GET", "POST"])
def run_list(request):
    if request.method == "POST":
        serializer = RunSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run = services.run_create(
            user=request.user,
            name=serializer.validated_data["name"],
            description=serializer.validated_data.get("description", ""),
            tags=request.data.get("tags", "") if isinstance(request.data.get("tags"), str) else "",
        )
        for field in ANALYSIS_FIELDS:
            if serializer.validated_data.get(field):
                _save_analysis_field(run, serializer.validated_data, field)
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)
    runs = Run.objects.prefetch_related("tags")[:200]
    return Response(RunSerializer(runs, many=True).data)


@schema.run_detail(RunSerializer)
@api(["GET", "PATCH"])
def run_detail(request, pk: int):
    """The run with its processes; PATCH stores `capture_settings` ("Capture all"),
    `library_paths` (what the analysis counts as library code) and/or `step_threads`
    (the threads the whole-job report reads as the training step)."""
    run = get_object_or_404(Run.objects.prefetch_related("tags"), pk=pk)
    patch = request.method == "PATCH" and isinstance(request.data, dict)
    analysis = [f for f in ANALYSIS_FIELDS if patch and f in request.data]
    for field in analysis:
        _save_analysis_field(run, request.data, field)
    if request.method == "PATCH" and ("capture_settings" in request.data or not analysis):
        if not isinstance(request.data.get("capture_settings"), dict):
            raise ValidationError({"capture_settings": ["give an object of capture settings"]})
        try:
            cleaned = capture_fields.remembered(request.data["capture_settings"])
        except DjangoValidationError as exc:
            raise _invalid(exc) from None
        services.run_capture_settings_save(run=run, settings_=cleaned)
    return Response(run_json(run))


ANALYSIS_FIELDS = ("library_paths", "step_threads")


def _save_analysis_field(run: Run, data: object, field: str) -> None:
    """Validate and store one of ANALYSIS_FIELDS (what new analyses of the run use)."""
    serializer = RunSerializer(run, data={field: data[field]}, partial=True)  # type: ignore[index]
    serializer.is_valid(raise_exception=True)
    save = {
        "library_paths": services.run_library_paths_save,
        "step_threads": services.run_step_threads_save,
    }[field]
    save(run=run, **{field: serializer.validated_data.get(field, "")})


def _host_or_400(value: object) -> Host:
    host = selectors.host_by_id_or_name(value)
    if host is None:
        how = "add it on the Hosts page or with POST /api/hosts/ {name, transport, address}"
        name = value if isinstance(value, str) else str(value)
        raise ValidationError({"host": [f"no host named {name[:100]!r}: {how}"]})
    return host


def _pid_or_400(value: object) -> int:
    try:
        return parse_pid(value)
    except DjangoValidationError as exc:
        raise _invalid(exc) from None


def _role(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > 100:
        raise ValidationError({"role": ["role must be text of at most 100 characters"]})
    return value


def _layout(value: object) -> dict[str, int] | None:
    if value is None:
        return None
    problem = layout_problem(value)
    if problem:
        raise ValidationError({"layout": [problem]})
    return value or None  # type: ignore[return-value]  # {}: nothing said


@schema.run_processes
@api(["GET", "POST"])
def run_processes(request, pk: int):
    """List, or attach `{host: id or name, pid, role}`: 201 new, 200 already attached."""
    run = get_object_or_404(Run, pk=pk)
    if request.method == "GET":
        return Response([selectors.process_json(p) for p in selectors.run_processes(run=run)])
    host = _host_or_400(request.data.get("host"))
    pid, role = _pid_or_400(request.data.get("pid")), _role(request.data.get("role"))
    try:
        attached = services.run_process_attach(run=run, host=host, pid=pid, role=role)
    except DjangoValidationError as exc:
        raise _invalid(exc) from None
    body = {**selectors.process_json(attached.process), "warning": attached.warning}
    return Response(body, status=status.HTTP_201_CREATED if attached.created else 200)


@schema.run_process_detail
@api(["DELETE"])
def run_process_detail(request, pk: int, process_pk: int):
    process = get_object_or_404(RunProcess, pk=process_pk, run_id=pk)
    process.delete()
    return Response(status=status.HTTP_204_NO_CONTENT)


CHECK_FRESH_S = 15


@schema.run_processes_check
@api(["POST"], permissions=(IsAuthenticated,))
def run_processes_check(request, pk: int):
    """Ask every host of the run which processes still run (bounded; see services).

    Any logged-in user may ask: it reads one `ps` per host and updates only the cached
    liveness. Rows checked in the last CHECK_FRESH_S seconds are not asked again.
    """
    run = get_object_or_404(Run, pk=pk)
    processes = selectors.run_processes(run=run)
    fresh = timezone.now() - timedelta(seconds=CHECK_FRESH_S)
    stale = [
        p for p in processes if not p.replaced and (p.checked_at is None or p.checked_at < fresh)
    ]  # replaced processes belong to earlier launches: no need to ask
    errors = services.run_processes_check(processes=stale)
    hosts = {p.host_id: p.host.name for p in processes}
    return Response(
        {
            "processes": [selectors.process_json(p) for p in processes],
            "errors": [{"host": hosts[h], "error": e} for h, e in errors.items()],
            "plan": selectors.capture_all_plan(run=run),
            "run_status": Run.objects.values_list("status", flat=True).get(pk=run.pk),
        }
    )


@schema.register
@api(["POST"])
def register(request):
    """A launcher's rank attaches itself: `{run: name, host: name, pid, role, launch,
    layout}` (`launch`: optional, the launch's key, see runs.launches; `layout`:
    optional, its place in the job's parallel layout, profiles.pyspy.layout). The PID
    is checked on its host first: one that does not run there is a 400; one whose host
    cannot be asked is attached with `"alive": null` and a `warning`."""
    name = request.data.get("run")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ValidationError({"run": ["give the run's name (text, at most 200 characters)"]})
    host = _host_or_400(request.data.get("host"))
    pid, role = _pid_or_400(request.data.get("pid")), _role(request.data.get("role"))
    layout = _layout(request.data.get("layout"))
    run, attached, run_created = services.run_register(
        user=request.user,
        run_name=name.strip(),
        host=host,
        pid=pid,
        role=role,
        launch=request.data.get("launch") or "",
        layout=layout,
    )
    body = {
        # Absolute: the registering rank prints it, far from any browser tab.
        "run": {
            "id": run.pk,
            "name": run.name,
            "url": request.build_absolute_uri(run.get_absolute_url()),
        },
        "run_created": run_created,
        "process": selectors.process_json(attached.process),
        "created": attached.created,
    }
    if attached.warning:
        body["warning"] = attached.warning
    created = run_created or attached.created
    return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
