"""OpenAPI description of the whole-job compare (`GET /api/compare/groups/`): the
engine's rows (profiles/pyspy/compare/jobs.py) by `config.api_schema.typed`, and the
few dicts around them that no type names."""

import typing

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers as s

from config.api_schema import ID, READ_ERRORS, errors, shape_of, typed
from profiles.api.schema import (
    VERDICT,
    RankPageSerializer,
    State,
    StragglerSerializer,
    rank_page_parameters,
)
from profiles.jobs import bounds
from profiles.pyspy import compare as comparing
from profiles.pyspy.core import types

Verdict = comparing.Verdict  # job_compare types its verdicts as str: share_row's
SEVERITY = typing.get_type_hints(types.Finding)["severity"]

typed(
    comparing.StateChange,
    {
        "state": "A thread state.",
        "a_percent": "Share of step-thread samples before.",
        "b_percent": "Share after.",
        "delta": "After minus before, in points.",
        "interval": "95% Newcombe interval of `delta`.",
        "verdict": VERDICT,
    },
    hints={"state": State, "verdict": Verdict},
)
typed(
    comparing.RoleChange,
    {
        "role": "The rank's role (rank-3), the same in both captures.",
        "a": "Its capture in the earlier whole-job capture.",
        "b": "Its capture in the later one.",
        "states": "Its step threads' states.",
    },
)
typed(
    comparing.ClassChange,
    {
        "label": "The class of ranks (the later capture's classes).",
        "roles": "Its roles both captures have, pooled.",
        "states": "Its step threads' states, pooled over those roles.",
    },
)
FindingChangeSerializer = typed(
    comparing.FindingChange,
    {
        "rule": "The finding's rule (straggler, data_starved, …).",
        "title": "Its title, from the side that has it.",
        "severity": "How much it matters.",
        "ranks": "The ranks it changed on (`job`: the whole job).",
    },
    hints={"severity": SEVERITY},
)
typed(
    comparing.FunctionChange,
    {
        "label": "The class of ranks (the later capture's classes).",
        "ranks": f"Its ranks pooled (at most {bounds.FUNCTION_RANKS_PER_CLASS}, spread over "
        "the class, its straggler kept).",
        "function": "A function of the user's code, `name (file.py)`.",
        "frame": "Its line seen most, `name (file.py:line)`.",
        "a_percent": "Share of the class's step-thread samples before.",
        "b_percent": "Share after.",
        "delta": "After minus before, in points.",
        "interval": "95% Newcombe interval of `delta`.",
        "verdict": VERDICT,
    },
    hints={"verdict": Verdict},
)


class PooledSerializer(s.Serializer):
    roles = s.IntegerField(help_text="Shared roles pooled.")
    states = shape_of(comparing.StateChange)(
        many=True, help_text="Every shared role's step threads."
    )


class StragglerPairSerializer(s.Serializer):
    a = StragglerSerializer(allow_null=True, help_text="The straggler before (null: none).")
    b = StragglerSerializer(allow_null=True, help_text="The straggler after (null: none).")


class FindingChangesSerializer(s.Serializer):
    resolved = FindingChangeSerializer(many=True, help_text="Held before, not after.")
    new = FindingChangeSerializer(many=True, help_text="Held after, not before.")
    persisting = FindingChangeSerializer(many=True, help_text="Held on both.")


class GroupSideSerializer(s.Serializer):
    id = s.IntegerField(help_text="The whole-job capture's id.")
    run = s.IntegerField(help_text="Its run.")
    created_at = s.DateTimeField(help_text="When it was taken.")
    launches = s.ListField(child=s.IntegerField(), help_text="The run's launches it sampled.")
    url = s.CharField(help_text="Its page.")


class GroupSidesSerializer(s.Serializer):
    a = GroupSideSerializer(help_text="The earlier whole-job capture.")
    b = GroupSideSerializer(help_text="The later one.")


class GroupComparisonSerializer(s.Serializer):
    """profiles.compare.groups.group_comparison: the engine's compare_jobs, named."""

    roles = shape_of(comparing.RoleChange)(
        many=True,
        help_text="The roles both captures have, a page of them (`roles_page`; past one page "
        "the stragglers first).",
    )
    roles_page = RankPageSerializer(help_text="Where `roles` lies among all shared roles.")
    pooled = PooledSerializer(help_text="All shared roles' step threads pooled.")
    classes = shape_of(comparing.ClassChange)(
        many=True, help_text="Per class of ranks, its shared roles' step threads pooled."
    )
    only_a = s.ListField(child=s.CharField(), help_text="Roles only the earlier one has.")
    only_b = s.ListField(child=s.CharField(), help_text="Roles only the later one has.")
    straggler = StragglerPairSerializer(help_text="The straggler before and after.")
    findings = FindingChangesSerializer(help_text="Findings by rule and rank.")
    functions = shape_of(comparing.FunctionChange)(
        many=True, help_text="Per class of ranks, the user functions that moved most."
    )
    groups = GroupSidesSerializer(help_text="The two whole-job captures, earlier first.")


compare_groups = extend_schema(
    summary="Compare two whole-job captures",
    description="Ranks aligned by role, before (the earlier, `a`) and after (`b`): per "
    "role (a page of roles), per class of ranks and pooled over the step threads, each "
    "state's share with the difference, its 95% interval and verdict; the straggler before "
    "and after; findings resolved, new and persisting by rule and rank; the user functions "
    "that moved most per class of ranks. Roles only one side has are listed apart. 400 "
    "when either is a dump or has no report yet.",
    parameters=[
        OpenApiParameter("a", ID, required=True, description="A whole-job capture's id."),
        OpenApiParameter("b", ID, required=True, description="The other's (order is by time)."),
        *rank_page_parameters("roles compared one by one"),
    ],
    responses={
        200: OpenApiResponse(GroupComparisonSerializer, "The comparison."),
        **errors(400, *READ_ERRORS, 409),
    },
    tags=["compare"],
)
