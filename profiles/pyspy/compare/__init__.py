"""compare: captures against captures. Two stats (or a baseline and a series) in;
what changed, with intervals and a verdict, out.

- `captures`: two captures' shares with intervals, and differential trees.
- `jobs`: two whole-job captures of one job, class by class and rank by rank.
- `comparable`: a capture's step-thread view, and whether two captures' settings allow
  comparing shares at all.
- `regression`: a watch's judgement (did a capture move from its baseline) and where a
  share shifted in a series.
"""

from .captures import (
    NOT_MEASURED,
    REAL_CHANGE,
    Comparison,
    FrameRow,
    LagNote,
    ShareRow,
    ShareSide,
    Verdict,
    compare_stats,
    diff_flamegraph,
    lag_warnings,
    share_side,
)
from .comparable import SHARE_SETTINGS, pair_views, settings_mismatch, step_view
from .jobs import (
    ClassChange,
    FindingChange,
    FunctionChange,
    RoleChange,
    StateChange,
    compare_jobs,
    compared_classes,
    rank_functions,
)
from .regression import (
    CHANGED,
    TOO_FEW,
    UNCHANGED,
    Judgement,
    JudgeOptions,
    Kind,
    Row,
    judge,
    returned,
    row_key,
    row_label,
    tracked_counts,
)

__all__ = [
    "CHANGED",
    "NOT_MEASURED",
    "REAL_CHANGE",
    "SHARE_SETTINGS",
    "TOO_FEW",
    "UNCHANGED",
    "ClassChange",
    "Comparison",
    "FindingChange",
    "FrameRow",
    "FunctionChange",
    "JudgeOptions",
    "Judgement",
    "Kind",
    "LagNote",
    "RoleChange",
    "Row",
    "ShareRow",
    "ShareSide",
    "StateChange",
    "Verdict",
    "compare_jobs",
    "compare_stats",
    "compared_classes",
    "diff_flamegraph",
    "judge",
    "lag_warnings",
    "pair_views",
    "rank_functions",
    "returned",
    "row_key",
    "row_label",
    "settings_mismatch",
    "share_side",
    "step_view",
    "tracked_counts",
]
