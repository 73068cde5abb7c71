"""The OpenAPI description of the capture, group and compare endpoints: answer shapes
and one `extend_schema` decorator per view.

The analysis's shapes are the engine's own TypedDicts (profiles/pyspy/core/types.py),
turned into components by `config.api_schema.typed`: only their words are written here,
for the fields whose TypedDict has no docstring. The rest are the dashboard's answers
(views and selectors build them as plain dicts), written as serializers with their
enums taken from the models and the engine. tests/config/test_api_schema.py validates
real answers against these shapes.
"""

import typing
from typing import Literal, NotRequired, TypedDict

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers as s

from config.api_fields import NOT_BLANK
from config.api_schema import (
    ID,
    ID_MAX,
    READ_ERRORS,
    WRITE_ERRORS,
    DetailSerializer,
    described,
    errors,
    list_and_create,
    shape_of,
    typed,
)
from profiles.captures.timelines import MIN_WINDOW_S
from profiles.jobs import bounds
from profiles.models import Capture, CaptureGroup
from profiles.pyspy import STATES, Sandwich
from profiles.pyspy import compare as comparing
from profiles.pyspy import job as rank_workers
from profiles.pyspy.core import types
from profiles.watches.api_schema import ShareSideSerializer  # noqa: F401 - ShareRow uses it
from runs import capture_settings
from runs.capture_serializers import SettingsAnswerSerializer
from runs.gpu import GpuPoint, GpuSeries, GpuTimeline
from runs.remote.model import Cause

CAPTURES, GROUPS, COMPARE = ["captures"], ["whole-job captures"], ["compare"]
State = Literal[STATES]  # the engine types a state as str; STATES lists them
LAG_VERDICTS = typing.get_args(typing.get_type_hints(types.LagReport)["verdict"])
LagVerdict = Literal[LAG_VERDICTS]
FORMATS = (*typing.get_args(typing.get_type_hints(types.Stats)["format"]), "dump")
GROUP_KINDS = CaptureGroup._meta.get_field("kind").choices
CHANGE_VERDICTS = typing.get_args(comparing.Verdict)  # for ENUM_NAME_OVERRIDES
STACKS_KINDS = typing.get_args(typing.get_type_hints(types.StacksVerdict)["kind"])
DUMP_KIND = [c for c in GROUP_KINDS if c[0] == "dump"]
# No constant holds these: jobs.services.group_summary and CaptureGroup.report_status.
GROUP_STATUSES = ["running", "done", "partial", "failed"]
REPORT_STATUSES = ["pending", "stored", "failed"]

SHARE = {"samples": "Samples, each counted once.", "percent": "Share of all samples, 0–100."}
CALLERS = {
    "python_callers": "Nearest Python frame above the first match, once per sample; top 10.",
    "user_callers": "Like python_callers, the nearest frame of the user's own code.",
}

# --- the analysis: the engine's TypedDicts ----------------------------------------------

FlameNodeSerializer = typed(
    types.FlameNode,
    {
        "name": "The frame, `function (file.py:line)` or `symbol (library.so)`; thread "
        "nodes keep py-spy's `thread (TID): NAME`.",
        "value": "Samples in this node and below.",
        "children": "The frames it calls, each a FlameNode.",
        "pruned_frames": "Only on a `[pruned: N frames]` node: the frames it stands for.",
    },
)
typed(types.FrameStat, {"frame": "`function (file.py:line)` or `symbol (library.so)`.", **SHARE})
# FrameworkCaller extends FrameworkFrame, but a TypedDict keeps no bases on Python 3.11:
# the fields it inherits take their words from FrameworkFrame's docstrings.
_FRAMEWORK_FRAME = typed(types.FrameworkFrame)
typed(
    types.FrameworkCaller,
    {n: str(f.help_text) for n, f in _FRAMEWORK_FRAME._declared_fields.items()},
)
typed(
    types.StateStat,
    {
        "state": "The thread state (docs/states.md).",
        "samples": "Samples in this state; a list's samples add up.",
        "percent": "Share of the list's scope (capture or thread), 0–100.",
        "user_callers": "Nearest frame of the user's own code where the state began.",
    },
    hints={"state": State},
)
typed(
    types.ThreadStat,
    {
        "name": "The thread's name as py-spy reported it.",
        "tid": "The thread id (a number, or py-spy's hex text).",
        "pid": "The process (with --subprocesses).",
        "samples": "The thread's samples.",
        "percent": "Share of all samples, 0–100.",
        "states": "The thread's samples per state, all eleven.",
        "active_percent": "Its samples over py-spy's sampling rounds, 0–100; null: unknown.",
    },
    optional=("states", "active_percent"),  # captures analysed before states existed
)
typed(
    types.KeywordStat,
    {
        "keyword": "The keyword (substring, `=name`, `re:…`, `X under Y`).",
        "category": "Its category (launch, sync, alloc, …).",
        "samples": "Samples that match (once per sample).",
        "percent": "Share of all samples, 0–100.",
        "python_callers": CALLERS["python_callers"],
    },
    optional=("user_callers",),
)
typed(
    types.CategoryStat,
    {
        "category": "The category; a sample counts once per category.",
        "samples": "Samples that match (once per sample).",
        "percent": "Share of all samples, 0–100.",
        **CALLERS,
    },
    optional=("user_callers",),
)
typed(
    types.LagPoint,
    {
        "t_index": "Index of the warning.",
        "approx_s": "About when it came, seconds into the capture.",
        "behind_s": "py-spy's cumulative drift then.",
    },
)
typed(
    types.LagReport,
    {
        "requested_rate": "Rate asked of py-spy.",
        "requested_duration_s": "Duration asked.",
        "max_behind_s": "The largest drift py-spy reported.",
        "warnings": "How many 'behind in sampling' lines.",
        "samples_reported": "py-spy's sample count.",
        "errors_reported": "py-spy's error count.",
        "verdict": "ok when py-spy never fell behind.",
        "recommended_rate": "A rate that would have kept up (below the asked one).",
        "achieved_fraction": "Share of rounds taken.",
        "effective_rate": "Samples per second achieved.",
        "elapsed_s_estimate": "Estimated wall time.",
        "stop_reason": "Why py-spy stopped early, in its words (`process exited`); else null.",
        "series": "Drift over time, one per warning.",
        "explanation": "The verdict in one sentence.",
    },
    name="Lag",
)
FindingSerializer = typed(
    types.Finding,
    {
        "rule": "host_sync, input_bound, straggler, … (docs/findings.md).",
        "severity": "How much it matters.",
        "title": "The finding in a few words.",
        "value": "The measured value (percent of the step threads' samples).",
        "interval": "Its 95% interval, [low, high].",
        "threshold": "The rule's threshold: the whole interval is past it.",
        "frames": "Flamegraph frames to open.",
        "user_callers": "Your code's lines it comes from.",
        "advice": "The fix, in one sentence naming the call site.",
        "ranks": "Job only: the ranks it holds on.",
        "workers": "Job, input_bound or straggler: what its ranks' DataLoader workers do most.",
        "period_s": "periodic_stall only: seconds from one burst to the next.",
        "duration_s": "periodic_stall only: how long a burst lasts, in seconds.",
        "state": "periodic_stall only: the state the bursts are in.",
        "function": "periodic_stall only: your function the bursts are in, or null.",
        "thread": "periodic_stall only: the thread it was found on.",
        "bursts": "periodic_stall only: each burst's [start, end], seconds since the first sample.",
        "regularity_cv": "periodic_stall only: spread of the periods (coefficient of variation).",
    },
    hints={
        "workers": NotRequired[list[rank_workers.WorkersFact]],
        **{
            name: NotRequired[hint]
            for name, hint in typing.get_type_hints(types.PeriodicFinding).items()
            if name not in typing.get_type_hints(types.Finding)
        },
        "state": NotRequired[State],
    },
)
typed(
    types.FunctionStat,
    {
        "function": "`name (file.py)`: a function of your code, any line.",
        "frame": "Its line seen in most samples (a flamegraph frame).",
        "samples": "Samples with it on the stack, each once.",
    },
)
typed(
    types.ThreadFunctions,
    {
        "thread": "The thread's name.",
        "tid": "The thread id (a number, or py-spy's hex text).",
        "samples": "The thread's samples.",
        "functions": "Its top 20 functions of your code.",
    },
)
typed(
    types.Explanation,
    {
        "frame": "A frame of your code (the function's hottest line).",
        "percent": "Its share of the rank's step-thread samples, 0–100.",
        "others_percent": "The other ranks' share, 0–100.",
        "delta": "percent - others_percent, in points (always > 0).",
        "interval": "95% interval of the delta.",
        "function": "The function of your code it is in (a function explanation).",
        "state": "The thread state at that call site (a state explanation).",
        "workers": "A data_wait explanation: what the rank's DataLoader workers do most.",
    },
    hints={"state": NotRequired[State], "workers": NotRequired[rank_workers.WorkersFact]},
)
StragglerSerializer = typed(
    types.Straggler,
    {
        "name": "The rank the others wait for.",
        "wait_percent": "Its step threads' share in waiting states.",
        "others_wait_percent": "The other ranks' share in waiting states.",
        "explanation": "What it does more, largest first.",
        "workers": "Explained by data_wait: what its DataLoader workers do most.",
    },
    hints={"workers": NotRequired[rank_workers.WorkersFact]},
)


class ClassState(TypedDict):
    """A state's share of a class's step-thread samples (job.py; typed there as a dict)."""

    state: State
    percent: float


typed(ClassState, {"state": "The thread state.", "percent": "Its share, 0–100."})
JobClassSerializer = typed(
    types.JobClass,
    {
        "ranks": "Ranks that behave alike.",
        "label": "`ranks 0-2: 77% collective at train.py:98 (in …)`.",
        "states": "Their states, with samples.",
        "distinctive": "The function of your code the other ranks hardly run.",
    },
    hints={"states": list[ClassState]},
)
typed(types.DumpLocal, {"name": "The variable.", "value": "Its repr.", "arg": "An argument."})
typed(
    types.DumpFrame,
    {
        "name": "The function (or native symbol).",
        "native": "A native frame.",
        "locals": "Its local variables (py-spy dump --locals).",
    },
)
typed(
    types.DumpThread,
    {
        "pid": "The process (with --subprocesses).",
        "tid": "The thread id (a number, or py-spy's hex text).",
        "name": "The thread's name.",
        "status": "What py-spy printed in brackets: idle, active, active+gil, gil, or empty.",
        "active": "Running (null: not known).",
        "idle": "Idle (null: not known).",
        "gil": "Holding the GIL (null: not known).",
        "frames": "Its stack, innermost first.",
    },
)


class StepStateSerializer(s.Serializer):
    state = s.ChoiceField(STATES, help_text="The thread state.")
    samples = s.IntegerField(help_text="The step threads' samples in it.")
    percent = s.FloatField(help_text="Their share, 0–100.")


class StepThreadsSerializer(s.Serializer):
    """The threads the findings judged (profiles.captures.analysis.stored_step_threads)."""

    tids = s.ListField(child=s.CharField(), help_text="Their thread ids, as text.")
    names = s.ListField(child=s.CharField(), help_text="Their names (the tid when unnamed).")
    detected_by = s.CharField(help_text="named, collective, device, busiest or none.")
    samples = s.IntegerField(help_text="Their samples together.")
    states = StepStateSerializer(many=True, help_text="Their states with samples, added up.")


class DumpSeriesItemSerializer(s.Serializer):
    """One dump of a whole-job dump's rank (pyspy.parse_dump_series: at, threads)."""

    at = s.FloatField(allow_null=True, help_text="Host epoch seconds (null: not known).")
    threads = shape_of(types.DumpThread)(many=True, help_text="Its threads.")


typed(
    types.ScopeEffects,
    {
        "samples": "Samples of the scope.",
        "states": "State -> its design effect.",
        "functions": "User function -> its design effect (the most sampled ones).",
    },
)
typed(
    types.DesignEffects,
    {
        "method": "How the design effects were measured.",
        "block_s": "Seconds per time block.",
        "blocks": "Time blocks measured.",
        "step": "The step threads' shares (findings, watches, the job report).",
        "all": "Every timed thread's shares (the capture's own state table, compare).",
    },
)
typed(
    types.TimeInfo,
    {
        "available": "Whether the capture keeps time: a timeline, windows, periodic stalls.",
        "reason": "Why not (imported, recorded without --idle, …); null when it does.",
        "start": "Host epoch seconds of the first sample.",
        "end": "Host epoch seconds when py-spy stopped.",
        "rate": "The requested sampling rate.",
        "rounds": "Sampling rounds: the most samples a thread has.",
        "bucket_s": "The timeline's default bucket, in seconds.",
        "untimed": "Threads that cannot be placed in time (born or ended mid-capture).",
        "design_effect": "Per share, how many samples count as one independent draw, "
        "measured over time blocks (batch means): every interval of this capture's shares "
        "counts samples / design effect. Null when the capture is too short for blocks.",
    },
)
StatsSerializer = typed(
    types.Stats,
    {
        "format": "The input's format.",
        "total_samples": "Sum of all counts (0 for a dump).",
        "unique_stacks": "Distinct stacks.",
        "skipped_lines": "Malformed lines not counted.",
        "max_depth": "Deepest stack, in frames.",
        "threads": "Samples per thread.",
        "top_self": "Hottest leaf frames.",
        "top_total": "Inclusive: each sample once per frame.",
        "keywords": "Keyword shares.",
        "categories": "Category shares.",
        "uncovered_native": "Hottest native leaves no keyword matches.",
        "lag": "Whether py-spy kept up (with its log).",
        "findings": "What to change, most important first.",
        "thread_functions": "Per thread (top 16): your code's functions.",
        "step_threads": "Dashboard only: the threads the findings judged (docs/findings.md).",
        "dump_threads": "A dump's threads (the last dump of a whole-job dump's rank).",
        "dump_series": "A whole-job dump's rank: every dump, oldest first.",
    },
    # Stored answers: a dump has only format, total_samples and its threads, and older
    # captures lack later fields. The flamegraph is stored and served apart.
    hints={
        "format": Literal[FORMATS],
        "step_threads": StepThreadsSerializer,
        "dump_threads": list[types.DumpThread],
        "dump_series": list[DumpSeriesItemSerializer],
        "flamegraph": None,
    },
    optional=True,
)
typed(
    Sandwich,
    {
        "frame": "The frame asked for.",
        "samples": "Samples with the frame anywhere (once each).",
        "self_samples": "Samples with it as the leaf.",
        "total_samples": "All samples of the capture (or threads).",
        "percent": "samples of total, 0–100.",
        "self_percent": "self_samples of total, 0–100.",
        "occurrences": "Tree nodes named so.",
        "callers": "Who calls it, inverted and merged.",
        "callees": "What it calls, merged.",
        "approximate": "The stored tree was pruned: a bound.",
        "hidden_samples": "Samples under pruned nodes outside its occurrences "
        "(bounds missed samples).",
        "hidden_self_samples": "All samples under pruned nodes (bounds missed self samples).",
        "suggestions": "Near names when none matches exactly.",
    },
    hints={"suggestions": NotRequired[list[str]]},
)

# --- a capture: the dashboard's answer around the analysis ------------------------------


class AttemptSerializer(s.Serializer):
    attempt = s.IntegerField(help_text="Which attempt failed.")
    at = s.DateTimeField(help_text="When.")
    cause = s.ChoiceField(typing.get_args(Cause), help_text="Failure cause.")
    label = s.CharField(help_text="The cause in words.")
    said = s.CharField(help_text="The command's own last line.")


class RetrySerializer(s.Serializer):
    attempt = s.IntegerField(help_text="The attempt that will run next.")
    of = s.IntegerField(help_text="Attempts in all.")
    cause = s.ChoiceField(typing.get_args(Cause), help_text="Why the last one failed.")
    message = s.CharField(help_text="'retrying, attempt 2 of 4 in 3 s: host unreachable'.")
    due_at = s.DateTimeField(help_text="When the next attempt starts.")


class AnalysisUsageSerializer(s.Serializer):
    time_limit_s = s.FloatField(help_text="The analysis time limit it ran under.")
    memory_mb = s.IntegerField(help_text="The analysis memory limit it ran under.")
    seconds = s.FloatField(required=False, help_text="Seconds it took (when it finished).")
    peak_mb = s.FloatField(required=False, help_text="Peak RSS of its process, MB.")
    stopped = s.BooleanField(required=False, help_text="A limit stopped it (docs/limits.md).")


class PySpySerializer(s.Serializer):
    """What the record script learnt about py-spy and the target."""

    version = s.CharField(allow_null=True, help_text="py-spy's version.")
    python = s.CharField(allow_null=True, help_text="The target's Python version.")
    native_built = s.BooleanField(allow_null=True, help_text="py-spy can unwind native.")


class PythonOnlySerializer(s.Serializer):
    """Why a capture asked with --native holds Python-only stacks."""

    reason = s.ChoiceField(["native_unavailable", "native_failed"], help_text="Dropped or failed.")
    why = s.CharField(required=False, help_text="native_unavailable: why it was dropped.")
    samples = s.IntegerField(required=False, help_text="native_failed: samples py-spy wrote.")
    errors = s.IntegerField(required=False, help_text="native_failed: rounds lost to errors.")
    rounds = s.IntegerField(required=False, help_text="native_failed: rounds expected.")
    log_tail = s.ListField(
        child=s.CharField(), required=False, help_text="native_failed: py-spy's last lines."
    )
    retry_error = s.CharField(
        required=False, help_text="native_failed: why recording without --native failed too."
    )


class WithoutSubprocessesSerializer(s.Serializer):
    """Why a capture asked with --subprocesses holds its process's own stacks only."""

    reason = s.ChoiceField(["pyspy_crashed"], help_text="py-spy crashed with --subprocesses.")
    signal = s.CharField(help_text="The signal py-spy died by, e.g. SIGSEGV.")
    log_tail = s.ListField(child=s.CharField(), help_text="What py-spy said last on stderr.")


class ProgressSerializer(s.Serializer):
    sampling = s.BooleanField(required=False, help_text="py-spy has started sampling.")
    elapsed_s = s.FloatField(required=False, help_text="Seconds sampled so far.")
    duration_s = s.IntegerField(required=False, help_text="Seconds asked.")
    behind_s = s.FloatField(required=False, help_text="py-spy's current drift.")
    expected_samples = s.IntegerField(required=False, help_text="Rounds so far, estimated.")
    sampled_s = s.FloatField(required=False, help_text="Once recorded: the span sampled.")
    covered_s = s.FloatField(required=False, help_text="Of the asked duration, when it exited.")
    pyspy = PySpySerializer(required=False, help_text="py-spy and the target's Python.")
    python_only = PythonOnlySerializer(
        required=False, help_text="--native was dropped or failed: Python-only stacks."
    )
    without_subprocesses = WithoutSubprocessesSerializer(
        required=False,
        help_text="py-spy crashed with --subprocesses: recorded again without, no workers.",
    )
    target_continued = s.BooleanField(
        required=False, help_text="py-spy left the process stopped; it was sent SIGCONT."
    )
    retry = RetrySerializer(required=False, help_text="While a retry waits.")
    analysis = AnalysisUsageSerializer(required=False, help_text="The last analysis's budget.")
    workers = shape_of(rank_workers.WorkerStats)(
        required=False, help_text="A whole-job rank's DataLoader workers, kept apart from it."
    )


class CaptureRowSerializer(s.ModelSerializer):
    """A capture as listed: the model's columns, without the analysis."""

    host = s.CharField(allow_null=True, help_text="The host's name (null for imports).")
    settings = SettingsAnswerSerializer(help_text="py-spy settings asked.")
    attempt_log = AttemptSerializer(many=True, help_text="Each failed attempt.")
    progress = ProgressSerializer(help_text="Live numbers while it runs or waits.")
    raw_pruned = s.BooleanField(help_text="The raw file was pruned (stats stay).")

    class Meta:
        model = Capture
        fields = [
            *("id", "status", "kind", "host", "pid", "run", "settings", "error"),
            *("error_cause", "error_detail", "attempts", "attempt_log", "note", "progress"),
            *("queued_at", "started_at", "finished_at", "raw_pruned"),
        ]
        extra_kwargs = described(
            {
                "id": "The capture's id.",
                "status": "queued → running → parsing → done | failed.",
                "kind": "py-spy record, dump, or an imported file.",
                "pid": "The process sampled.",
                "run": "The run's id, if any.",
                "error": "Why it failed, with the fix, in one line.",
                "error_cause": "Failure cause, a name (docs/troubleshooting.md).",
                "error_detail": "The command's own words (stderr tail).",
                "attempts": "Attempts so far.",
                "queued_at": "When it was asked for.",
                "started_at": "When a worker took it.",
                "finished_at": "When it ended.",
            }
        )


class CaptureSerializer(CaptureRowSerializer):
    stats = StatsSerializer(
        allow_null=True, help_text="The analysis; null until parsed. ?thread= filters it."
    )

    class Meta(CaptureRowSerializer.Meta):
        fields = [*CaptureRowSerializer.Meta.fields, "stats"]


class CaptureCreatedSerializer(s.Serializer):
    id = s.IntegerField(help_text="The capture's id.")
    status = s.ChoiceField(Capture.Status.choices, help_text="Usually queued.")
    error = s.CharField(required=False, help_text="When it failed at once.")
    error_cause = s.CharField(required=False, help_text="Its cause (host_config, …).")


class BusySerializer(s.Serializer):
    detail = s.CharField(help_text="Which capture is already on that process.")
    busy = s.IntegerField(required=False, help_text="Its id (when a capture is busy on it).")
    busy_status = s.ChoiceField(
        Capture.Status.choices, required=False, help_text="Its status (with `busy`)."
    )


class UnsentSerializer(s.Serializer):
    detail = s.CharField(help_text="queue unavailable: the broker, and how to fix it.")
    id = s.IntegerField(help_text="The capture, failed as queue_unavailable.")
    status = s.ChoiceField(Capture.Status.choices, help_text="failed.")


class CancelSerializer(s.Serializer):
    id = s.IntegerField(help_text="The capture's id.")
    status = s.ChoiceField(Capture.Status.choices, help_text="Its status now.")
    cancel_requested = s.BooleanField(help_text="Always true: py-spy gets SIGINT.")


class ImportRequestSerializer(s.Serializer):
    file = s.FileField(help_text="py-spy raw or speedscope JSON, plain or gzip.")
    log = s.FileField(required=False, help_text="py-spy's stdout, for the lag report.")
    run = s.IntegerField(
        required=False,
        min_value=1,
        max_value=ID_MAX,
        help_text="A run's id to file it under (404 if none).",
    )


class ImportedSerializer(s.Serializer):
    id = s.IntegerField(help_text="The capture's id.")
    status = s.ChoiceField(Capture.Status.choices, help_text="parsing: a worker analyses it.")
    error = s.CharField(help_text="Empty unless it failed at once.")


# --- whole-job captures ------------------------------------------------------------------


class GroupProcessSerializer(CaptureRowSerializer):
    role = s.CharField(help_text="The run process's role.")
    verdict = s.ChoiceField(LAG_VERDICTS, allow_null=True, help_text="Its lag verdict.")

    class Meta(CaptureRowSerializer.Meta):
        fields = [*CaptureRowSerializer.Meta.fields, "role", "verdict"]


typed(
    types.StacksVerdict,
    {
        "kind": "stuck: no rank's step thread moved across the dumps; progressing: they "
        "did; unclear: one dump, or too little to tell.",
        "odd": "The ranks that stand apart.",
        "explanation": "The verdict in one sentence.",
        "user_frame": "Where the odd ranks stand (user code).",
        "state": "Their thread state (idle, collective, …).",
    },
    hints={"state": State | None},
)
typed(
    types.StacksClass,
    {
        "ranks": "Ranks whose step thread stands here.",
        "thread": "The step thread's name.",
        "user_frame": "Innermost frame of the user's code.",
        "state": "The thread state of that stack.",
        "frames": "The call path, root first.",
        "moving": "Whether its stacks changed between dumps.",
    },
    hints={"state": State},
)
typed(
    types.StacksRank,
    {
        "name": "The rank.",
        "thread": "Its step thread's name (its tid when unnamed; empty: no thread).",
        "user_frame": "Innermost frame of the user's code.",
        "state": "The thread state of that stack (unknown: no thread).",
        "moving": "Whether its step thread changed between its dumps.",
        "dumps": "How many dumps it gave.",
    },
    hints={"state": State},
)


class StacksFailedSerializer(s.Serializer):
    """A rank without a dump (profiles.jobs.report.stacks_report)."""

    rank = s.CharField(help_text="The rank.")
    cause = s.CharField(help_text="Its capture's failure cause (error_cause).")
    error = s.CharField(help_text="Its capture's error.")


StacksSerializer = typed(
    types.Stacks,
    {
        "verdict": "Which ranks, where, and is anything moving.",
        "classes": "Ranks alike (LLNL STAT's classes).",
        "ranks": "Per rank: its step thread, where it stands, its dumps.",
        "failed": "Ranks with no dump.",
        "captures": "Rank name -> its capture id (not on the live page).",
    },
    hints={
        "failed": list[StacksFailedSerializer],
        "captures": NotRequired[dict[str, int]],
    },
)


typed(
    types.WaitModel,
    {
        "kind": "blocking: collectives block the host (gloo); async: CUDA/NCCL frames seen.",
        "waiting_states": "The states counted as waiting for a peer or the device.",
        "ranks": "The ranks whose step threads show CUDA or NCCL frames.",
        "explanation": "The model in a sentence or two, for the page.",
    },
    hints={"waiting_states": list[State]},
)


class RankPageSerializer(s.Serializer):
    """Where an answer's page of ranks lies among all of them (profiles.jobs.bounds)."""

    offset = s.IntegerField(help_text="The first rank on this page, from 0.")
    limit = s.IntegerField(
        help_text=f"Ranks a page holds (`?limit=`, default {bounds.RANKS_PER_PAGE})."
    )
    total = s.IntegerField(help_text="Ranks there are in all.")
    next = s.IntegerField(
        allow_null=True, help_text="The next page's `?offset=` (null: this is the last)."
    )


def rank_page_parameters(what: str, most: int = bounds.MAX_RANKS) -> list[OpenApiParameter]:
    """`?offset=&limit=`: a page of `what` (profiles.jobs.bounds)."""
    return [
        OpenApiParameter(
            "offset",
            {"type": "integer", "minimum": 0, "maximum": ID_MAX},
            description=f"The first of the {what} to carry, from 0.",
        ),
        OpenApiParameter(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": most},
            description=f"How many {what} to carry: 1-{most}, default "
            f"{bounds.RANKS_PER_PAGE} (a larger job's answer carries a page; ask for the next "
            "with `offset`).",
        ),
    ]


class FailedHostSerializer(s.Serializer):
    """A host whose ranks failed, and why (profiles.jobs.services.failed_hosts)."""

    host = s.CharField(help_text="The host's name.")
    cause = s.CharField(help_text="The failure cause (error_cause) of its ranks.")
    error = s.CharField(help_text="The first of those ranks' error.")
    ranks = s.IntegerField(help_text="How many of its ranks failed so.")


class LateHostSerializer(s.Serializer):
    """A host whose ranks started sampling past the group's instant (a slow ssh, no free
    capture thread; profiles.jobs.services.late_hosts)."""

    host = s.CharField(help_text="The host's name.")
    late_s = s.FloatField(help_text="Seconds past the instant its latest rank started.")
    ranks = s.IntegerField(help_text="How many of its ranks started late.")


class GroupSerializer(s.Serializer):
    id = s.IntegerField(help_text="The whole-job capture's id.")
    kind = s.ChoiceField(
        GROUP_KINDS, help_text="record: sampled for a window; dump: stacks of every rank."
    )
    report_status = s.ChoiceField(
        REPORT_STATUSES,
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
        help_text="Spread of the moments each rank's first kept sample was taken (the "
        "group's instant, or later when it started late), by each host's clock; null until "
        "every process has started.",
    )
    captures = s.IntegerField(help_text="How many processes.")
    failed_hosts = FailedHostSerializer(
        many=True, help_text="Per host and cause, its ranks that failed (most first)."
    )
    late_hosts = LateHostSerializer(
        many=True,
        help_text="Hosts whose ranks started over 0.3 s past the instant, latest first.",
    )
    processes = GroupProcessSerializer(
        many=True,
        help_text="One capture per process: a page of them (`processes_page`), by role.",
    )
    processes_page = RankPageSerializer(help_text="Where `processes` lies among all of them.")
    straggler = StragglerSerializer(
        allow_null=True, help_text="The rank the others wait for (null: none beyond noise)."
    )
    classes = JobClassSerializer(many=True, help_text="Ranks that behave alike.")
    findings = FindingSerializer(many=True, help_text="The job's findings (docs/findings.md).")
    workers = s.DictField(
        child=shape_of(rank_workers.WorkerStats)(),
        help_text="Rank name -> its DataLoader workers (its child processes), never ranks; "
        "for the ranks of `processes`.",
    )
    wait_model = shape_of(types.WaitModel)(
        allow_null=True,
        help_text="What the report counted as waiting for a peer: blocking (gloo) or async "
        "(CUDA/NCCL: collectives and device syncs); null before the report.",
    )
    job_report_reason = s.CharField(
        allow_null=True, help_text="Why there is no verdict yet (ranks still running); null."
    )


class GroupUnsentSerializer(GroupSerializer):
    detail = s.CharField(help_text="queue unavailable: the broker, and how to fix it.")


# --- the whole-job capture page's live numbers (profiles.jobs.selectors.group_page) ---


class LiveRowSerializer(s.Serializer):
    """One process: live while it runs; null where there is no number."""

    id = s.IntegerField(help_text="Its capture's id.")
    url = s.CharField(help_text="Its capture's page.")
    label = s.CharField(help_text="host:pid and role.")
    role = s.CharField(help_text="The run process's role (empty: none).")
    status = s.ChoiceField(Capture.Status.choices, help_text="Its capture's status.")
    final = s.BooleanField(help_text="It has ended.")
    elapsed_s = s.FloatField(allow_null=True, help_text="Seconds sampled (a dump: its wall time).")
    duration_s = s.IntegerField(allow_null=True, help_text="Seconds asked (null for a dump).")
    behind_s = s.FloatField(allow_null=True, help_text="py-spy's drift (live, then the largest).")
    samples = s.IntegerField(allow_null=True, help_text="Samples, once analysed.")
    samples_estimated = s.IntegerField(allow_null=True, help_text="Rounds so far, while running.")
    attaching = s.BooleanField(help_text="Claimed, but py-spy has not started sampling yet.")
    rounds_estimated = s.IntegerField(
        allow_null=True, help_text="py-spy's rounds, once ended (samples count per thread)."
    )
    verdict = s.ChoiceField(LAG_VERDICTS, allow_null=True, help_text="Its lag verdict.")
    states = s.DictField(
        child=s.FloatField(), help_text="Percent per thread state of its step threads."
    )
    has_samples = s.BooleanField(help_text="Analysed, with samples.")
    error = s.CharField(help_text="Why it failed (empty unless failed).")
    error_cause = s.CharField(help_text="Its failure cause (empty unless failed).")
    note = s.CharField(help_text="Non-fatal remarks.")
    python_only = s.BooleanField(help_text="--native was dropped or failed.")
    workers = s.IntegerField(
        allow_null=True, help_text="Its DataLoader workers at once (null: none sampled)."
    )


class LivePageWorkersSerializer(s.Serializer):
    """A rank's DataLoader workers on the page (the API's `workers` has their PIDs)."""

    count = s.IntegerField(help_text="How many ran at once.")
    processes_seen = s.IntegerField(help_text="How many were sampled (respawns too).")
    dataloader = s.BooleanField(help_text="Every one ran torch's DataLoader worker loop.")
    samples = s.IntegerField(help_text="Their main threads' samples.")
    sampled_percent = s.FloatField(
        allow_null=True, help_text="How much of their time the samples cover."
    )
    outside_percent = s.FloatField(help_text="Share of them outside your code.")
    functions = shape_of(rank_workers.WorkerFunction)(
        many=True, help_text="Your functions they were in, top 5."
    )


class LiveRankSerializer(s.Serializer):
    """A rank of the stored job report, as the page shows it."""

    name = s.CharField(help_text="The rank.")
    step_threads = s.ListField(child=s.CharField(), help_text="Its step threads' names.")
    detected_by = s.CharField(help_text="How they were found (rules.step_threads, peers).")
    samples = s.IntegerField(help_text="Their samples.")
    states = shape_of(types.StateStat)(
        many=True, help_text="States with samples, each with its top call site."
    )
    url = s.CharField(allow_null=True, help_text="Its capture's page.")
    idle_included = s.BooleanField(allow_null=True, help_text="Sampled with --idle.")
    rounds = s.IntegerField(allow_null=True, help_text="py-spy's sampling rounds.")
    workers = LivePageWorkersSerializer(
        allow_null=True, help_text="Its DataLoader workers (null: none sampled)."
    )


class LivePendingSerializer(s.Serializer):
    """No report yet, and why."""

    ready = s.BooleanField(help_text="Always false.")
    ended = s.BooleanField(help_text="Every rank has ended.")
    reason = s.CharField(help_text="Why there is no report yet.")
    failed = s.BooleanField(help_text="The report could not be computed.")


class LiveReportSerializer(s.Serializer):
    """A whole-job record's stored report."""

    ready = s.BooleanField(help_text="Always true.")
    findings = FindingSerializer(many=True, help_text="The job's findings.")
    straggler = StragglerSerializer(allow_null=True, help_text="The rank the others wait for.")
    classes = JobClassSerializer(many=True, help_text="Ranks that behave alike.")
    ranks = LiveRankSerializer(
        many=True, help_text="The step-thread states of the ranks of `rows` (a page)."
    )
    ranks_total = s.IntegerField(help_text="Ranks with samples in the report, in all.")
    without_samples = s.ListField(
        child=s.CharField(),
        help_text=f"Ranks with no samples (the first {bounds.RANKS_PER_PAGE}).",
    )
    without_samples_total = s.IntegerField(help_text="Ranks with no samples, in all.")
    urls = s.DictField(
        child=s.CharField(),
        help_text="Rank name -> its capture's page, for the ranks this answer names.",
    )
    same_window = s.BooleanField(help_text="Every py-spy began within a second of the others.")
    start_skew_s = s.FloatField(allow_null=True, help_text="Spread of the sampling starts.")


class LiveStacksSerializer(s.Serializer):
    """A whole-job dump's stored verdict and classes."""

    ready = s.BooleanField(help_text="Always true.")
    kind = s.ChoiceField(DUMP_KIND, help_text="dump.")
    stacks = StacksSerializer(help_text="The verdict, classes, ranks and failed ranks.")
    urls = s.DictField(child=s.CharField(), help_text="Rank name -> its capture's page.")
    repeat = s.IntegerField(help_text="Dumps of each rank.")
    interval = s.FloatField(help_text="Seconds between dumps.")


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="LiveReportOrReason",
        serializers=[LivePendingSerializer, LiveReportSerializer, LiveStacksSerializer],
        resource_type_field_name=None,
    )
)
class LiveReportField(s.JSONField):
    """Not ready (the reason), a record's report, or a dump's stacks."""


class SkippedSerializer(s.Serializer):
    label = s.CharField(help_text="The process.")
    checked_at = s.DateTimeField(allow_null=True, help_text="When it was found exited.")


typed(GpuPoint, {"t": "Seconds since the first tick.", "util": "Utilisation, percent.",
                 "mem_used_mib": "Memory used, MiB.", "mem_total_mib": "Memory, MiB."})  # fmt: skip
typed(GpuSeries, {"index": "The GPU's index.", "points": "Its samples, in time order."})
typed(
    GpuTimeline,
    {
        "interval_ms": "nvidia-smi's interval.",
        "gpus": "One series per GPU.",
        "skipped_lines": "Lines nvidia-smi wrote that could not be read.",
    },
)


class LiveGpuSerializer(s.Serializer):
    id = s.IntegerField(help_text="The capture's id.")
    label = s.CharField(help_text="host:pid and role.")
    gpu = shape_of(GpuTimeline)(allow_null=True, help_text="The host's GPUs (null: none).")


class LiveFlameSerializer(s.Serializer):
    """A process the page's merged flamegraph offers."""

    id = s.IntegerField(help_text="Its capture's id (`?capture=` of the flamegraph).")
    label = s.CharField(help_text="host:pid and role.")
    url = s.CharField(help_text="Its capture's page.")
    alike = s.IntegerField(
        allow_null=True,
        help_text="The ranks of its class it stands for (a large job: one rank of each "
        "class); null: itself only.",
    )


class LiveSerializer(s.Serializer):
    group = s.IntegerField(help_text="The whole-job capture's id.")
    kind = s.ChoiceField(GROUP_KINDS, help_text="record, or dump (Dump all ranks).")
    run = s.IntegerField(help_text="The run's id.")
    status = s.ChoiceField(GROUP_STATUSES, help_text="Across its processes.")
    start_skew_s = s.FloatField(
        allow_null=True, help_text="Spread of the sampling starts; null until all started."
    )
    final = s.BooleanField(help_text="Every process has ended: stop polling.")
    states = s.ListField(
        child=s.ChoiceField(STATES), help_text="State columns shown, in STATES order."
    )
    rows = LiveRowSerializer(many=True, help_text="One per process: a page of them, by role.")
    rows_page = RankPageSerializer(help_text="Where `rows` lies among all the processes.")
    counts = s.DictField(child=s.IntegerField(), help_text="Processes per status, in all.")
    flame = LiveFlameSerializer(
        many=True,
        help_text=f"The processes with samples the merged flamegraph offers: every one, or "
        f"past {bounds.FLAMEGRAPH_PROCESSES} one rank of each class.",
    )
    report = LiveReportField(
        help_text="The stored whole-job report once every process ended, else the reason."
    )
    skipped = SkippedSerializer(many=True, help_text="Processes skipped (exited).")
    processes = LiveGpuSerializer(
        many=True, help_text="GPU timelines of the processes of `rows`, once final."
    )


# --- compare two captures ---------------------------------------------------------------


class SummarySerializer(s.Serializer):
    id = s.IntegerField(help_text="The capture's id.")
    url = s.CharField(help_text="Its page.")
    target = s.CharField(help_text="host:pid and role.")
    run = s.CharField(allow_null=True, help_text="The run's name.")
    at = s.DateTimeField(help_text="When it finished (or was asked for).")
    status = s.ChoiceField(Capture.Status.choices, help_text="Its status.")
    total_samples = s.IntegerField(help_text="Its samples.")
    lag_verdict = s.ChoiceField(LAG_VERDICTS, allow_null=True, help_text="Its lag verdict.")


VERDICT = "`real change` (the interval excludes 0), `within noise` or `not measured`."
typed(
    comparing.ShareRow,
    {
        "name": "The state, category or keyword.",
        "category": "A keyword's category.",
        "before": "Its share before (null: not measured).",
        "after": "Its share after (null: not measured).",
        "delta_points": "After minus before, in points.",
        "delta_low": "95% Newcombe interval of the change, low.",
        "delta_high": "95% Newcombe interval of the change, high.",
        "verdict": VERDICT,
    },
)
typed(
    comparing.FrameRow,
    {
        "frame": "The frame.",
        "before_percent": "Its share before (null: not in that top list).",
        "after_percent": "Its share after (null: not in that top list).",
        "before_below": "Not listed before: the smallest share that list shows.",
        "after_below": "Not listed after: the smallest share that list shows.",
        "delta_points": "After minus before, in points (a bound unless exact).",
        "delta_bound": "Whether the true change is exactly, at most or at least that.",
        "verdict": VERDICT,
    },
)
typed(
    comparing.LagNote,
    {
        "side": "Which capture.",
        "verdict": "Its lag verdict.",
        "max_behind_s": "py-spy's largest drift.",
        "recommended_rate": "A rate that would have kept up.",
    },
    hints={"verdict": LagVerdict},
)
ComparisonSerializer = typed(
    comparing.Comparison,
    {
        "before": "The earlier capture.",
        "after": "The later capture.",
        "threads": "The thread filter asked.",
        "threads_applied": "Both captures could be filtered so.",
        "before_samples": "Samples before.",
        "after_samples": "Samples after.",
        "states": "Per thread state with samples on either side: the same shape and maths "
        "as `categories`; a side analysed before states existed is not measured.",
        "categories": "Per category: shares with 95% Wilson intervals, the change with a "
        "Newcombe interval, and the verdict (real change or within noise).",
        "keywords": "The same per keyword.",
        "top_self": "Leaf frames with their deltas.",
        "top_total": "Inclusive frames, deltas.",
        "lag_warnings": "Lag beside the verdicts.",
        "method": "How intervals and verdicts are computed, in words, by topic.",
    },
    hints={
        "before": SummarySerializer,
        "after": SummarySerializer,
        "threads": list[str],
        "threads_applied": bool,
    },
)

# --- the decorators ---------------------------------------------------------------------

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
        list_description="Newest first, without their analysis (`GET /api/captures/{id}/` has it).",
        request=request_serializer,
        created=CaptureCreatedSerializer,
        summary="Capture a process",
        responses={**busy_or_unsent(UnsentSerializer), **errors(404)},
        description="`{host, pid}` or `{process}` (a run process's id), the kind and "
        f"py-spy settings ({PROCESS_SETTINGS}). 404 when the host, process or run it "
        "names does not exist; 409 when a capture is already on that host and PID; 503 "
        "when the broker cannot be reached.",
    )


capture_detail = extend_schema(
    summary="One capture with its analysis",
    description="Its status, failure cause and live progress, and `stats` (the analysis "
    "CLI's JSON without the flamegraph) once parsed; `?thread=` sums the stored per-thread "
    "tables of those threads instead.",
    parameters=[THREAD],
    responses={200: CaptureSerializer, **errors(*READ_ERRORS)},
    tags=CAPTURES,
)

capture_flamegraph = extend_schema(
    summary="Its flamegraph (d3-flame-graph JSON)",
    description="The stored tree, pruned to `max_nodes` (8192 by default) with the "
    "pruned mass as explicit nodes; `?thread=` keeps those threads' subtrees. 404 when the "
    "capture has no flamegraph (not parsed yet, a dump, or failed).",
    parameters=[
        OpenApiParameter(
            "max_nodes",
            {"type": "integer", "minimum": 10, "maximum": 50000},
            description="Prune to this many nodes (10–50000; 8192).",
        ),
        OpenApiParameter(
            "from",
            {"type": "number", "minimum": 0, "maximum": 86400},
            description="The flamegraph of a window from here, seconds since the first "
            "sample (a capture that keeps time; 409 otherwise); without `to`, to the end.",
        ),
        OpenApiParameter(
            "to",
            {"type": "number", "minimum": 0, "maximum": 86400},
            description="The window's end, excluded (without `from`: from the start). 400 "
            f"when the window is shorter than {MIN_WINDOW_S:g} s or ends before it starts.",
        ),
        THREAD,
    ],
    responses={
        200: OpenApiResponse(FlameNodeSerializer, "The tree."),
        409: OpenApiResponse(
            DetailSerializer, "A window (`from`, `to`) of a capture that keeps no time."
        ),
        **errors(400, *READ_ERRORS),
    },
    tags=CAPTURES,
)

capture_sandwich = extend_schema(
    summary="One frame's callers and callees",
    description="Every occurrence of the frame in the stored tree merged, once per "
    "sample: who calls it (inverted) and what it calls. A pruned tree gives bounds "
    "(`approximate`); no exact match gives `suggestions`.",
    parameters=[
        OpenApiParameter(
            "frame",
            {"type": "string", "pattern": NOT_BLANK},
            required=True,
            description="The frame's full name.",
        ),
        OpenApiParameter(
            "max_nodes",
            {"type": "integer", "minimum": 10, "maximum": 20000},
            description="Prune each side (10–20000; 2000).",
        ),
        THREAD,
    ],
    responses={200: shape_of(Sandwich), **errors(*WRITE_ERRORS)},
    tags=CAPTURES,
)

capture_cancel = extend_schema(
    summary="Stop a capture (the samples so far are kept)",
    description="py-spy gets SIGINT and writes what it has sampled; a queued capture is "
    "cancelled at once. 409 when the capture has already ended.",
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
        "409 when one is already being captured, or the run has no process or more hosts "
        "than the capture workers' threads.",
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
    description="Its processes' captures, a page at a time (`processes_page`), and once "
    "every rank has ended the stored job report: straggler, classes of ranks and findings "
    "(a dump: `stacks`). `report_status` tells an empty report from one not computed yet.",
    parameters=rank_page_parameters("processes"),
    responses={200: GroupSerializer, **errors(400, *READ_ERRORS)},
    tags=GROUPS,
)

group_flamegraph = extend_schema(
    summary="Its merged flamegraph",
    description="The ranks' stored trees merged under one root, each rank a child; "
    "`?capture=` keeps only those captures. A job with more than "
    f"{bounds.FLAMEGRAPH_PROCESSES} processes with samples gives, without `?capture=`, one "
    "rank of each class of its report (the straggler for its class), each under a node "
    "naming its class and how many ranks it stands for. At most "
    f"{bounds.FLAMEGRAPH_PROCESSES} nodes; the tree is pruned to 8192.",
    parameters=[
        OpenApiParameter(
            "capture",
            {
                "type": "array",
                "items": ID,
                "maxItems": bounds.FLAMEGRAPH_PROCESSES,
            },
            explode=True,
            description=f"Only these captures' ids (at most {bounds.FLAMEGRAPH_PROCESSES}, "
            "`?capture=1&capture=2`).",
        )
    ],
    responses={
        200: OpenApiResponse(FlameNodeSerializer, "The tree."),
        **errors(400, *READ_ERRORS),
    },
    tags=GROUPS,
)

group_live = extend_schema(
    summary="The whole-job capture page's live numbers",
    description="What the whole-job capture page polls every second until `final`: every "
    "process counted, a page of them in `rows` with their ranks' report.",
    parameters=rank_page_parameters("processes"),
    responses={200: LiveSerializer, **errors(400, *READ_ERRORS)},
    tags=GROUPS,
)

compare = extend_schema(
    summary="Compare two captures",
    description="The earlier capture (by queue time) is before, the later after, whatever "
    "the order of `a` and `b`: per state, category, keyword and top frame each share with "
    "its 95% interval, the change with its interval and a verdict. 400 when either has no "
    "samples.",
    parameters=[
        OpenApiParameter("a", ID, required=True, description="A capture's id."),
        OpenApiParameter("b", ID, required=True, description="The other's (order is by time)."),
        THREAD,
    ],
    responses={200: ComparisonSerializer, **errors(*WRITE_ERRORS, 409)},
    tags=COMPARE,
)
