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
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response

from config.api import api
from config.api_errors import Conflict
from config.api_fields import IdField, StrictFloatField, StrictIntegerField, StrictJSON
from config.params import parse_id
from profiles.models import Capture
from profiles.watches import api_schema as schema
from profiles.watches import selectors as watch_selectors
from profiles.watches import services as watches
from profiles.watches.models import NotifyTarget, Watch
from runs.models import Run, RunProcess

MAX_SNOOZE_HOURS = 24 * 30
MAX_ACKNOWLEDGED = schema.MAX_ACKNOWLEDGED


class _Common(StrictJSON, serializers.Serializer):
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
        minimum=100, maximum=10_000_000, required=False, help_text="Samples a side (300)."
    )

    def validate(self, attrs: dict) -> dict:
        # After every field's own checks: a bad value is a 400 before a missing object a 404.
        if "baseline" in attrs:
            capture = Capture.objects.filter(pk=attrs["baseline"]).first()
            if capture is None:
                raise NotFound(f"baseline: no capture {attrs['baseline']}")
            attrs["baseline"] = capture
        return attrs


class WatchCreateSerializer(_Common):
    """{run, role} or {process}, a baseline capture, and where to send messages."""

    baseline = IdField(help_text="The baseline capture (done, with samples).")

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

    def to_internal_value(self, data):
        if isinstance(data, dict):
            problem = _rank_problem(data)
            if problem:
                raise ValidationError(problem)
        return super().to_internal_value(data)

    def validate(self, attrs: dict) -> dict:
        attrs = super().validate(attrs)
        if "process" in attrs:
            process = RunProcess.objects.select_related("run").filter(pk=attrs["process"]).first()
            if process is None:
                raise NotFound(f"process: no run process {attrs['process']}")
            attrs["process"] = process
        elif "run" in attrs:
            run = Run.objects.filter(pk=attrs["run"]).first()
            if run is None:
                raise NotFound(f"run: no run {attrs['run']}")
            attrs["run"] = run
        return attrs

    def schema_rules(self, *, partial: bool = False) -> list[dict]:
        # _rank_problem's three ways to name the rank.
        one_role, no_process = {"all_roles": {"enum": [False]}}, {"required": ["process"]}
        process = {
            "required": ["process"],
            "properties": one_role,
            "not": {"anyOf": [{"required": ["run"]}, {"required": ["role"]}]},
        }
        role = {
            "required": ["run", "role"],
            "not": no_process,
            "properties": {"role": {"minLength": 1}, **one_role},
        }
        every_role = {
            "required": ["run", "all_roles"],
            "not": no_process,
            "properties": {"all_roles": {"enum": [True]}, "role": {"maxLength": 0}},
        }
        return [{"anyOf": [process, role, every_role]}]


def _rank_problem(data: dict) -> dict[str, list[str]] | None:
    """Which rank a body names, as WatchCreateSerializer.schema_rules says it: a
    process alone, a run and a role, or a run and `all_roles` (no role)."""
    if data.get("all_roles") is True:
        if "run" not in data or data.get("role") or "process" in data:
            return {"all_roles": ["give the run alone (no role or process)"]}
    elif "process" in data:
        if "run" in data or "role" in data:
            return {"process": ["give a process alone, or a run and a role"]}
    elif "run" not in data or not data.get("role"):
        return {"role": ["give run and role, or a process"]}
    return None


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
    names = [item for item in data["notify"] if "://" not in item]
    known = set(NotifyTarget.objects.filter(name__in=names).values_list("name", flat=True))
    unknown = [name for name in names if name not in known]
    if unknown:
        raise NotFound(f"notify: no notification target named {unknown[0][:60]!r}")
    try:
        return watches.targets_resolve(user=request.user, notify_items=data["notify"])
    except DjangoPermissionDenied as exc:
        raise PermissionDenied(str(exc)) from None


def _invalid(exc: DjangoValidationError) -> Exception:
    """A service's refusal: of the body (400), of the objects' state (409: the
    baseline is not a done capture of that rank, the rank is watched already), or an
    alert id that is not the watch's (404)."""
    fields = set(exc.message_dict) if hasattr(exc, "error_dict") else set()
    said = "; ".join(
        f"{f}: {m}" for f, ms in (exc.message_dict if fields else {}).items() for m in ms
    )
    if fields and fields <= STATE_FIELDS:
        return Conflict(said)
    if fields == {"acknowledge"}:
        return NotFound(said)
    return ValidationError(exc.message_dict if fields else exc.messages)


# What profiles.watches.services refuses from the state of the objects a valid body names.
STATE_FIELDS = {"baseline", "role"}


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
