"""JSON API for regression watches (contract 3): `/api/watches/` and `/api/watches/<id>/`.

Viewers read; operators create, change and delete; only host admins may give
notification URLs in `notify` (others name configured targets). URLs come back masked.
"""

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from config.api import api
from config.api_fields import IdField, StrictIntegerField
from runs.models import Run, RunProcess

from . import watch_api_schema as schema
from . import watch_selectors, watches
from .models import Capture
from .watch_models import Watch

MAX_SNOOZE_HOURS = 24 * 30


class _Common(serializers.Serializer):
    baseline = IdField(required=False, help_text="The baseline capture (done, with samples).")
    notify = serializers.ListField(
        child=serializers.CharField(max_length=2000),
        max_length=watches.MAX_TARGETS,
        required=False,
        help_text="Target names; Apprise URLs only from host admins.",
    )
    min_effect_points = serializers.FloatField(
        min_value=0.1, max_value=100, required=False, help_text="Points a row must move (2)."
    )
    min_samples = StrictIntegerField(
        minimum=100, maximum=10_000_000, required=False, help_text="Samples a side (1000)."
    )

    def validate_baseline(self, value: int) -> Capture:
        capture = Capture.objects.filter(pk=value).first()
        if capture is None:
            raise serializers.ValidationError(f"no capture {value}")
        return capture


class WatchCreateSerializer(_Common):
    """{run, role} or {process}, a baseline capture, and where to send messages."""

    run = IdField(required=False, help_text="The run (with `role`).")
    role = serializers.CharField(
        max_length=100, required=False, allow_blank=True, help_text="The rank's role, e.g. rank-0."
    )
    process = IdField(required=False, help_text="A run process, instead of run and role.")

    def validate(self, attrs: dict) -> dict:
        if "baseline" not in attrs:
            raise ValidationError({"baseline": "give the baseline capture's id"})
        if "process" in attrs:
            process = RunProcess.objects.select_related("run").filter(pk=attrs["process"]).first()
            if process is None:
                raise ValidationError({"process": f"no run process {attrs['process']}"})
            attrs["process"] = process
        elif "run" in attrs:
            run = Run.objects.filter(pk=attrs["run"]).first()
            if run is None:
                raise ValidationError({"run": f"no run {attrs['run']}"})
            attrs["run"] = run
        return attrs


class WatchUpdateSerializer(_Common):
    """Any of the settings, `snooze_hours` (0 ends a snooze) and `acknowledge`
    (alert ids, or "all")."""

    snooze_hours = serializers.FloatField(
        min_value=0, max_value=MAX_SNOOZE_HOURS, required=False, help_text="0 ends a snooze."
    )
    acknowledge = serializers.JSONField(
        required=False, help_text='Alert ids to acknowledge, or "all".'
    )

    def validate_acknowledge(self, value) -> list[int] | None:
        if value == "all":
            return None
        ids = value if isinstance(value, list) else None
        if ids is None or not all(type(i) is int and i > 0 for i in ids) or len(ids) > 1000:
            raise serializers.ValidationError('give a list of alert ids, or "all"')
        return ids


def _targets(request, data: dict) -> list | None:
    if "notify" not in data:
        return None
    try:
        return watches.targets_resolve(user=request.user, notify_items=data["notify"])
    except DjangoPermissionDenied as exc:
        raise PermissionDenied(str(exc)) from None


def _invalid(exc: DjangoValidationError) -> ValidationError:
    return ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)


@schema.watch_list(WatchCreateSerializer)
@api(["GET", "POST"])
def watch_list(request):
    if request.method == "GET":
        return Response([watch_selectors.watch_json(w) for w in watch_selectors.watches()])
    serializer = WatchCreateSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    targets = _targets(request, data) or []
    try:
        watch = watches.watch_create(
            user=request.user,
            baseline=data["baseline"],
            run=data.get("run"),
            role=data.get("role", ""),
            process=data.get("process"),
            targets=targets,
            **{k: data[k] for k in ("min_effect_points", "min_samples") if k in data},
        )
    except DjangoValidationError as exc:
        raise _invalid(exc) from None
    body = watch_selectors.watch_json(watch, alerts=True)
    return Response(body, status=status.HTTP_201_CREATED)


@schema.watch_detail(WatchUpdateSerializer)
@api(["GET", "PATCH", "DELETE"])
def watch_detail(request, pk: int):
    watch = get_object_or_404(Watch.objects.select_related("run", "baseline"), pk=pk)
    if request.method == "DELETE":
        watch.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)
    if request.method == "PATCH":
        _patch(request, watch)
    return Response(watch_selectors.watch_json(watch, alerts=True))


def _patch(request, watch: Watch) -> None:
    serializer = WatchUpdateSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    targets = _targets(request, data)
    try:
        watches.watch_update(
            watch=watch,
            baseline=data.get("baseline"),
            targets=targets,
            min_effect_points=data.get("min_effect_points"),
            min_samples=data.get("min_samples"),
        )
        if "snooze_hours" in data:
            watches.watch_snooze(watch=watch, hours=data["snooze_hours"])
    except DjangoValidationError as exc:
        raise _invalid(exc) from None
    if "acknowledge" in data:
        watches.alerts_acknowledge(watch=watch, user=request.user, alert_ids=data["acknowledge"])
