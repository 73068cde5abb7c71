"""`python -m profiles.pyspy job FILE... [--log FILE...] [--names NAME...]`: the whole job.

Each FILE is one rank's py-spy recording (raw or speedscope, maybe gzip); `--log`
and `--names` pair with the files in order. The ranks are analysed in parallel
processes (one per core), then job.analyze_job prints one JSON object.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .count.analysis import AnalysisOptions, analyze
from .errors import ProfileError
from .formats.reading import read_profile, read_text
from .job.report import analyze_job

PARALLEL_FROM = 4
"""Fewer files than this are analysed in this process (a pool costs ~0.1 s to start)."""


def add_job_parser(sub: Any) -> None:
    job = sub.add_parser("job", help="whole-job report of one recording per rank")
    job.add_argument("files", nargs="+", metavar="FILE")
    job.add_argument("--log", nargs="+", default=[], help="py-spy's stdout per FILE, in order")
    job.add_argument("--names", nargs="+", default=[], help="rank names per FILE, in order")
    job.add_argument(
        "--step-thread", action="append", default=[], help="step thread name or tid (repeatable)"
    )
    job.add_argument(
        "--library", action="append", default=[], help="package or path prefix that is library"
    )


def rank_names(files: Sequence[str], names: Sequence[str]) -> list[str]:
    """The given names, or each file's name without its suffixes (`rank-3.txt.gz` -> rank-3)."""
    if names:
        return list(names)
    stems = [Path(f).name.split(".")[0] or Path(f).name for f in files]
    return stems if len(set(stems)) == len(stems) else [Path(f).name for f in files]


def run_job(args: argparse.Namespace, print_json) -> None:
    files = args.files
    for flag, values in (("--log", args.log), ("--names", args.names)):
        if values and len(values) != len(files):
            raise ProfileError(f"{flag} needs one value per FILE ({len(files)}), got {len(values)}")
    if args.names and len(set(args.names)) != len(args.names):
        raise ProfileError("--names must be distinct")
    logs = args.log or [None] * len(files)
    work = [(f, log, tuple(args.library)) for f, log in zip(files, logs, strict=True)]
    stats = _analyze_all(work)
    ranks = list(zip(rank_names(files, args.names), stats, strict=True))
    print_json(analyze_job(ranks, args.step_thread))


def _analyze_all(work: list[tuple[str, str | None, tuple[str, ...]]]) -> list[dict[str, Any]]:
    workers = min(len(work), os.cpu_count() or 1)
    if len(work) < PARALLEL_FROM or workers < 2:
        return [analyze_rank(*item) for item in work]
    from concurrent.futures import ProcessPoolExecutor  # only here: ~20 ms of imports

    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(analyze_rank, *zip(*work, strict=True)))


def analyze_rank(path: str, log: str | None, library: tuple[str, ...]) -> dict[str, Any]:
    """One rank's stats, without the flamegraph and keywords the job does not use."""
    options = AnalysisOptions(keywords=(), include_flamegraph=False, top_n=30, library=library)
    log_text = read_text(log) if log else None
    stats = dict(analyze(read_profile(path), options, log_text=log_text))
    if log and stats.get("lag") is None:
        raise ProfileError(f"{Path(log).name} is not a py-spy log: it holds none of py-spy's lines")
    return stats
