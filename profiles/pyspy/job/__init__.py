"""job: a whole job from its ranks' stored stats (never their samples). One stats per
rank in; the job report and the whole-job dump verdict out.

- `rank_stats`: one rank's stored stats, made whole before the report reads them.
- `report`: step threads of every rank, classes of ranks, the job's findings;
  `straggler` (the rank the others wait for) and `stuck` (a hang) are its parts.
- `loader_workers`: a rank's DataLoader workers in a `--subprocesses` record.
- `layout`: where ranks sit in the job's parallel layout, in words.
- `dump_verdict`: a whole-job dump (each rank's successive `py-spy dump`s): where every
  rank stands and whether anything moves.
"""

from .dump_verdict import analyze_stacks
from .layout import AXES, MAX_AXES, MAX_COORDINATE, layout_problem
from .loader_workers import (
    WorkerFunction,
    WorkersFact,
    WorkerStats,
    own_track,
    split_processes,
    with_workers,
    worker_summary,
)
from .report import analyze_job

__all__ = [
    "AXES",
    "MAX_AXES",
    "MAX_COORDINATE",
    "WorkerFunction",
    "WorkerStats",
    "WorkersFact",
    "analyze_job",
    "analyze_stacks",
    "layout_problem",
    "own_track",
    "split_processes",
    "with_workers",
    "worker_summary",
]
