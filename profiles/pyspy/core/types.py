"""JSON shapes the engine hands to the dashboard, the API and the tests.

One module so d3, the Django views and the golden files share one contract.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class FlameNode(TypedDict):
    """A flamegraph node (d3-flame-graph's shape).

    `value` is inclusive; children never sum past it. Thread nodes keep py-spy's
    frame name (`thread (5066): target-2`) so views can filter by thread later.
    A node standing for pruned frames is named `[pruned: N frames]` and carries
    `pruned_frames` = N (the number of frames it replaces).
    """

    name: str
    value: int
    children: list[FlameNode]
    pruned_frames: NotRequired[int]
    path: NotRequired[str]
    """The file the capture recorded for a frame whose name py-spy shortens by default
    (`/usr/lib/python3.11/threading.py` for `Condition.wait (threading.py:320)`);
    absent where the name holds it already."""


class FrameStat(TypedDict):
    frame: str
    samples: int
    percent: float


# --- thread states (rules/states.py, count/activity.py) ---


class FrameworkFrame(TypedDict):
    """A training framework's frame that marks a step phase (framework.py): `frame` as
    the records name it ("" when only a phase matched), its `function`, the `framework`
    and the `phase` words; `user_inside` when the framework calls the user's frame (a
    callback, a dataset) rather than the user's frame calling the framework."""

    frame: str
    """The framework's step frame, `function (package/file.py:line)`; "" when only a
    phase row matched (a native frame such as DDP's reducer)."""
    function: str
    """Its function without the location (`Trainer.training_step`); "" with `frame`."""
    framework: str
    """The framework that owns the step (transformers, accelerate, lightning,
    deepspeed, torch, or a user row's)."""
    phase: str
    """The words of the innermost matching row (`DDP backward`, `DataLoader fetch`)."""
    user_inside: bool
    """True when the framework calls the user's frame (a callback, a dataset), false when
    the user's frame calls the framework."""


class FrameworkCaller(FrameworkFrame):
    """A state's samples under one framework frame and one user caller."""

    user_frame: str
    """The nearest frame of the user's own code on those samples, or `(no user frame)`."""
    samples: int
    """Samples under this framework frame and user frame, each counted once."""
    percent: float
    """Share of the list's scope (capture, thread or step threads), 0–100."""


class StateStat(TypedDict):
    """One state of state_rules.STATES: its samples and where they come from in user code.

    `percent` is of the samples of the list's scope (the capture, or one thread);
    `user_callers`: the nearest user-code frame at or above the frame where the state
    began, once per sample, percent of the same scope, top 10, ties by frame;
    "(no user frame)" when there is none.
    """

    state: str
    samples: int
    percent: float
    user_callers: list[FrameStat]
    framework_callers: NotRequired[list[FrameworkCaller]]
    """Where a framework frame is on the stacks: the samples per framework frame and user
    caller, top 10 (framework.py); absent when none is."""


class ThreadStat(TypedDict):
    """`states` add up to `samples`; `active_percent` is samples over the sampling rounds
    (None when the rounds are unknown; activity.py)."""

    name: str
    tid: int | str
    pid: int | None
    samples: int
    percent: float
    states: list[StateStat]
    active_percent: float | None


class KeywordStat(TypedDict):
    """`python_callers`: where the matching samples come from in Python code.

    For each matching sample, the nearest Python frame above the outermost
    matching frame (or "(no Python frame)"), once per sample; percent of all
    samples; top 10 by samples, ties by frame.
    """

    keyword: str
    category: str
    samples: int
    percent: float
    python_callers: list[FrameStat]
    user_callers: list[FrameStat]
    """Like python_callers, but the nearest user-code frame (rules/user_code.py)."""


class CategoryStat(TypedDict):
    """`python_callers` as in KeywordStat, for the category's outermost match."""

    category: str
    samples: int
    percent: float
    python_callers: list[FrameStat]
    user_callers: list[FrameStat]


class LagPoint(TypedDict):
    t_index: int
    approx_s: float
    behind_s: float


class LagReport(TypedDict):
    requested_rate: int | None
    requested_duration_s: int | None
    max_behind_s: float
    warnings: int
    samples_reported: int | None
    errors_reported: int | None
    verdict: Literal["ok", "degraded", "unreliable"]
    recommended_rate: int | None
    achieved_fraction: float | None
    effective_rate: float | None
    elapsed_s_estimate: float | None
    stop_reason: str | None
    series: list[LagPoint]
    explanation: str
    error: str | None
    """py-spy's `Error: ...` text when the log holds one, else None."""


class Stats(TypedDict):
    format: Literal["raw", "speedscope"]
    total_samples: int
    unique_stacks: int
    skipped_lines: int
    max_depth: int
    threads: list[ThreadStat]
    top_self: list[FrameStat]
    top_total: list[FrameStat]
    keywords: list[KeywordStat]
    categories: list[CategoryStat]
    uncovered_native: list[FrameStat]
    states: list[StateStat]
    """Every state of state_rules.STATES in order, zeros included; samples add up to total."""
    idle_included: bool | None
    """Whether samples of blocked threads are present (py-spy --idle); None: unknown."""
    rounds: int | None
    """The sampling rounds active_percent is measured against; None: unknown."""
    thread_functions: NotRequired[list[ThreadFunctions]]
    findings: NotRequired[list[Finding]]
    flamegraph: NotRequired[FlameNode]
    lag: NotRequired[LagReport | None]
    time: NotRequired[TimeInfo]
    """Whether the capture keeps time (a timeline, windows, periodic stalls) and its clock;
    set by the dashboard's analysis (profiles.captures.analysis), not by `analyze`."""


class ScopeEffects(TypedDict):
    """Design effects of one scope's shares (timed/design_effects.py; 1.0: independent samples)."""

    samples: int
    blocks: int
    """Time blocks measured: the intervals' and tests' degrees of freedom are one fewer."""
    states: dict[str, float]
    functions: dict[str, float]
    largest: float
    """The largest measured: what a share not measured here takes (a state not measured
    takes the largest state's)."""


class DesignEffects(TypedDict):
    """How many samples count as one independent draw, per share (timed/design_effects.py)."""

    method: str
    block_s: float
    blocks: int
    step: ScopeEffects
    all: ScopeEffects


class TimeInfo(TypedDict):
    """A capture's time: `available`, else `reason`; when available the clock (host
    epoch seconds of the first sample and of py-spy's stop), the requested rate, the
    rounds, the default timeline bucket and the threads that cannot be placed."""

    available: bool
    reason: str | None
    start: NotRequired[float]
    end: NotRequired[float]
    rate: NotRequired[float]
    rounds: NotRequired[int]
    bucket_s: NotRequired[float]
    untimed: NotRequired[list[str]]
    design_effect: NotRequired[DesignEffects | None]


class DumpLocal(TypedDict):
    name: str
    value: str
    arg: bool


class DumpFrame(TypedDict):
    name: str
    location: str
    """As py-spy names it by default (`torch/nn/modules/module.py:1751`, `libc.so.6`)."""
    native: bool
    locals: NotRequired[list[DumpLocal]]
    path: NotRequired[str]
    """The full file the dump gave, where `location` shows less of it."""


class DumpThread(TypedDict):
    """One thread of `py-spy dump`: frames innermost first, as py-spy prints them.

    `status` is what py-spy printed in brackets ("idle", "active", "active+gil",
    "gil" or "" when it printed nothing); the booleans are None when unknown.
    """

    pid: int | None
    tid: int | str
    name: str
    status: str
    active: bool | None
    idle: bool | None
    gil: bool | None
    frames: list[DumpFrame]


# --- whole-job report and findings (count/functions.py, rules/findings.py, job/report.py) ---


class FunctionStat(TypedDict):
    """A user function (`name (file.py)`) on one thread: its samples, each sample once,
    and `frame`, its line seen outermost in most samples (a flamegraph frame)."""

    function: str
    frame: str
    samples: int


class ThreadFunctions(TypedDict):
    thread: str
    tid: int | str
    samples: int
    functions: list[FunctionStat]


class Finding(TypedDict):
    """One finding (findings.py): `value` and `interval` (95%, Wilson) in the rule's unit,
    percent of the step threads' samples for the share rules; reported only when the
    whole interval is past `threshold`. `frames` are flamegraph frames to open."""

    rule: str
    severity: Literal["high", "medium", "info"]
    title: str
    value: float
    interval: list[float]
    threshold: float
    frames: list[str]
    user_callers: list[FrameStat]
    advice: str
    ranks: NotRequired[list[str]]
    framework_callers: NotRequired[list[FrameworkCaller]]
    """The framework frames the rule's samples stand in, when any (framework.py)."""


class Explanation(TypedDict):
    """What a rank does more than the others: a user function (`function`) or a state at
    a user call site (`state`), in percent of step-thread samples; `delta` in points,
    `interval` its 95% Newcombe interval (whole above 0)."""

    frame: str
    percent: float
    others_percent: float
    delta: float
    interval: list[float]
    function: NotRequired[str]
    state: NotRequired[str]
    framework_frame: NotRequired[FrameworkFrame]
    """The framework frame most of these samples stand in, when any (framework.py)."""


class Straggler(TypedDict):
    """`wait_percent`: its step threads' share in the wait model's waiting states (in
    collectives; with async collectives also at device syncs; without idle samples, or
    blocked, of the sampling rounds); `others_wait_percent` the others'."""

    name: str
    wait_percent: float
    others_wait_percent: float
    explanation: list[Explanation]
    stuck: NotRequired[bool]
    """True when the job is stuck (the `stuck` finding): this rank is where it hangs, not
    a slow rank with an excess to remove from its step."""
    group: NotRequired[str]
    """Its place in the job's parallel layout (`pipeline stage 3 of data-parallel replica
    7`), when the ranks registered one (layout.py); absent otherwise."""


class JobThread(TypedDict):
    """A thread of a rank as the job report lists it: ThreadStat without `pid`."""

    name: str
    tid: int | str
    samples: int
    percent: float
    states: list[StateStat]
    active_percent: float | None


class JobRank(TypedDict):
    """One rank: its step threads' states added up (`states`, percent of `samples`) and
    every thread as the capture's stats list it (with `states`, `active_percent`).
    `detected_by` says how its step threads were found (rules.step_threads), or
    "peers": by the name of the other ranks' step threads (job/report.py)."""

    name: str
    step_threads: list[str]
    detected_by: str
    samples: int
    states: list[StateStat]
    threads: list[JobThread]
    design_effect: NotRequired[ScopeEffects]
    """Its step threads' design effects, when its capture keeps time (timed/design_effects.py)."""


class JobClass(TypedDict):
    ranks: list[str]
    label: str
    states: list[dict[str, float | str]]
    distinctive: Explanation | None
    framework_frame: NotRequired[FrameworkFrame]
    """The framework frame of the class's main state, when any (framework.py)."""
    group: NotRequired[str]
    """The parallel group its ranks share (`all of pipeline stage 3`), when the ranks
    registered their layout and share a coordinate (layout.py); absent otherwise."""


class JobReport(TypedDict):
    ranks: list[JobRank]
    straggler: Straggler | None
    classes: list[JobClass]
    findings: list[Finding]
    wait_model: WaitModel


# --- whole-job dump (owned by job/dump_verdict.py) ---


class StacksVerdict(TypedDict):
    """Is the job stuck, and where: `odd` the ranks that stand apart, `user_frame` and
    `state` where they stand (where the biggest class stands when none does), and one
    sentence for the engineer who was paged."""

    kind: Literal["stuck", "progressing", "unclear"]
    odd: list[str]
    explanation: str
    user_frame: str | None
    state: str | None
    framework_frame: NotRequired[FrameworkFrame | None]
    """The training framework's frame that marks the step phase (framework.py), or None."""


class StacksClass(TypedDict):
    """Ranks whose step thread stands at the same call path in its last dump. `frames`
    root→leaf as the record formats write them (`name (file:line)`), unsymbolised native
    addresses left out; `moving`: some rank's step thread changed between its dumps."""

    ranks: list[str]
    thread: str
    user_frame: str | None
    state: str
    framework_frame: NotRequired[FrameworkFrame | None]
    """The training framework's frame that marks the step phase (framework.py), or None."""
    frames: list[str]
    moving: bool
    group: NotRequired[str]
    """The parallel group its ranks share (`all of pipeline stage 3`), when the ranks
    registered their layout and share a coordinate (layout.py); absent otherwise."""


class StacksRank(TypedDict):
    """One rank's step thread (`thread`: its name, or its tid when unnamed; "" when the
    dump had no thread) in its last dump, and how many dumps it gave."""

    name: str
    thread: str
    user_frame: str | None
    state: str
    framework_frame: NotRequired[FrameworkFrame | None]
    """The training framework's frame that marks the step phase (framework.py), or None."""
    moving: bool
    dumps: int


class Stacks(TypedDict):
    """A whole-job dump's verdict, classes (biggest first) and ranks (natural order)."""

    verdict: StacksVerdict
    classes: list[StacksClass]
    ranks: list[StacksRank]


# --- time (owned by timeline.py, window.py, timed/periodic_stalls.py; the track in
# formats/time_track.py) ---


class TimelineThread(TypedDict):
    """One thread sampled in every round: per bucket its dominant state (None: no sample)
    and, for each state it has, its share of the bucket's samples (0 to 1)."""

    name: str
    tid: int | str
    dominant: list[str | None]
    states: dict[str, list[float]]


class UntimedThread(TypedDict):
    """A thread sampled in fewer rounds than the capture (born or ended during it): its
    samples have no times, so it is not on the timeline."""

    name: str
    tid: int | str
    samples: int
    reason: str


class Timeline(TypedDict):
    """`start`: host epoch seconds where bucket 0 starts (the first sample, unless aligned
    on another origin); bucket i covers [start + i * bucket_s, start + (i + 1) * bucket_s)."""

    start: float
    bucket_s: float
    threads: list[TimelineThread]
    untimed: NotRequired[list[UntimedThread]]


class AlignedRank(TypedDict):
    """A rank of a whole-job timeline; `offset_s` was added to its host's clock."""

    name: str
    offset_s: float
    threads: list[TimelineThread]
    untimed: list[UntimedThread]


class AlignedTimeline(TypedDict):
    """Several ranks on one clock: `start` on the reference clock, the same buckets for all."""

    start: float
    bucket_s: float
    ranks: list[AlignedRank]


class PeriodicFinding(Finding):
    """A `periodic_stall` finding (timed/periodic_stalls.py): every `period_s` seconds, `duration_s`
    seconds in `function` (a user function, or None) or `state`, on `thread`; `value` the
    percent of the thread's time in the stalls, `interval` its 95% t-interval over the
    bursts; `bursts` each burst's [start, end] in seconds since the first sample."""

    period_s: float
    duration_s: float
    state: str
    function: str | None
    thread: str
    bursts: list[list[float]]
    regularity_cv: float


# --- the whole job's wait model (owned by straggler.py) ---


class WaitModel(TypedDict):
    """What the job report counted as a rank waiting for its peers (straggler.py).

    `kind` "blocking": collectives block the host (gloo, no GPU), `waiting_states`
    ["collective"]; "async": some rank shows CUDA or NCCL frames (`ranks`, natural
    order), and an NCCL collective only enqueues work, so a wait for a slow peer
    surfaces at the next device sync: ["collective", "gpu_sync", "host_sync"].
    `explanation` says so in one or two sentences for the page.
    """

    kind: Literal["blocking", "async"]
    waiting_states: list[str]
    ranks: list[str]
    explanation: str


class WindowThread(TypedDict):
    """A placed thread in a window (or the rest of the capture): its samples there and,
    for each state it has there, how many of them."""

    name: str
    tid: int | str
    samples: int
    states: dict[str, int]
