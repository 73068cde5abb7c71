"""JSON API for hosts and runs."""

from datetime import timedelta

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import RegexValidator
from django.shortcuts import get_object_or_404
from django.utils import timezone
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from config.api import api
from config.api_errors import Conflict
from config.api_fields import StrictIntegerField, StrictJSON

from . import api_schema as schema
from . import capture_fields, selectors, services
from .models import Host, Run, RunProcess
from .permissions import redact_check


class HostSerializer(StrictJSON, serializers.ModelSerializer):
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
        extra_kwargs = {
            name: {**schema.described(schema.HOST_FIELDS).get(name, {}), **rules}
            for name, rules in {
                **dict.fromkeys(schema.HOST_FIELDS, {}),
                **schema.HOST_RULES,
            }.items()
        }

    def to_representation(self, instance: Host) -> dict:
        data = super().to_representation(instance)
        user = self.context.get("user")
        data["last_check"] = redact_check(instance.last_check, local=instance.is_local, user=user)
        return data

    def validate(self, attrs):
        if self.instance is None and attrs.get("transport", "ssh") == "ssh":
            if not attrs.get("address"):
                raise ValidationError({"address": ["An SSH host needs an address or ssh alias."]})
        if attrs.get("transport") == "local":
            # The server's own commands: their wrapper and py-spy are set by bootstrap.
            if attrs.get("exec_prefix"):
                raise ValidationError({"exec_prefix": ["A local host has no exec prefix here."]})
            if attrs.get("py_spy", LOCAL_PY_SPY) != LOCAL_PY_SPY:
                raise ValidationError({"py_spy": [f"A local host's py-spy is {LOCAL_PY_SPY!r}."]})
        return attrs

    def schema_rules(self, *, partial: bool = False) -> list[dict]:
        local = {
            "properties": {"exec_prefix": {"maxLength": 0}, "py_spy": {"enum": [LOCAL_PY_SPY]}}
        }
        rules = [{"anyOf": [{"properties": {"transport": {"enum": ["ssh"]}}}, local]}]
        if not partial:  # a new host is SSH unless it says local, and SSH needs an address
            said_local = {
                "required": ["transport"],
                "properties": {"transport": {"enum": ["local"]}},
            }
            address = {"required": ["address"], "properties": {"address": {"minLength": 1}}}
            rules.append({"anyOf": [said_local, address]})
        return rules


# What a body may give a local host's py-spy (the server keeps the one bootstrap found).
LOCAL_PY_SPY = "py-spy"
# The refusals runs.services.host_save makes from a local host's stored wrapper and
# py-spy, or from a deployment without local hosts: the state's, not the body's (409).
LOCAL_FIXED = {"transport", "exec_prefix", "py_spy"}


def _host_checked(host: Host, *, pk: int | None = None) -> None:
    """What the schema cannot say about a host: its name is free (409), and a change
    leaves an SSH host an address (409: the host's own state refuses it)."""
    if Host.objects.filter(name=host.name).exclude(pk=pk).exists():
        raise Conflict(f"name: a host named {host.name[:100]!r} exists already")
    try:
        host.clean()
    except DjangoValidationError as exc:
        raise Conflict("; ".join(exc.messages)) from None


class RunSerializer(StrictJSON, serializers.ModelSerializer):
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
        extra_kwargs = {
            **schema.described(schema.RUN_FIELDS),
            # What the models allow, as a schema pattern can say it: printable ASCII
            # (the models take any printable text; forms still do).
            "library_paths": {"validators": [RegexValidator(schema.LIBRARY_PATHS)]},
            "step_threads": {"validators": [RegexValidator(schema.STEP_THREADS)]},
        }


def _host_saved(host: Host, *, user) -> None:
    try:
        services.host_save(host=host, user=user, via="api")
    except DjangoValidationError as exc:
        fields = set(exc.message_dict) if hasattr(exc, "error_dict") else set()
        if host.is_local and fields and fields <= LOCAL_FIXED:
            said = (f"{f}: {m}" for f, ms in exc.message_dict.items() for m in ms)
            raise Conflict("; ".join(said)) from None
        raise


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
        _host_checked(host)
        _host_saved(host, user=request.user)
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
        _host_checked(host, pk=host.pk)
        _host_saved(host, user=request.user)
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


class RunChangeSerializer(StrictJSON, serializers.Serializer):
    """PATCH /api/runs/<id>/: any of the run's remembered capture settings and how its
    captures are analysed; an empty body changes nothing."""

    capture_settings = schema.RememberedSettingsSerializer(
        required=False,
        help_text='What "Capture all" (and the run\'s capture buttons) open with next '
        "time; refused like a whole-job capture's settings.",
    )
    library_paths = RunSerializer().fields["library_paths"]
    step_threads = RunSerializer().fields["step_threads"]

    def validate_capture_settings(self, value: dict) -> dict:
        try:
            return capture_fields.remembered(self.initial_data["capture_settings"])
        except DjangoValidationError as exc:
            raise _invalid(exc) from None


@schema.run_detail(RunSerializer, RunChangeSerializer)
@api(["GET", "PATCH"])
def run_detail(request, pk: int):
    """The run with its processes; PATCH stores `capture_settings` ("Capture all"),
    `library_paths` (what the analysis counts as library code) and/or `step_threads`
    (the threads the whole-job report reads as the training step)."""
    run = get_object_or_404(Run.objects.prefetch_related("tags"), pk=pk)
    if request.method == "PATCH":
        change = RunChangeSerializer(data=request.data)
        change.is_valid(raise_exception=True)
        for field in ANALYSIS_FIELDS:
            if field in change.validated_data:
                _save_analysis_field(run, change.validated_data, field)
        if "capture_settings" in change.validated_data:
            cleaned = change.validated_data["capture_settings"]
            services.run_capture_settings_save(run=run, settings_=cleaned)
    return Response(run_json(run))


ANALYSIS_FIELDS = ("library_paths", "step_threads")


def _save_analysis_field(run: Run, data: dict, field: str) -> None:
    """Store one of ANALYSIS_FIELDS (what new analyses of the run use)."""
    save = {
        "library_paths": services.run_library_paths_save,
        "step_threads": services.run_step_threads_save,
    }[field]
    save(run=run, **{field: data.get(field) or ""})


def _host_or_400(value: object) -> Host:
    host = selectors.host_by_id_or_name(value)
    if host is None:
        how = "add it on the Hosts page or with POST /api/hosts/ {name, transport, address}"
        name = value if isinstance(value, str) else str(value)
        raise ValidationError({"host": [f"no host named {name[:100]!r}: {how}"]})
    return host


@schema.run_processes
@api(["GET", "POST"])
def run_processes(request, pk: int):
    """List, or attach `{host: id or name, pid, role}`: 201 new, 200 already attached."""
    run = get_object_or_404(Run, pk=pk)
    if request.method == "GET":
        return Response([selectors.process_json(p) for p in selectors.run_processes(run=run)])
    body = schema.ProcessRequestSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    host, pid = _host_or_400(body.validated_data["host"]), body.validated_data["pid"]
    role = body.validated_data.get("role") or ""
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
    optional, its place in the job's parallel layout, profiles.pyspy.job.layout). The PID
    is checked on its host first: one that does not run there is a 400; one whose host
    cannot be asked is attached with `"alive": null` and a `warning`."""
    body = schema.RegisterRequestSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    given = body.validated_data
    host = _host_or_400(given["host"])
    run, attached, run_created = services.run_register(
        user=request.user,
        run_name=given["run"].strip(),
        host=host,
        pid=given["pid"],
        role=given.get("role") or "",
        launch=given.get("launch") or "",
        layout=given.get("layout") or None,
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
