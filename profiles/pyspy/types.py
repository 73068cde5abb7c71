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


class ThreadStat(TypedDict):
    name: str
    tid: int | str
    pid: int | None
    samples: int
    percent: float


class FrameStat(TypedDict):
    frame: str
    samples: int
    percent: float


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


class CategoryStat(TypedDict):
    """`python_callers` as in KeywordStat, for the category's outermost match."""

    category: str
    samples: int
    percent: float
    python_callers: list[FrameStat]


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
    flamegraph: NotRequired[FlameNode]
    lag: NotRequired[LagReport | None]


class DumpLocal(TypedDict):
    name: str
    value: str
    arg: bool


class DumpFrame(TypedDict):
    name: str
    location: str
    native: bool
    locals: NotRequired[list[DumpLocal]]


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
