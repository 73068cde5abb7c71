"""The OpenAPI description of the capture, group and compare endpoints: answer shapes
with every field described, and one `extend_schema` decorator per view.

Documentation only (the views build their answers themselves);
tests/config/test_api_schema.py validates real answers against these shapes, so a
field a view starts to answer must be described here too. The analysis fields
follow the CLI's contract (profiles/pyspy/types.py, docs/engine.md).
"""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers as s

from config.api_schema import (
    FLAME_NODE_REF,
    READ_ERRORS,
    WRITE_ERRORS,
    FlameNodeField,
    errors,
    list_and_create,
)
from profiles.models import Capture
from profiles.pyspy.states import STATES
from runs import capture_settings
from runs.capture_serializers import SettingsAnswerSerializer

CAPTURES, GROUPS, COMPARE = ["captures"], ["whole-job captures"], ["compare"]
VERDICTS = ["ok", "degraded", "unreliable"]
STATUSES = ["queued", "running", "parsing", "done", "failed", "cancelled"]
GROUP_STATUSES = ["running", "done", "partial", "failed"]
KINDS = Capture.Kind.values


class FrameStatSerializer(s.Serializer):
    frame = s.CharField(help_text="`function (file.py:line)` or `symbol (library.so)`.")
    samples = s.IntegerField(help_text="Samples, each counted once.")
    percent = s.FloatField(help_text="Share of all samples, 0–100.")


class ShareSerializer(s.Serializer):
    samples = s.IntegerField(help_text="Samples that match (once per sample).")
    percent = s.FloatField(help_text="Share of all samples, 0–100.")
    python_callers = FrameStatSerializer(
        many=True,
        help_text="Nearest Python frame above the first match, once per sample; top 10.",
    )
    user_callers = FrameStatSerializer(
        many=True,
        required=False,
        help_text="Like python_callers, the nearest frame of the user's own code.",
    )


class KeywordStatSerializer(ShareSerializer):
    keyword = s.CharField(help_text="The keyword (substring, `=name`, `re:…`, `X under Y`).")
    category = s.CharField(help_text="Its category (launch, sync, alloc, …).")


class CategoryStatSerializer(ShareSerializer):
    category = s.CharField(help_text="The category; a sample counts once per category.")


class StateStatSerializer(s.Serializer):
    state = s.ChoiceField(STATES, help_text="The thread state (docs/states.md).")
    samples = s.IntegerField(help_text="Samples in this state; a list's samples add up.")
    percent = s.FloatField(help_text="Share of the list's scope (capture or thread), 0–100.")
    user_callers = FrameStatSerializer(
        many=True, help_text="Nearest frame of the user's own code where the state began."
    )


class ThreadStatSerializer(s.Serializer):
    name = s.CharField(help_text="The thread's name as py-spy reported it.")
    tid = s.JSONField(help_text="The thread id (a number, or py-spy's hex text).")
    pid = s.IntegerField(allow_null=True, help_text="The process (with --subprocesses).")
    samples = s.IntegerField(help_text="The thread's samples.")
    percent = s.FloatField(help_text="Share of all samples, 0–100.")
    states = StateStatSerializer(
        many=True, required=False, help_text="The thread's samples per state, all eleven."
    )
    active_percent = s.FloatField(
        allow_null=True,
        required=False,
        help_text="Its samples over py-spy's sampling rounds, 0–100; null: rounds unknown.",
    )


class LagPointSerializer(s.Serializer):
    t_index = s.IntegerField(help_text="Index of the warning.")
    approx_s = s.FloatField(help_text="About when it came, seconds into the capture.")
    behind_s = s.FloatField(help_text="py-spy's cumulative drift then.")


class LagSerializer(s.Serializer):
    requested_rate = s.IntegerField(allow_null=True, help_text="Rate asked of py-spy.")
    requested_duration_s = s.IntegerField(allow_null=True, help_text="Duration asked.")
    max_behind_s = s.FloatField(help_text="The largest drift py-spy reported.")
    warnings = s.IntegerField(help_text="How many 'behind in sampling' lines.")
    samples_reported = s.IntegerField(allow_null=True, help_text="py-spy's sample count.")
    errors_reported = s.IntegerField(allow_null=True, help_text="py-spy's error count.")
    verdict = s.ChoiceField(VERDICTS, help_text="ok when py-spy never fell behind.")
    recommended_rate = s.IntegerField(
        allow_null=True, help_text="A rate that would have kept up (below the asked one)."
    )
    achieved_fraction = s.FloatField(allow_null=True, help_text="Share of rounds taken.")
    effective_rate = s.FloatField(allow_null=True, help_text="Samples per second achieved.")
    elapsed_s_estimate = s.FloatField(allow_null=True, help_text="Estimated wall time.")
    stop_reason = s.CharField(allow_null=True, help_text="How py-spy stopped.")
    series = LagPointSerializer(many=True, help_text="Drift over time, one per warning.")
    explanation = s.CharField(help_text="The verdict in one sentence.")
    error = s.CharField(allow_null=True, help_text="py-spy's `Error:` line, if any.")


# --- findings, per-thread functions and the whole-job report (docs/findings.md) ---


class FindingSerializer(s.Serializer):
    rule = s.CharField(help_text="host_sync, input_bound, straggler, … (docs/findings.md).")
    severity = s.ChoiceField(["high", "medium", "info"], help_text="How much it matters.")
    title = s.CharField(help_text="The finding in a few words.")
    value = s.FloatField(help_text="The measured value (percent of the step threads' samples).")
    interval = s.ListField(child=s.FloatField(), help_text="Its 95% interval, [low, high].")
    threshold = s.FloatField(help_text="The rule's threshold: the whole interval is past it.")
    frames = s.ListField(child=s.CharField(), help_text="Flamegraph frames to open.")
    user_callers = FrameStatSerializer(many=True, help_text="Your code's lines it comes from.")
    advice = s.CharField(help_text="The fix, in one sentence naming the call site.")
    ranks = s.ListField(
        child=s.CharField(), required=False, help_text="Job only: the ranks it holds on."
    )


class FunctionStatSerializer(s.Serializer):
    function = s.CharField(help_text="`name (file.py)`: a function of your code, any line.")
    frame = s.CharField(help_text="Its line seen in most samples (a flamegraph frame).")
    samples = s.IntegerField(help_text="Samples with it on the stack, each once.")


class ThreadFunctionsSerializer(s.Serializer):
    thread = s.CharField(help_text="The thread's name.")
    tid = s.JSONField(help_text="The thread id.")
    samples = s.IntegerField(help_text="The thread's samples.")
    functions = FunctionStatSerializer(many=True, help_text="Its top 20 functions of your code.")


class ExplanationSerializer(s.Serializer):
    frame = s.CharField(help_text="A frame of your code (the function's hottest line).")
    function = s.CharField(required=False, help_text="The function, when the item is one.")
    state = s.CharField(required=False, help_text="The state at that call site, else absent.")
    percent = s.FloatField(help_text="Its share of the straggler's step-thread samples.")
    others_percent = s.FloatField(help_text="Its share on the other ranks together.")
    delta = s.FloatField(help_text="percent - others_percent, in points (always > 0).")
    interval = s.ListField(child=s.FloatField(), help_text="95% interval of the delta.")


class StragglerSerializer(s.Serializer):
    name = s.CharField(help_text="The rank the others wait for.")
    wait_percent = s.FloatField(help_text="Its step threads' share in collectives.")
    others_wait_percent = s.FloatField(help_text="The other ranks' share in collectives.")
    explanation = ExplanationSerializer(many=True, help_text="What it does more, largest first.")


class JobClassSerializer(s.Serializer):
    ranks = s.ListField(child=s.CharField(), help_text="Ranks that behave alike.")
    label = s.CharField(help_text="`ranks 0-2: 77% collective at train.py:98 (in …)`.")
    states = s.ListField(child=s.DictField(), help_text="Their states: {state, percent}.")
    distinctive = ExplanationSerializer(
        allow_null=True, help_text="The function of your code the other ranks hardly run."
    )


class StatsSerializer(s.Serializer):
    """The analysis CLI's JSON without `flamegraph` (contract 2)."""

    format = s.ChoiceField(["raw", "speedscope", "dump"], help_text="The input's format.")
    total_samples = s.IntegerField(help_text="Sum of all counts (0 for a dump).")
    unique_stacks = s.IntegerField(required=False, help_text="Distinct stacks.")
    skipped_lines = s.IntegerField(required=False, help_text="Malformed lines not counted.")
    max_depth = s.IntegerField(required=False, help_text="Deepest stack, in frames.")
    threads = ThreadStatSerializer(many=True, required=False, help_text="Samples per thread.")
    top_self = FrameStatSerializer(many=True, required=False, help_text="Hottest leaf frames.")
    top_total = FrameStatSerializer(
        many=True, required=False, help_text="Inclusive: each sample once per frame."
    )
    keywords = KeywordStatSerializer(many=True, required=False, help_text="Keyword shares.")
    categories = CategoryStatSerializer(many=True, required=False, help_text="Category shares.")
    uncovered_native = FrameStatSerializer(
        many=True, required=False, help_text="Hottest native leaves no keyword matches."
    )
    lag = LagSerializer(
        required=False, allow_null=True, help_text="Whether py-spy kept up (with its log)."
    )
    states = StateStatSerializer(
        many=True,
        required=False,
        help_text="Samples per thread state, all eleven in order; see docs/states.md.",
    )
    idle_included = s.BooleanField(
        allow_null=True,
        required=False,
        help_text="Whether blocked threads were sampled (py-spy --idle); null: unknown.",
    )
    rounds = s.IntegerField(
        allow_null=True,
        required=False,
        help_text="py-spy's sampling rounds, for active_percent; null: unknown.",
    )
    findings = FindingSerializer(
        many=True, required=False, help_text="What to change, most important first."
    )
    thread_functions = ThreadFunctionsSerializer(
        many=True, required=False, help_text="Per thread (top 16): your code's functions."
    )
    step_threads = s.DictField(
        required=False,
        help_text="Dashboard only: the threads the findings judged, {tids, detected_by} "
        "(named, collective, device, busiest or none; docs/findings.md).",
    )
    dump_threads = s.ListField(
        child=s.DictField(),
        required=False,
        help_text="A dump's threads: frames innermost first, status, locals.",
    )


class AttemptSerializer(s.Serializer):
    attempt = s.IntegerField(help_text="Which attempt failed.")
    at = s.DateTimeField(help_text="When.")
    cause = s.CharField(help_text="Failure cause (unreachable, connection_lost, …).")
    label = s.CharField(help_text="The cause in words.")
    said = s.CharField(help_text="The command's own last line.")


class RetrySerializer(s.Serializer):
    attempt = s.IntegerField(help_text="The attempt that will run next.")
    of = s.IntegerField(help_text="Attempts in all.")
    cause = s.CharField(help_text="Why the last one failed.")
    message = s.CharField(help_text="'retrying, attempt 2 of 4 in 3 s: host unreachable'.")
    due_at = s.DateTimeField(help_text="When the next attempt starts.")


class AnalysisUsageSerializer(s.Serializer):
    time_limit_s = s.FloatField(help_text="The analysis time limit it ran under.")
    memory_mb = s.IntegerField(help_text="The analysis memory limit it ran under.")
    seconds = s.FloatField(required=False, help_text="Seconds it took (when it finished).")
    peak_mb = s.FloatField(required=False, help_text="Peak RSS of its process, MB.")
    stopped = s.BooleanField(required=False, help_text="A limit stopped it (docs/limits.md).")


class ProgressSerializer(s.Serializer):
    sampling = s.BooleanField(required=False, help_text="py-spy has started sampling.")
    elapsed_s = s.FloatField(required=False, help_text="Seconds sampled so far.")
    duration_s = s.IntegerField(required=False, help_text="Seconds asked.")
    behind_s = s.FloatField(required=False, help_text="py-spy's current drift.")
    expected_samples = s.IntegerField(required=False, help_text="Rounds so far, estimated.")
    sampled_s = s.FloatField(required=False, help_text="Once recorded: the span sampled.")
    covered_s = s.FloatField(required=False, help_text="Of the asked duration, when it exited.")
    pyspy = s.DictField(
        required=False, help_text="py-spy's version, the target's Python, native_built."
    )
    python_only = s.DictField(
        required=False,
        help_text="--native was dropped (reason native_unavailable, why) or failed "
        "(native_failed: errors, samples, rounds): these are Python-only stacks.",
    )
    target_continued = s.BooleanField(
        required=False, help_text="py-spy left the process stopped; it was sent SIGCONT."
    )
    retry = RetrySerializer(required=False, help_text="While a retry waits.")
    analysis = AnalysisUsageSerializer(required=False, help_text="The last analysis's budget.")


class CaptureRowSerializer(s.Serializer):
    id = s.IntegerField(help_text="The capture's id.")
    status = s.ChoiceField(STATUSES, help_text="queued → running → parsing → done | failed.")
    kind = s.ChoiceField(KINDS, help_text="py-spy record, dump, or an imported file.")
    host = s.CharField(allow_null=True, help_text="The host's name (null for imports).")
    pid = s.IntegerField(allow_null=True, help_text="The process sampled.")
    run = s.IntegerField(allow_null=True, help_text="The run's id, if any.")
    settings = SettingsAnswerSerializer(help_text="py-spy settings asked.")
    error = s.CharField(help_text="Why it failed, with the fix, in one line.")
    error_cause = s.CharField(help_text="Failure cause, a name (docs/troubleshooting.md).")
    error_detail = s.CharField(help_text="The command's own words (stderr tail).")
    attempts = s.IntegerField(help_text="Attempts so far.")
    attempt_log = AttemptSerializer(many=True, help_text="Each failed attempt.")
    note = s.CharField(help_text="Non-fatal remarks, e.g. the process exited.")
    progress = ProgressSerializer(help_text="Live numbers while it runs or waits.")
    queued_at = s.DateTimeField(help_text="When it was asked for.")
    started_at = s.DateTimeField(allow_null=True, help_text="When a worker took it.")
    finished_at = s.DateTimeField(allow_null=True, help_text="When it ended.")
    raw_pruned = s.BooleanField(help_text="The raw file was pruned (stats stay).")


class CaptureSerializer(CaptureRowSerializer):
    stats = StatsSerializer(
        allow_null=True, help_text="The analysis; null until parsed. ?thread= filters it."
    )


class CaptureCreatedSerializer(s.Serializer):
    id = s.IntegerField(help_text="The capture's id.")
    status = s.ChoiceField(STATUSES, help_text="Usually queued.")
    error = s.CharField(required=False, help_text="When it failed at once.")
    error_cause = s.CharField(required=False, help_text="Its cause (host_config, …).")


class BusySerializer(s.Serializer):
    detail = s.CharField(help_text="Which capture is already on that process.")
    busy = s.IntegerField(help_text="Its id.")
    busy_status = s.CharField(help_text="Its status.")


class UnsentSerializer(s.Serializer):
    detail = s.CharField(help_text="queue unavailable: the broker, and how to fix it.")
    id = s.IntegerField(help_text="The capture, failed as queue_unavailable.")
    status = s.CharField(help_text="failed.")


class CancelSerializer(s.Serializer):
    id = s.IntegerField(help_text="The capture's id.")
    status = s.CharField(help_text="Its status now.")
    cancel_requested = s.BooleanField(help_text="Always true: py-spy gets SIGINT.")


class ImportRequestSerializer(s.Serializer):
    file = s.FileField(help_text="py-spy raw or speedscope JSON, plain or gzip.")
    log = s.FileField(required=False, help_text="py-spy's stdout, for the lag report.")
    run = s.IntegerField(required=False, help_text="A run's id to file it under.")


class ImportedSerializer(s.Serializer):
    id = s.IntegerField(help_text="The capture's id.")
    status = s.CharField(help_text="parsing: a worker analyses it.")
    error = s.CharField(help_text="Empty unless it failed at once.")


class GroupProcessSerializer(CaptureRowSerializer):
    role = s.CharField(help_text="The run process's role.")
    verdict = s.ChoiceField(VERDICTS, allow_null=True, help_text="Its lag verdict.")


class StacksVerdictSerializer(s.Serializer):
    kind = s.ChoiceField(
        ["stuck", "progressing", "unclear"],
        help_text="stuck: no rank's step thread moved across the dumps; progressing: they "
        "did; unclear: one dump, or too little to tell.",
    )
    odd = s.ListField(child=s.CharField(), help_text="The ranks that stand apart.")
    explanation = s.CharField(help_text="The verdict in one sentence.")
    user_frame = s.CharField(allow_null=True, help_text="Where the odd ranks stand (user code).")
    state = s.CharField(allow_null=True, help_text="Their thread state (idle, collective, …).")


class StacksClassSerializer(s.Serializer):
    ranks = s.ListField(child=s.CharField(), help_text="Ranks whose step thread stands here.")
    thread = s.CharField(help_text="The step thread's name.")
    user_frame = s.CharField(allow_null=True, help_text="Innermost frame of the user's code.")
    state = s.CharField(help_text="The thread state of that stack.")
    frames = s.ListField(child=s.CharField(), help_text="The call path, root first.")
    moving = s.BooleanField(help_text="Whether its stacks changed between dumps.")


class StacksSerializer(s.Serializer):
    verdict = StacksVerdictSerializer(help_text="Which ranks, where, and is anything moving.")
    classes = StacksClassSerializer(many=True, help_text="Ranks alike (LLNL STAT's classes).")
    ranks = s.ListField(child=s.DictField(), help_text="Per rank: thread, frame, state, dumps.")
    failed = s.ListField(
        child=s.DictField(), help_text="Ranks with no dump: `rank`, `cause`, `error`."
    )
    captures = s.DictField(child=s.IntegerField(), help_text="Rank name -> its capture id.")


class GroupSerializer(s.Serializer):
    id = s.IntegerField(help_text="The whole-job capture's id.")
    kind = s.ChoiceField(
        ["record", "dump"], help_text="record: sampled for a window; dump: stacks of every rank."
    )
    report_status = s.ChoiceField(
        ["pending", "stored", "failed"],
        help_text="Whether the job report (stacks, for a dump) is stored: `findings: []` "
        "means no findings only when this is stored.",
    )
    report_error = s.CharField(
        allow_null=True, help_text="Why the report could not be computed (failed), else null."
    )
    stacks = StacksSerializer(
        required=False,
        allow_null=True,
        help_text="A whole-job dump's verdict and classes, once every rank has ended.",
    )
    repeat = s.IntegerField(required=False, help_text="Dumps of each rank (kind dump).")
    interval = s.FloatField(required=False, help_text="Seconds between dumps (kind dump).")
    run = s.IntegerField(help_text="The run's id.")
    scheduled = s.BooleanField(help_text="Started by the run's schedule.")
    status = s.ChoiceField(GROUP_STATUSES, help_text="Across its processes.")
    start_skew_s = s.FloatField(
        allow_null=True,
        help_text="Spread of the moments each py-spy began sampling, by each host's clock; "
        "null until every process has started.",
    )
    captures = s.IntegerField(help_text="How many processes.")
    processes = GroupProcessSerializer(many=True, help_text="One capture per process.")
    straggler = StragglerSerializer(
        allow_null=True, help_text="The rank the others wait for (null: none beyond noise)."
    )
    classes = JobClassSerializer(many=True, help_text="Ranks that behave alike.")
    findings = FindingSerializer(many=True, help_text="The job's findings (docs/findings.md).")
    job_report_reason = s.CharField(
        allow_null=True, help_text="Why there is no verdict yet (ranks still running); null."
    )


class GroupUnsentSerializer(GroupSerializer):
    detail = s.CharField(help_text="queue unavailable: the broker, and how to fix it.")


class LiveSerializer(s.Serializer):
    group = s.IntegerField(help_text="The whole-job capture's id.")
    kind = s.ChoiceField(["record", "dump"], help_text="record, or dump (Dump all ranks).")
    run = s.IntegerField(help_text="The run's id.")
    status = s.CharField(help_text="running, done, partial or failed.")
    start_skew_s = s.FloatField(
        allow_null=True, help_text="Spread of the sampling starts; null until all started."
    )
    final = s.BooleanField(help_text="Every process has ended: stop polling.")
    states = s.ListField(
        child=s.CharField(), help_text="State columns shown (thread states, in their order)."
    )
    rows = s.ListField(
        child=s.DictField(),
        help_text="Per process: status, elapsed_s, behind_s, samples (estimated while "
        "running), verdict, `states` (percent per state of its step threads), error and "
        "its cause.",
    )
    report = s.DictField(
        help_text="The stored whole-job report once every process ended (findings, "
        "straggler, classes, each rank's step-thread states, rank links), else `ready` "
        "false and the `reason`."
    )
    skipped = s.ListField(child=s.DictField(), help_text="Processes skipped (exited).")
    processes = s.ListField(child=s.DictField(), help_text="GPU timelines, once final.")


class SandwichSerializer(s.Serializer):
    frame = s.CharField(help_text="The frame asked for.")
    samples = s.IntegerField(help_text="Samples with the frame anywhere (once each).")
    self_samples = s.IntegerField(help_text="Samples with it as the leaf.")
    total_samples = s.IntegerField(help_text="All samples of the capture (or threads).")
    percent = s.FloatField(help_text="samples of total, 0–100.")
    self_percent = s.FloatField(help_text="self_samples of total, 0–100.")
    occurrences = s.IntegerField(help_text="Tree nodes named so.")
    callers = FlameNodeField(help_text="Who calls it, inverted and merged.")
    callees = FlameNodeField(help_text="What it calls, merged.")
    approximate = s.BooleanField(help_text="The stored tree was pruned: a bound.")
    hidden_samples = s.IntegerField(
        help_text="Samples under pruned nodes outside its occurrences (bounds missed samples)."
    )
    hidden_self_samples = s.IntegerField(
        help_text="All samples under pruned nodes (bounds missed self samples)."
    )
    suggestions = s.ListField(
        child=s.CharField(), required=False, help_text="Near names when none matches exactly."
    )


class SummarySerializer(s.Serializer):
    id = s.IntegerField(help_text="The capture's id.")
    url = s.CharField(help_text="Its page.")
    target = s.CharField(help_text="host:pid and role.")
    run = s.CharField(allow_null=True, help_text="The run's name.")
    at = s.DateTimeField(help_text="When it finished (or was asked for).")
    status = s.CharField(help_text="Its status.")
    total_samples = s.IntegerField(help_text="Its samples.")
    lag_verdict = s.CharField(allow_null=True, help_text="Its lag verdict.")


class ComparisonSerializer(s.Serializer):
    before = SummarySerializer(help_text="The earlier capture.")
    after = SummarySerializer(help_text="The later capture.")
    threads = s.ListField(child=s.CharField(), help_text="The thread filter asked.")
    threads_applied = s.BooleanField(help_text="Both captures could be filtered so.")
    before_samples = s.IntegerField(help_text="Samples before.")
    after_samples = s.IntegerField(help_text="Samples after.")
    states = s.ListField(
        child=s.DictField(),
        help_text="Per thread state with samples on either side: the same shape and maths "
        "as `categories`; a side analysed before states existed is not measured.",
    )
    categories = s.ListField(
        child=s.DictField(),
        help_text="Per category: shares with 95% Wilson intervals, the change with a "
        "Newcombe interval, and the verdict (real change or within noise).",
    )
    keywords = s.ListField(child=s.DictField(), help_text="The same per keyword.")
    top_self = s.ListField(child=s.DictField(), help_text="Leaf frames with their deltas.")
    top_total = s.ListField(child=s.DictField(), help_text="Inclusive frames, deltas.")
    lag_warnings = s.ListField(child=s.CharField(), help_text="Lag beside the verdicts.")
    method = s.DictField(help_text="How intervals and verdicts are computed.")


THREAD = OpenApiParameter(
    "thread", str, description="Thread names or ids, comma-separated or repeated.", many=True
)
PROCESS_SETTINGS = ", ".join(capture_settings.names())


def busy_or_unsent(unsent) -> dict:
    """409 (a capture is already on a process) and 503 (the broker cannot be reached)."""
    return {
        409: OpenApiResponse(BusySerializer, "A capture is already on that process."),
        503: OpenApiResponse(unsent, "The broker cannot be reached."),
    }


def capture_list(request_serializer):
    return list_and_create(
        tags=CAPTURES,
        listed=CaptureRowSerializer(many=True),
        list_summary="The newest 100 captures",
        request=request_serializer,
        created=CaptureCreatedSerializer,
        summary="Capture a process",
        description="`{host, pid}` or `{process}` (a run process's id), the kind and "
        f"py-spy settings ({PROCESS_SETTINGS}). 409 when a capture is already on that "
        "host and PID; 503 when the broker cannot be reached.",
        responses=busy_or_unsent(UnsentSerializer),
    )


capture_detail = extend_schema(
    summary="One capture with its analysis",
    parameters=[THREAD],
    responses={200: CaptureSerializer, **errors(*READ_ERRORS)},
    tags=CAPTURES,
)

capture_flamegraph = extend_schema(
    summary="Its flamegraph (d3-flame-graph JSON)",
    parameters=[
        OpenApiParameter("max_nodes", int, description="Prune to this many nodes (10–50000)."),
        THREAD,
    ],
    responses={200: OpenApiResponse(FLAME_NODE_REF, "The tree."), **errors(*READ_ERRORS)},
    tags=CAPTURES,
)

capture_sandwich = extend_schema(
    summary="One frame's callers and callees",
    parameters=[
        OpenApiParameter("frame", str, required=True, description="The frame's full name."),
        OpenApiParameter("max_nodes", int, description="Prune each side (10–20000; 2000)."),
        THREAD,
    ],
    responses={200: SandwichSerializer, **errors(*WRITE_ERRORS)},
    tags=CAPTURES,
)

capture_cancel = extend_schema(
    summary="Stop a capture (the samples so far are kept)",
    request=None,
    responses={200: CancelSerializer, **errors(401, 403, 404, 409)},
    tags=CAPTURES,
)

capture_import = extend_schema(
    summary="Import a py-spy file",
    description="Stored and queued; a worker parses it (status `parsing`). Bodies over "
    "FLAMEDECK_MAX_UPLOAD_MB are refused with 413 before they are read.",
    request={"multipart/form-data": ImportRequestSerializer},
    responses={201: ImportedSerializer, **errors(400, 401, 403, 404, 413)},
    tags=CAPTURES,
)


def run_capture_all(settings_serializer):
    return extend_schema(
        summary="Capture (or dump) every process of the run at once",
        description="One window for every process, with the same settings; processes "
        "the last check found exited are skipped. With `kind` dump, every process's stacks "
        "`repeat` times, `interval` seconds apart; the group then carries `stacks`. "
        "409 when one is already being captured; "
        "400 when the run has no process or more hosts than the capture workers' threads.",
        request=settings_serializer,
        responses={
            201: GroupSerializer,
            **busy_or_unsent(GroupUnsentSerializer),
            **errors(*WRITE_ERRORS),
        },
        tags=GROUPS,
    )


group_detail = extend_schema(
    summary="A whole-job capture",
    responses={200: GroupSerializer, **errors(*READ_ERRORS)},
    tags=GROUPS,
)

group_flamegraph = extend_schema(
    summary="Its merged flamegraph",
    parameters=[
        OpenApiParameter("capture", int, many=True, description="Only these captures' ids.")
    ],
    responses={200: OpenApiResponse(FLAME_NODE_REF, "The tree."), **errors(*READ_ERRORS)},
    tags=GROUPS,
)

group_live = extend_schema(
    summary="The whole-job capture page's live numbers",
    description="What the whole-job capture page polls every second until `final`.",
    responses={200: LiveSerializer, **errors(*READ_ERRORS)},
    tags=GROUPS,
)

compare = extend_schema(
    summary="Compare two captures",
    parameters=[
        OpenApiParameter("a", int, required=True, description="A capture's id."),
        OpenApiParameter("b", int, required=True, description="The other's (order is by time)."),
        THREAD,
    ],
    responses={200: ComparisonSerializer, **errors(*WRITE_ERRORS)},
    tags=COMPARE,
)
