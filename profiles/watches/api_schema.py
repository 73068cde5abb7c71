"""The OpenAPI description of profiles/watches/api.py: answer shapes with described
fields and one decorator per view. The rows and shifts are the engine's TypedDicts
(`config.api_schema.typed`), the enums the models'; the rest mirrors
profiles.watches.selectors.watch_json, and tests check real answers against it."""

import typing
from typing import Literal

from drf_spectacular.plumbing import resolve_type_hint
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers

from config.api_schema import ID_MAX, combine, errors, list_and_create, read_and_change, typed
from profiles.pyspy import compare as comparing
from profiles.pyspy.stats import SeriesShift
from profiles.watches.models import Alert, Delivery, Judgement

WATCHES = ["watches"]
ROW_KINDS = typing.get_args(comparing.Kind)  # for ENUM_NAME_OVERRIDES


ShareSideSerializer = typed(
    comparing.ShareSide,
    {
        "samples": "Samples in the row (a bound when listed so).",
        "total": "Samples of the capture.",
        "percent": "The share, in percent.",
        "low": "95% Wilson interval, low end (percent).",
        "high": "95% Wilson interval, high end (percent).",
        "design_effect": "How many samples count as one independent draw, measured over "
        "time blocks of a capture that keeps time; the interval is Wilson's on samples / "
        "design effect. Absent: samples treated as independent.",
        "blocks": "Time blocks the design effect was measured over: a test of this share "
        "uses Student's t with one fewer degrees of freedom. Absent: no blocks.",
    },
)
MovedRowSerializer = typed(
    comparing.Row,
    {
        "key": "`state:host_sync`, `category:sync`, `self:FRAME`…",
        "kind": "state, function (of the user's code), category, self or total.",
        "name": "The state, function, category or frame.",
        "before": "The baseline's share.",
        "after": "This capture's share.",
        "delta_points": "After minus before, in points.",
        "delta_low": "95% Newcombe interval of the change, low.",
        "delta_high": "95% Newcombe interval of the change, high.",
        "p_value": "Two-proportion test, two-sided: each side's variance times its design "
        "effect and Student's t over its time blocks where a capture keeps time.",
        "q_value": "Benjamini–Yekutieli adjusted p-value.",
        "bound": "exact, or `before below`/`after below` (a frame absent from a top list).",
        "moved": "Significant and at least the minimum effect.",
        "aliases": "Other rows counting the very same samples.",
        "line": "The row as messages and pages say it.",
    },
    name="MovedRow",
    hints={"line": str},
    optional=("where",),  # judgements stored before rows pointed at the user's code
)


class JudgementSerializer(serializers.Serializer):
    capture = serializers.IntegerField(help_text="The capture judged.")
    baseline = serializers.IntegerField(
        allow_null=True, help_text="The baseline it was judged against."
    )
    verdict = serializers.ChoiceField(
        Judgement.Verdict.choices,
        help_text="changed, unchanged, too few samples (nothing said), no baseline, or not "
        "comparable (the settings differ from the baseline's; `reason` says how).",
    )
    scope = serializers.CharField(
        allow_blank=True,
        help_text="What was judged: `step threads` (as findings), or `all threads` for a "
        "capture stored without them; empty when not judged.",
    )
    reason = serializers.CharField(help_text="How many rows moved, or why it was not judged.")
    rows_compared = serializers.IntegerField(help_text="Rows compared (aliases included).")
    moved = MovedRowSerializer(many=True, help_text="The rows that moved.")
    snoozed = serializers.BooleanField(help_text="Judged while the watch was snoozed.")
    judged_at = serializers.DateTimeField(help_text="When.")


ShiftSerializer = typed(
    SeriesShift,
    {
        "key": "The share that shifted.",
        "index": "Position of the first capture after the shift.",
        "capture": "That capture's id.",
        "before_mean": "Mean share before it (percent).",
        "after_mean": "Mean share from it on (percent).",
        "delta_points": "After minus before, in points.",
        "baseline_percent": "The share in the baseline.",
        "p_value": "Permutation p-value of the shift.",
        "q_value": "Benjamini–Yekutieli adjusted, across shares.",
        "permutations": "Permutations drawn.",
        "significant": "Significant and at least the minimum effect.",
    },
    name="Shift",
    hints={"capture": int, "baseline_percent": float},  # added by the watch (judging.py)
)


class DeliverySerializer(serializers.Serializer):
    target = serializers.CharField(help_text="The target's name.")
    status = serializers.ChoiceField(Delivery.Status.choices, help_text="Where it stands.")
    attempts = serializers.IntegerField(help_text="Tries so far.")
    error = serializers.CharField(help_text="The last failure's reason (URLs masked).")
    sent_at = serializers.DateTimeField(allow_null=True, help_text="When it was sent.")


class AlertSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The alert's id (for `acknowledge`).")
    key = serializers.CharField(help_text="The row.")
    label = serializers.CharField(help_text="The row, readable.")
    direction = serializers.ChoiceField(["up", "down"], help_text="Which way it moved.")
    source = serializers.ChoiceField(
        Alert.Source.choices, help_text="Capture vs baseline, or a shift in the series."
    )
    status = serializers.ChoiceField(Alert.Status.choices, help_text="Where it stands.")
    line = serializers.CharField(help_text="The change as the message said it.")
    capture = serializers.IntegerField(allow_null=True, help_text="The capture that opened it.")
    opened_at = serializers.DateTimeField(help_text="When it opened.")
    closed_at = serializers.DateTimeField(allow_null=True, help_text="When it closed.")
    deliveries = DeliverySerializer(many=True, help_text="Its messages, one per target.")


class TargetRefSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The target's name.")
    url = serializers.CharField(
        required=False,
        help_text="Host admins only: its Apprise URL masked (scheme and host; user names, "
        "passwords, tokens and hosts that are credentials hidden). Never in full.",
    )


class RunRefSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The run's id.")
    name = serializers.CharField(help_text="The run's name.")


class WatchSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The watch's id.")
    url = serializers.CharField(help_text="Its page.")
    run = RunRefSerializer(help_text="The run watched.")
    role = serializers.CharField(help_text="The rank's role (empty: one process, or all roles).")
    all_roles = serializers.BooleanField(
        help_text="Every role of the run's whole-job captures, one message per capture."
    )
    process = serializers.IntegerField(
        allow_null=True, help_text="The process, for a rank without a role."
    )
    baseline = serializers.IntegerField(allow_null=True, help_text="The baseline capture.")
    min_effect_points = serializers.FloatField(help_text="Smallest change that moves a row.")
    min_samples = serializers.IntegerField(help_text="Fewer samples a side: not judged.")
    notify = TargetRefSerializer(many=True, help_text="Where messages go.")
    snoozed_until = serializers.DateTimeField(allow_null=True, help_text="Snoozed until then.")
    created_at = serializers.DateTimeField(help_text="When the watch was made.")
    last = JudgementSerializer(allow_null=True, help_text="The latest capture judged.")
    shifts = ShiftSerializer(many=True, help_text="Shifts the series test found.")
    open_alerts = serializers.IntegerField(help_text="Alerts open now.")
    alerts = AlertSerializer(
        many=True, required=False, help_text="Its latest 50 alerts (one watch only)."
    )


def watch_list(request_serializer):
    return list_and_create(
        tags=WATCHES,
        listed=WatchSerializer(many=True),
        list_summary="Every regression watch",
        list_description="Each with its latest judgement, the shifts its series test found "
        "and how many alerts are open.",
        request=request_serializer,
        created=WatchSerializer,
        summary="Watch a rank against a baseline capture",
        description="`{run, role}`, `{process}` or `{run, all_roles: true}`, `baseline` (a done "
        "capture; for all roles a rank of a whole-job capture), `notify` "
        "(names of targets; Apprise URLs from host admins only, else 403). 404 naming the "
        "run, process, baseline or target name that does not exist; 409 when the baseline "
        "is not a done capture with samples of that rank, or the rank is watched already.",
        responses=errors(404, 409),
    )


MAX_ACKNOWLEDGED = 1000
_ACKNOWLEDGE = resolve_type_hint(list[int] | Literal["all"])
# Ids as config.params.parse_id reads them, at most MAX_ACKNOWLEDGED in one request.
_ACKNOWLEDGE["oneOf"][0].update(maxItems=MAX_ACKNOWLEDGED)
_ACKNOWLEDGE["oneOf"][0]["items"].update(minimum=1, maximum=ID_MAX)


@extend_schema_field(_ACKNOWLEDGE)
class AcknowledgeField(serializers.JSONField):
    """Alert ids, or "all" (the view reads it as JSON: either is valid)."""


def watch_detail(request_serializer):
    class WatchUpdateSerializer(request_serializer):
        acknowledge = AcknowledgeField(required=False, help_text='Alert ids, or "all".')

    return combine(
        read_and_change(
            tags=WATCHES,
            shown=WatchSerializer,
            read_summary="One watch with its alerts",
            read_description="The watch, its latest 50 alerts and their deliveries.",
            request=WatchUpdateSerializer,
            summary="Change, snooze or acknowledge",
            description="A new baseline closes the alerts and starts a new series. 404 "
            "naming a baseline or target name that does not exist; 409 when the baseline is "
            "not a done capture with samples of the watched rank.",
            responses=errors(409),
        ),
        extend_schema(
            methods=["DELETE"],
            summary="Delete a watch",
            description="Its judgements and alerts go with it.",
            responses={204: None, **errors(401, 403, 404)},
            tags=WATCHES,
        ),
    )
