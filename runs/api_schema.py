"""The OpenAPI description of runs/api.py: answer shapes, field descriptions and one
`extend_schema` decorator per view (applied there, one line each). Documentation
only: the views build their answers themselves, and tests/config/test_api_schema.py
checks that what they answer matches what is written here."""

import functools

from django.core.validators import RegexValidator
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers

from config.api_fields import NOT_BLANK, NameOrIdField, PidField, StrictJSON
from config.api_schema import (
    READ_ERRORS,
    WRITE_ERRORS,
    combine,
    described,  # noqa: F401 - runs/api.py's extra_kwargs
    errors,
    list_and_create,
    read_and_change,
    typed,
)
from profiles.pyspy.job import AXES, MAX_AXES, MAX_COORDINATE, layout_problem

from .capture_serializers import RememberedSettingsSerializer
from .remote.model import CHECK_BUDGET_S, Cause, HostCheck, ProcessInfo

HOSTS, RUNS = ["hosts"], ["runs"]

# Serializer field descriptions (extra_kwargs in runs/api.py), where the model has none.
HOST_FIELDS = {
    "id": "The host's id.",
    "name": "Unique name; what `POST /api/register/` and `capture --host` refer to.",
    "transport": "`local` (this machine, only with FLAMEDECK_LOCAL_HOST) or `ssh`.",
    "port": "SSH port (empty: ssh's own default or ~/.ssh/config).",
    "username": "SSH user (empty: ssh's own default or ~/.ssh/config).",
    "py_spy": "py-spy's path or command on the host.",
    "notes": "Free text; the only field operators may change.",
    "last_check": "The last connection test (see `POST /api/hosts/{id}/check/`).",
    "last_checked_at": "When that test ran.",
}
# The rules of runs.remote.model's checks that a pattern can state, enforced as written
# (a name's uniqueness is a 409, not a field rule). An exec prefix in the API is words
# without quotes or backslashes (always split the same; the form takes shell quoting).
CONTROL = r"\x00-\x1f\x7f"
HOST_RULES = {
    "name": {"validators": [RegexValidator(NOT_BLANK)]},
    "address": {"validators": [RegexValidator(r"^[A-Za-z0-9_.:][A-Za-z0-9_.:-]*$")]},
    "username": {"validators": [RegexValidator(r"^[A-Za-z0-9_.][A-Za-z0-9_.@-]*$")]},
    "exec_prefix": {"validators": [RegexValidator(rf"^[^'\"\\{CONTROL}]+$")]},
    "py_spy": {"validators": [RegexValidator(rf"^[^{CONTROL}]+$")]},
}
RUN_FIELDS = {
    "id": "The run's id.",
    "name": "The training job's name (the key `POST /api/register/` finds runs by).",
    "description": "Free text.",
    "status": "planned, running, finished or failed; scheduled captures need running.",
    "tags": "Tag names (a comma- or space-separated string when creating).",
    "started_at": "When the job started (the first registration, or set by hand).",
    "ended_at": "When it ended, if it has.",
    "created_at": "When the run was created in flamedeck.",
}

# A run's analysis fields in the API: printable ASCII; library paths at most 200 lines
# of at most 300 characters (runs.models.validate_library_paths takes any printable text).
STEP_THREADS = r"^[\x20-\x7e]+$"
LIBRARY_PATHS = r"^(?=[\x20-\x7e\n])(?:[\x20-\x7e]{0,300}\n){0,199}[\x20-\x7e]{0,300}$"


typed(
    ProcessInfo,
    {
        "pid": "Process id on the host.",
        "user": "The process's user.",
        "cpu_percent": "CPU use as ps reports it.",
        "threads": "Thread count.",
        "command": "Command line; the flamedeck server's own processes are hidden "
        "from everyone but host admins.",
    },
)
HostCheckSerializer = typed(
    HostCheck,
    {
        "ok": "ssh works and py-spy answered with a version.",
        "ssh_ok": "The host could be reached.",
        "py_spy_path": "Where py-spy was found.",
        "py_spy_version": "`py-spy --version`.",
        "install_hint": "How to install py-spy.",
        "uid": "The remote user's uid.",
        "ptrace_scope": "kernel.yama.ptrace_scope (null: not checked).",
        "can_attach": "Whether py-spy may attach to processes.",
        "reason": "Why it may not, with the fix.",
        "processes": "Python processes on the host.",
        "cause": "Failure cause (`unreachable`, …).",
        "error": "The failure in one line.",
    },
    hints={"ok": bool, "cause": Cause | None},  # ok: added by runs.services.host_check
)
NEVER_CHECKED = {"type": "object", "additionalProperties": False, "description": "Never tested."}


@extend_schema_field({"oneOf": [{"$ref": "#/components/schemas/HostCheck"}, NEVER_CHECKED]})
class LastCheckField(serializers.JSONField):
    """A host's last connection test, or `{}` before the first."""


@functools.cache
def shown_host(host_serializer: type[serializers.ModelSerializer]):
    """The host as answers show it: its last check typed (the model keeps it as JSON)."""

    class HostSerializer(host_serializer):
        last_check = LastCheckField(read_only=True, help_text=HOST_FIELDS["last_check"])

    return HostSerializer


class _Layout(StrictJSON, serializers.Serializer):
    """A rank's place in the job's parallel layout: known axes only, at most MAX_AXES
    (profiles.pyspy.job.layout.layout_problem, the one rule)."""

    closed = True
    max_properties = MAX_AXES
    json_types = None  # layout_problem says what a layout is, in its own words

    def to_internal_value(self, data):
        problem = layout_problem(data)
        if problem:
            raise serializers.ValidationError(problem)
        return super().to_internal_value(data)


# One optional field per known axis.
LayoutSerializer = type(
    "LayoutSerializer",
    (_Layout,),
    {
        axis: serializers.IntegerField(
            required=False,
            min_value=0,
            max_value=MAX_COORDINATE,
            help_text=f"Its coordinate on the `{axis}` axis ({words} N).",
        )
        for axis, words in AXES.items()
    },
)


class ProcessSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The run process's id.")
    host = serializers.CharField(help_text="The host's name.")
    host_id = serializers.IntegerField(help_text="The host's id.")
    pid = serializers.IntegerField(help_text="Process id on that host.")
    role = serializers.CharField(help_text="Label such as rank-3 or target-0.")
    alive = serializers.BooleanField(
        allow_null=True, help_text="Last liveness check: running, exited, or null (not known)."
    )
    checked_at = serializers.DateTimeField(allow_null=True, help_text="When it was checked.")
    launch = serializers.IntegerField(
        allow_null=True, help_text="The number of the run's launch it belongs to (from 1)."
    )
    replaced_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When a later process of the same role replaced it; nothing captures it since.",
    )
    replaced_by = serializers.IntegerField(
        allow_null=True, help_text="The id of the process that replaced it."
    )
    layout = LayoutSerializer(
        allow_null=True,
        help_text="Its place in the job's parallel layout, as the rank registered it "
        "(null: not known); the whole-job report names the parallel group of the ranks "
        "it singles out.",
    )


class AttachedProcessSerializer(ProcessSerializer):
    warning = serializers.CharField(
        help_text="Set when the host could not be asked whether the PID runs."
    )


class PlanSerializer(serializers.Serializer):
    processes = serializers.IntegerField(help_text="Processes a capture of all would sample.")
    hosts = serializers.IntegerField(help_text="Hosts it would reach.")
    skipped = ProcessSerializer(many=True, help_text="Processes the last check found exited.")


def run_detail_serializer(run_serializer: type[serializers.ModelSerializer]):
    """The run's own fields, its page, remembered settings and processes."""

    class RunDetailSerializer(run_serializer):
        url = serializers.CharField(help_text="The run's page (a path).")
        capture_settings = RememberedSettingsSerializer(
            help_text='What "Capture all" opens with next time; empty until it was used.'
        )
        processes = ProcessSerializer(many=True, help_text="The run's processes.")

        class Meta(run_serializer.Meta):
            fields = [*run_serializer.Meta.fields, "url", "capture_settings", "processes"]

    return RunDetailSerializer


class ProcessRequestSerializer(StrictJSON, serializers.Serializer):
    host = NameOrIdField(
        max_length=100,
        help_text="The host's name or id; 400 naming it when no host has that name.",
    )
    pid = PidField(help_text="Process id on that host; it must be running there.")
    role = serializers.CharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        max_length=100,
        trim_whitespace=False,
        help_text="Label such as rank-3 (optional).",
    )


class RegisterRequestSerializer(ProcessRequestSerializer):
    run = serializers.CharField(
        max_length=200,
        validators=[RegexValidator(NOT_BLANK)],
        help_text="The run's name (not blank); created if new.",
    )
    pid = PidField(help_text="The registering process's own PID.")
    launch = serializers.CharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        max_length=200,
        help_text="The launch this process belongs to (TORCHELASTIC_RUN_ID, or "
        "FLAMEDECK_LAUNCH when set). A role the run already has from another PID retires "
        "that process when it has exited or its launch differs.",
    )
    layout = LayoutSerializer(
        required=False,
        allow_null=True,
        help_text=f"Optional: the rank's place in the job's parallel layout, at most "
        f"{MAX_AXES} known axes (400 naming the problem otherwise), e.g. "
        '{"dp": 7, "tp": 0, "pp": 3}. A repeat registration that gives it sets it.',
    )


class RegisteredRunSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The run's id.")
    name = serializers.CharField(help_text="The run's name.")
    url = serializers.URLField(help_text="The run's page, an absolute URL.")


class RegisteredSerializer(serializers.Serializer):
    run = RegisteredRunSerializer(help_text="The run the process joined.")
    run_created = serializers.BooleanField(help_text="This call created the run.")
    process = ProcessSerializer(help_text="The attached process.")
    created = serializers.BooleanField(help_text="This call attached the process.")
    warning = serializers.CharField(
        required=False,
        help_text="Set when the host could not be asked whether the PID runs (alive is null).",
    )


class LivenessSerializer(serializers.Serializer):
    processes = ProcessSerializer(many=True, help_text="Every process, with fresh marks.")
    errors = inline_serializer(
        "LivenessError",
        {
            "host": serializers.CharField(help_text="The host that could not be asked."),
            "error": serializers.CharField(help_text="Why."),
        },
        many=True,
        help_text="Hosts that could not be asked; their processes keep their last marks.",
    )
    plan = PlanSerializer(help_text="What a capture of all would touch now.")
    run_status = serializers.CharField(
        help_text="The run's status after the check: finished once every process exited."
    )


def host_list(host_serializer):
    return list_and_create(
        tags=HOSTS,
        listed=shown_host(host_serializer)(many=True),
        list_summary="List hosts",
        list_description="Every host, with its last connection test.",
        request=host_serializer,
        created=shown_host(host_serializer),
        summary="Add a host (host admins)",
        description="Refused with 400 naming the field when the command builder "
        "could not use it (an address with shell syntax, quotes in the exec prefix), for "
        "an SSH host (the default transport) without an address, and for a local host "
        "with an exec prefix or a py-spy other than `py-spy`; 409 when the name is taken "
        "or this server keeps no local host (FLAMEDECK_LOCAL_HOST off).",
        responses=errors(409),
    )


def host_detail(host_serializer):
    return read_and_change(
        tags=HOSTS,
        shown=shown_host(host_serializer),
        read_summary="One host",
        read_description="How it is reached, and its last connection test.",
        request=host_serializer,
        summary="Change a host",
        description="Host admins change any field, operators only `notes`; every "
        "change of how the host is reached is recorded in its change log. A body that "
        "says `transport: local` gives no exec prefix and no py-spy but `py-spy` (400). "
        "409 when the name is taken or the host as stored refuses the change: an SSH host "
        "left without an address, a local host's exec prefix or py-spy (set on the server "
        "only), a local host where this server keeps none.",
        responses=errors(409),
    )


host_check = extend_schema(
    summary="Test the connection",
    description="ssh, py-spy's path and version, the uid, ptrace_scope, whether py-spy "
    "can attach, and the Python processes (RANK/LOCAL_RANK/WORLD_SIZE when readable), "
    f"in one session: the answer comes within {CHECK_BUDGET_S:g} s whatever the host does. "
    "Failures come inside the answer (`cause`, `error`), not as an error status; a check "
    "that ran out of time names the step it was at and the fix.",
    request=None,
    responses={200: HostCheckSerializer, **errors(400, 401, 403, 404)},
    tags=HOSTS,
)


def run_list(run_serializer):
    return list_and_create(
        tags=RUNS,
        listed=run_serializer(many=True),
        list_summary="List runs (the newest 200)",
        list_description="Newest first, without their processes.",
        request=run_serializer,
        created=run_serializer,
        summary="Create a run",
        description="`{name, description, tags}`, and optionally how its captures are "
        "analysed (`library_paths`, `step_threads`).",
    )


def run_detail(run_serializer, change_serializer):
    return read_and_change(
        tags=RUNS,
        shown=run_detail_serializer(run_serializer),
        read_summary="One run with its processes",
        read_description="Its fields, its page, the settings Capture all remembers and its "
        "processes with their last liveness marks.",
        request=change_serializer,
        summary="Change the run's capture settings and analysis",
        description="Any of: what Capture all (and the run's capture buttons) open with "
        "next time (refused like a whole-job capture's settings), `library_paths`, "
        "`step_threads`. An empty body changes nothing.",
    )


run_processes = combine(
    extend_schema(
        methods=["GET"],
        summary="A run's processes",
        description="Attached processes with their host, role, launch and last liveness mark.",
        responses={200: ProcessSerializer(many=True), **errors(*READ_ERRORS)},
        tags=RUNS,
    ),
    extend_schema(
        methods=["POST"],
        summary="Attach a process",
        description="201 when attached now, 200 with the existing row for the same "
        "host and PID. The PID must run on the host (400 if not); attached with a "
        "`warning` when the host cannot be asked.",
        request=ProcessRequestSerializer,
        responses={
            201: AttachedProcessSerializer,
            200: OpenApiResponse(AttachedProcessSerializer, "Already attached."),
            **errors(*WRITE_ERRORS),
        },
        tags=RUNS,
    ),
)

run_process_detail = extend_schema(
    summary="Detach a process",
    description="The process leaves the run; its captures stay.",
    parameters=[OpenApiParameter("process_pk", int, "path", description="The run process's id.")],
    responses={204: None, **errors(*READ_ERRORS)},
    tags=RUNS,
)

run_processes_check = extend_schema(
    summary="Ask the hosts which processes still run",
    description="One `ps` per host, hosts in parallel, 5 s bound; rows checked in the "
    "last 15 s are not asked again. Any logged-in user may ask.",
    request=None,
    responses={200: LivenessSerializer, **errors(*READ_ERRORS)},
    tags=RUNS,
)

register = extend_schema(
    summary="A rank attaches itself to a run",
    description="Gets or creates the run by name and attaches (host, pid, role); "
    "idempotent, safe for every rank of a job at the same instant. 201 when the run "
    "or the process is new, 200 when both were known. The host must exist under "
    "that name (400 naming it otherwise) and the PID run there (400 if not; attached "
    "with `alive: null` and a `warning` when the host cannot be asked); a `layout` with "
    "an unknown axis or a coordinate out of bounds is a 400 naming it. Operators' tokens.",
    request=RegisterRequestSerializer,
    responses={
        201: RegisteredSerializer,
        200: OpenApiResponse(RegisteredSerializer, "Already registered."),
        **errors(400, 401, 403),
    },
    tags=RUNS,
)
