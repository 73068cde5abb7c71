"""flamedeck's analysis engine: py-spy output in, dashboard numbers out.

Subpackages by capability, each importing only those above it in this list (after the
top leaves errors, limits, thresholds and version); each one's docstring is its map:

- core: the trie of samples (Profile), frame strings, the JSON shapes (types).
- stats: intervals, Student's t, multiple testing, batch means, change points.
- formats: py-spy's files in (raw, speedscope, chrometrace, dump, log; `reading` picks
  the parser by content: gzip and UTF-16/UTF-8 BOMs accepted) and out (export,
  redaction); split and time_track keep a capture's clock.
- rules: thread states (state_rules, rule_table, states), the user's code, the
  framework's step, step threads, findings.
- count: one capture's figures (analysis, keywords, threads, functions, flamegraph,
  sandwich).
- timed: a capture with time (timelines, windows, periodic stalls, design effects,
  the device's series).
- job: a whole job from its ranks' stats (report, straggler, stuck, DataLoader
  workers, parallel layout) and the whole-job dump verdict.
- compare: two captures, two jobs, a watch's judgement.

This module, __main__ and the command lines (cli, jobcli, stackscli) are the public
face; the Django side imports from here or a subpackage's __init__ only. Where to add a
finding, a state rule or an input format: docs/engine.md ("Where things are").

Everything here is standard library only; no Django. One exception: the regular
expressions users and operators write (`re:` keywords, state rules) run on RE2
(google-re2), imported by core/linear_regex.py alone, because Python's `re` can take
exponential time on them and nothing can stop it.
"""

from .core.profile import Profile
from .core.types import (
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
from .count.analysis import AnalysisOptions, analyze, percent, prepare_analysis
from .count.flamegraph import prune_flamegraph, select_threads
from .count.keywords import GPU_KEYWORDS, Keyword, keyword_problem, load_keywords
from .count.sandwich import Sandwich, frames_like, sandwich
from .count.thread_tables import ThreadTables, combine_threads, thread_tables
from .errors import ProfileError
from .formats.dump import parse_dump, parse_dump_series
from .formats.export import to_folded, to_speedscope, tree_to_folded, trees_to_speedscope
from .formats.log import analyze_lag
from .formats.raw import parse_raw_lines
from .formats.reading import parse_profile_text, read_profile
from .job.dump_verdict import analyze_stacks
from .job.report import analyze_job
from .rules.findings import findings_for_capture
from .rules.state_rules import STATES
from .rules.states import (
    StateRules,
    UserCode,
    default_state_rules,
    is_user_frame,
    load_state_rules,
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
    "Sandwich",
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
    "frames_like",
    "keyword_problem",
    "load_keywords",
    "parse_dump",
    "parse_dump_series",
    "parse_profile_text",
    "parse_raw_lines",
    "percent",
    "prune_flamegraph",
    "read_profile",
    "sandwich",
    "select_threads",
    "thread_tables",
    "to_folded",
    "to_speedscope",
    "tree_to_folded",
    "trees_to_speedscope",
]
