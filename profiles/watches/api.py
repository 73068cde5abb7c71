"""JSON API for regression watches (contract 3): `/api/watches/` and `/api/watches/<id>/`.

Viewers read; operators create, change and delete; only host admins may give
notification URLs in `notify` (others name configured targets). A target comes back
by its name; to host admins with its URL masked as well (profiles.watches.notify.mask_url).
Ids are read by config.params (400 naming the field), and a request's writes are one
transaction: a create or change that fails in any part saves nothing.
"""

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.shortcuts import get_object_or_404
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from config.api import api
from config.api_fields import IdField, StrictFloatField, StrictIntegerField
from config.params import parse_id
from profiles.models import Capture
from profiles.watches import api_schema as schema
from profiles.watches import selectors as watch_selectors
from profiles.watches import services as watches
from profiles.watches.models import Watch
from runs.models import Run, RunProcess

MAX_SNOOZE_HOURS = 24 * 30
MAX_ACKNOWLEDGED = 1000


class _Common(serializers.Serializer):
    baseline = IdField(required=False, help_text="The baseline capture (done, with samples).")
    notify = serializers.ListField(
        child=serializers.CharField(max_length=2000),
        max_length=watches.MAX_TARGETS,
        required=False,
        help_text="Target names; Apprise URLs only from host admins.",
    )
    min_effect_points = StrictFloatField(
        minimum=0.1, maximum=100, required=False, help_text="Points a row must move (2)."
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
    all_roles = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Watch every role of the run (with `run`, no `role`): the baseline is a "
        "rank of a whole-job capture; one message per later whole-job capture.",
    )

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

    snooze_hours = StrictFloatField(
        minimum=0, maximum=MAX_SNOOZE_HOURS, required=False, help_text="0 ends a snooze."
    )
    acknowledge = serializers.JSONField(
        required=False, help_text='Alert ids to acknowledge, or "all".'
    )

    def validate_acknowledge(self, value) -> list[int] | None:
        if value == "all":
            return None
        if not isinstance(value, list) or len(value) > MAX_ACKNOWLEDGED:
            raise serializers.ValidationError(
                f'give a list of at most {MAX_ACKNOWLEDGED} alert ids, or "all"'
            )
        try:
            return [parse_id(i, name="acknowledge") for i in value]
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages) from None


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
        rows = watch_selectors.watches()
        return Response([watch_selectors.watch_json(w, user=request.user) for w in rows])
    serializer = WatchCreateSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    try:
        with transaction.atomic():  # a target made for a URL goes if the watch does not
            watch = watches.watch_create(
                user=request.user,
                baseline=data["baseline"],
                run=data.get("run"),
                role=data.get("role", ""),
                process=data.get("process"),
                all_roles=data.get("all_roles", False),
                targets=_targets(request, data) or [],
                **{k: data[k] for k in ("min_effect_points", "min_samples") if k in data},
            )
    except DjangoValidationError as exc:
        raise _invalid(exc) from None
    body = watch_selectors.watch_json(watch, alerts=True, user=request.user)
    return Response(body, status=status.HTTP_201_CREATED)


@schema.watch_detail(WatchUpdateSerializer)
@api(["GET", "PATCH", "DELETE"])
def watch_detail(request, pk: int):
    watch = get_object_or_404(Watch.objects.select_related("run", "baseline"), pk=pk)
    if request.method == "DELETE":
        watch.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)
    if request.method == "PATCH":
        watch = _patch(request, watch)
    return Response(watch_selectors.watch_json(watch, alerts=True, user=request.user))


def _patch(request, watch: Watch) -> Watch:
    serializer = WatchUpdateSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    try:
        with transaction.atomic():  # with the targets made for URLs, if any
            watches.watch_change(
                watch=watch,
                user=request.user,
                baseline=data.get("baseline"),
                targets=_targets(request, data),
                min_effect_points=data.get("min_effect_points"),
                min_samples=data.get("min_samples"),
                snooze_hours=data.get("snooze_hours"),
                acknowledge=data["acknowledge"] if "acknowledge" in data else False,
            )
    except DjangoValidationError as exc:
        raise _invalid(exc) from None
    return Watch.objects.select_related("run", "baseline").get(pk=watch.pk)
