"""flamedeck's analysis engine: py-spy output in, dashboard numbers out.

Input formats (detected from content; gzip and UTF-16/UTF-8 BOMs are accepted):
- py-spy `record --format raw`: collapsed stacks, one `root;...;leaf COUNT` line
  per unique stack, unordered; with `--threads` the first frame is
  `thread (TID): NAME` (`thread (TID)` when unnamed), with `--subprocesses`
  `process PID:"CMDLINE"` frames come first (nested for grandchildren; a
  command line may span lines). `--idle`, `--native`, `--nolineno` only change
  which frames appear and how they read.
- py-spy `record --format speedscope`: JSON, one "sampled" profile per thread
  named `Thread TID "NAME"`; each sample is one sample.
- py-spy `dump` text (with or without `--native`, `--locals`) and `dump --json`:
  per-thread stacks at one instant, for the dump view (`parse_dump`).
- py-spy's stdout log, for the lag analysis (`analyze_lag`).
Keywords are substrings, `=name`, `re:regex` or `X under Y` (keywords.py); each
keyword and category reports its `python_callers` (matching.py) and `user_callers`.
Every sample also gets one thread state (states.py, rules in state_rules.py) and
each thread an `active_percent` over py-spy's sampling rounds (activity.py).
Findings (findings.py) say what to change; job.py reports a whole job from one stats
per rank: the straggler, classes of ranks and the job's findings; stacks.py reads a
whole-job dump (each rank's successive `py-spy dump`s): where every rank stands, the
classes of ranks at one call path, and whether the job is stuck.
Everything here is standard library only; no Django. One exception: the regular
expressions users and operators write (`re:` keywords, state rules) run on RE2
(google-re2), imported by linear_regex.py alone, because Python's `re` can take
exponential time on them and nothing can stop it.
"""

from .analysis import AnalysisOptions, analyze, percent, prepare_analysis  # noqa: E402
from .dump import parse_dump, parse_dump_series  # noqa: E402
from .errors import ProfileError  # noqa: E402
from .export import (  # noqa: E402
    to_folded,
    to_speedscope,
    tree_to_folded,
    trees_to_speedscope,
)
from .findings import findings_for_capture  # noqa: E402
from .flamegraph import prune_flamegraph, select_threads  # noqa: E402
from .job import analyze_job  # noqa: E402
from .keywords import GPU_KEYWORDS, Keyword, keyword_problem, load_keywords  # noqa: E402
from .lag import analyze_lag  # noqa: E402
from .profile import Profile  # noqa: E402
from .raw import parse_raw_lines  # noqa: E402
from .reading import parse_profile_text, read_profile  # noqa: E402
from .sandwich import Sandwich, frames_like, sandwich  # noqa: E402, F401
from .stacks import analyze_stacks  # noqa: E402
from .states import (  # noqa: E402
    STATES,
    StateRules,
    UserCode,
    default_state_rules,
    is_user_frame,
    load_state_rules,
)
from .threads import ThreadTables, combine_threads, thread_tables  # noqa: E402
from .types import (  # noqa: E402
    CategoryStat,
    DumpFrame,
    DumpThread,
    FlameNode,
    FrameStat,
    KeywordStat,
    LagPoint,
    LagReport,
    Stacks,
    StateStat,
    Stats,
    ThreadStat,
)
from .version import __version__  # noqa: F401

__all__ = [
    "findings_for_capture",
    "GPU_KEYWORDS",
    "STATES",
    "StateRules",
    "StateStat",
    "UserCode",
    "default_state_rules",
    "is_user_frame",
    "load_state_rules",
    "AnalysisOptions",
    "CategoryStat",
    "DumpFrame",
    "DumpThread",
    "FlameNode",
    "FrameStat",
    "Keyword",
    "KeywordStat",
    "LagPoint",
    "LagReport",
    "Profile",
    "ProfileError",
    "Stacks",
    "Stats",
    "ThreadStat",
    "ThreadTables",
    "analyze",
    "prepare_analysis",
    "analyze_job",
    "analyze_lag",
    "analyze_stacks",
    "combine_threads",
    "keyword_problem",
    "load_keywords",
    "parse_dump",
    "parse_dump_series",
    "parse_profile_text",
    "parse_raw_lines",
    "percent",
    "prune_flamegraph",
    "read_profile",
    "select_threads",
    "thread_tables",
    "to_folded",
    "to_speedscope",
    "tree_to_folded",
    "trees_to_speedscope",
]
