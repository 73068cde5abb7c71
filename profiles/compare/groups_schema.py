"""OpenAPI description of the whole-job compare (`GET /api/compare/groups/`)."""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers as s

from config.api_schema import READ_ERRORS, errors

VERDICT = "`real change` (the interval excludes 0), `within noise` or `not measured`."


class StateChangeSerializer(s.Serializer):
    state = s.CharField(help_text="A thread state (compute, collective, data_wait, …).")
    a_percent = s.FloatField(allow_null=True, help_text="Share of step-thread samples before.")
    b_percent = s.FloatField(allow_null=True, help_text="Share after.")
    delta = s.FloatField(allow_null=True, help_text="After minus before, in points.")
    interval = s.ListField(
        child=s.FloatField(), allow_null=True, help_text="95% Newcombe interval of `delta`."
    )
    verdict = s.CharField(help_text=VERDICT)


class RoleChangeSerializer(s.Serializer):
    role = s.CharField(help_text="The rank's role (rank-3), the same in both captures.")
    a = s.IntegerField(allow_null=True, help_text="Its capture in the earlier whole-job capture.")
    b = s.IntegerField(allow_null=True, help_text="Its capture in the later one.")
    states = StateChangeSerializer(many=True, help_text="Its step threads' states.")


class PooledSerializer(s.Serializer):
    roles = s.IntegerField(help_text="Shared roles pooled.")
    states = StateChangeSerializer(many=True, help_text="Every shared role's step threads.")


class StragglerPairSerializer(s.Serializer):
    a = s.DictField(allow_null=True, help_text="The straggler before (null: none).")
    b = s.DictField(allow_null=True, help_text="The straggler after (null: none).")


class FindingChangeSerializer(s.Serializer):
    rule = s.CharField(help_text="The finding's rule (straggler, data_starved, …).")
    title = s.CharField(help_text="Its title, from the side that has it.")
    severity = s.CharField(help_text="high, medium or info.")
    ranks = s.ListField(
        child=s.CharField(), help_text="The ranks it changed on (`job`: the whole job)."
    )


class FindingChangesSerializer(s.Serializer):
    resolved = FindingChangeSerializer(many=True, help_text="Held before, not after.")
    new = FindingChangeSerializer(many=True, help_text="Held after, not before.")
    persisting = FindingChangeSerializer(many=True, help_text="Held on both.")


class FunctionChangeSerializer(s.Serializer):
    label = s.CharField(help_text="The class of ranks (the later capture's classes).")
    ranks = s.ListField(child=s.CharField(), help_text="Its ranks.")
    function = s.CharField(help_text="A function of the user's code, `name (file.py)`.")
    frame = s.CharField(help_text="Its line seen most, `name (file.py:line)`.")
    a_percent = s.FloatField(help_text="Share of the class's step-thread samples before.")
    b_percent = s.FloatField(help_text="Share after.")
    delta = s.FloatField(allow_null=True, help_text="After minus before, in points.")
    interval = s.ListField(child=s.FloatField(), allow_null=True, help_text="95% Newcombe.")
    verdict = s.CharField(help_text=VERDICT)


class GroupSideSerializer(s.Serializer):
    id = s.IntegerField(help_text="The whole-job capture's id.")
    run = s.IntegerField(help_text="Its run.")
    created_at = s.DateTimeField(help_text="When it was taken.")
    launches = s.ListField(child=s.IntegerField(), help_text="The run's launches it sampled.")
    url = s.CharField(help_text="Its page.")


class GroupComparisonSerializer(s.Serializer):
    roles = RoleChangeSerializer(many=True, help_text="Every role both captures have.")
    pooled = PooledSerializer(help_text="All shared roles' step threads pooled.")
    only_a = s.ListField(child=s.CharField(), help_text="Roles only the earlier one has.")
    only_b = s.ListField(child=s.CharField(), help_text="Roles only the later one has.")
    straggler = StragglerPairSerializer(help_text="The straggler before and after.")
    findings = FindingChangesSerializer(help_text="Findings by rule and rank.")
    functions = FunctionChangeSerializer(
        many=True, help_text="Per class of ranks, the user functions that moved most."
    )
    groups = s.DictField(help_text="`a` and `b`: the two whole-job captures, earlier first.")


compare_groups = extend_schema(
    summary="Compare two whole-job captures",
    description="Ranks aligned by role, before (the earlier, `a`) and after (`b`): per "
    "role and pooled over the step threads, each state's share with the difference, its "
    "95% interval and verdict; the straggler before and after; findings resolved, new "
    "and persisting by rule and rank; the user functions that moved most per class of "
    "ranks. Roles only one side has are listed apart. 400 when either is a dump or has "
    "no report yet.",
    parameters=[
        OpenApiParameter("a", int, required=True, description="A whole-job capture's id."),
        OpenApiParameter("b", int, required=True, description="The other's (order is by time)."),
    ],
    responses={
        200: OpenApiResponse(GroupComparisonSerializer, "The comparison."),
        **errors(400, *READ_ERRORS),
    },
    tags=["compare"],
)
