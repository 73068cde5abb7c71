"""The OpenAPI description of profiles/watches/api.py: answer shapes with described
fields and one decorator per view. Documentation only: the views build their answers
(watch_selectors.watch_json); tests check that answers match what is written here."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers

from config.api_schema import combine, errors, list_and_create, read_and_change

WATCHES = ["watches"]


class ShareSideSerializer(serializers.Serializer):
    samples = serializers.IntegerField(help_text="Samples in the row (a bound when listed so).")
    total = serializers.IntegerField(help_text="Samples of the capture.")
    percent = serializers.FloatField(help_text="The share, in percent.")
    low = serializers.FloatField(help_text="95% Wilson interval, low end (percent).")
    high = serializers.FloatField(help_text="95% Wilson interval, high end (percent).")


class MovedRowSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="`state:host_sync`, `category:sync`, `self:FRAME`…")
    kind = serializers.CharField(
        help_text="state, function (of the user's code), category, self or total."
    )
    name = serializers.CharField(help_text="The state, function, category or frame.")
    before = ShareSideSerializer(help_text="The baseline's share.")
    after = ShareSideSerializer(help_text="This capture's share.")
    delta_points = serializers.FloatField(help_text="After minus before, in points.")
    delta_low = serializers.FloatField(help_text="95% Newcombe interval of the change, low.")
    delta_high = serializers.FloatField(help_text="95% Newcombe interval of the change, high.")
    p_value = serializers.FloatField(help_text="Two-proportion z-test, two-sided.")
    q_value = serializers.FloatField(help_text="Benjamini–Yekutieli adjusted p-value.")
    bound = serializers.CharField(
        help_text="exact, or `before below`/`after below` (a frame absent from a top list)."
    )
    moved = serializers.BooleanField(help_text="Significant and at least the minimum effect.")
    aliases = serializers.ListField(
        child=serializers.CharField(), help_text="Other rows counting the very same samples."
    )
    where = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="The user's code it points at: a function's line, a state's top caller.",
    )
    line = serializers.CharField(help_text="The row as messages and pages say it.")


class JudgementSerializer(serializers.Serializer):
    capture = serializers.IntegerField(help_text="The capture judged.")
    baseline = serializers.IntegerField(
        allow_null=True, help_text="The baseline it was judged against."
    )
    verdict = serializers.CharField(
        help_text="changed, unchanged, too few samples (nothing said), no baseline, or not "
        "comparable (the settings differ from the baseline's; `reason` says how)."
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


class ShiftSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="The share that shifted.")
    index = serializers.IntegerField(help_text="Position of the first capture after the shift.")
    capture = serializers.IntegerField(help_text="That capture's id.")
    before_mean = serializers.FloatField(help_text="Mean share before it (percent).")
    after_mean = serializers.FloatField(help_text="Mean share from it on (percent).")
    delta_points = serializers.FloatField(help_text="After minus before, in points.")
    baseline_percent = serializers.FloatField(help_text="The share in the baseline.")
    p_value = serializers.FloatField(help_text="Permutation p-value of the shift.")
    q_value = serializers.FloatField(help_text="Benjamini–Yekutieli adjusted, across shares.")
    permutations = serializers.IntegerField(help_text="Permutations drawn.")
    significant = serializers.BooleanField(help_text="Significant and at least the minimum effect.")


class DeliverySerializer(serializers.Serializer):
    target = serializers.CharField(help_text="The target's name.")
    status = serializers.CharField(help_text="pending, sending, retrying, sent or failed.")
    attempts = serializers.IntegerField(help_text="Tries so far.")
    error = serializers.CharField(help_text="The last failure's reason (URLs masked).")
    sent_at = serializers.DateTimeField(allow_null=True, help_text="When it was sent.")


class AlertSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The alert's id (for `acknowledge`).")
    key = serializers.CharField(help_text="The row.")
    label = serializers.CharField(help_text="The row, readable.")
    direction = serializers.ChoiceField(["up", "down"], help_text="Which way it moved.")
    source = serializers.ChoiceField(
        ["pair", "series"], help_text="Capture vs baseline, or a shift in the series."
    )
    status = serializers.CharField(help_text="open, acknowledged, resolved or rebaselined.")
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
        request=request_serializer,
        created=WatchSerializer,
        summary="Watch a rank against a baseline capture",
        description="`{run, role}`, `{process}` or `{run, all_roles: true}`, `baseline` (a done "
        "capture; for all roles a rank of a whole-job capture), `notify` "
        "(names of targets; Apprise URLs from host admins only, else 403).",
    )


def watch_detail(request_serializer):
    return combine(
        read_and_change(
            tags=WATCHES,
            shown=WatchSerializer,
            read_summary="One watch with its alerts",
            request=request_serializer,
            summary="Change, snooze or acknowledge",
            description="A new baseline closes the alerts and starts a new series.",
        ),
        extend_schema(
            methods=["DELETE"],
            summary="Delete a watch",
            responses={204: None, **errors(401, 403, 404)},
            tags=WATCHES,
        ),
    )
