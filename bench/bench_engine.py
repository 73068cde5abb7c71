"""Speed and memory of the analysis engine (not run by the unit tests).

Usage: python bench/bench_engine.py [REAL_RAW] [--big PATH] [--runs N]
- speed: full `analyze` (every field, flamegraph included) against the seed's
  naive loop (split each line, Counter of leaf frames, keyword counts summed over
  frames) on the same file, in one process, best of N runs each;
- memory: a fresh subprocess parses and analyses the 100 MB generated file
  (bench/gen_raw.py) and reports its peak RSS from resource.getrusage.
REAL_RAW defaults to /tmp/flamedeck_real.txt, recorded here by py-spy from
bench/workload.py --deep when missing (needs root and py-spy in .venv).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from profiles.pyspy import (  # noqa: E402
    GPU_KEYWORDS,
    AnalysisOptions,
    analyze,
    combine_threads,
    read_profile,
    thread_tables,
)

KEYWORDS = [kw.keyword for kw in GPU_KEYWORDS]


def naive(path: str) -> tuple[Counter, Counter]:
    """The seed's hand-made loop (wrong on double counting; here only as a baseline)."""
    leaf: Counter = Counter()
    per_keyword: Counter = Counter()
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            n = int(count)
            frames = stack.split(";")
            leaf[frames[-1]] += n
            for frame in frames:
                for kw in KEYWORDS:
                    if kw in frame:
                        per_keyword[kw] += n
    return leaf, per_keyword


def full(path: str) -> dict:
    return dict(analyze(read_profile(path), AnalysisOptions()))


def best_of(runs: int, fns: list, path: str) -> list[float]:
    """Best wall time of each function, runs interleaved so load spikes hit both."""
    best = [float("inf")] * len(fns)
    for _ in range(runs):
        for index, fn in enumerate(fns):
            start = time.perf_counter()
            fn(path)
            best[index] = min(best[index], time.perf_counter() - start)
    return best


def record_real(path: str) -> None:
    cmd = [
        str(ROOT / ".venv/bin/py-spy"),
        "record",
        "-o",
        path,
        "--format",
        "raw",
        "--threads",
        "--native",
        "--rate",
        "100",
        "--duration",
        "30",
        "--",
        str(ROOT / ".venv/bin/python"),
        str(ROOT / "bench/workload.py"),
        "60",
        "6",
        "--deep",
    ]
    print("recording", path, "with py-spy (30 s) ...", flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def speed(path: str, runs: int) -> None:
    size_mb = os.path.getsize(path) / 1e6
    t_naive, t_full = best_of(runs, [naive, full], path)
    stats = full(path)
    print(
        f"speed on {path} ({size_mb:.1f} MB, {stats['total_samples']} samples, "
        f"{stats['unique_stacks']} stacks), best of {runs}:"
    )
    print(f"  naive loop (leaf + keywords): {t_naive:.3f} s  {size_mb / t_naive:.1f} MB/s")
    print(f"  full analysis:                {t_full:.3f} s  {size_mb / t_full:.1f} MB/s")
    print(f"  ratio full/naive: {t_full / t_naive:.2f} (limit 1.5)")


def thread_filter(path: str) -> None:
    """What the pipeline adds per capture (tables) and what a thread filter then costs."""
    profile = read_profile(path)
    analyze(profile, AnalysisOptions())  # warm the shared caches, as the pipeline does
    start = time.perf_counter()
    tables = thread_tables(profile)
    stored = gzip.compress(json.dumps(tables).encode(), compresslevel=6)
    t_build = time.perf_counter() - start
    names = [t["name"] or str(t["tid"]) for t in tables["threads"]][:2]
    start = time.perf_counter()
    combine_threads(json.loads(gzip.decompress(stored)), names)
    t_combine = time.perf_counter() - start
    start = time.perf_counter()
    options = AnalysisOptions(threads=frozenset(names), include_flamegraph=False)
    analyze(read_profile(path), options)
    t_reparse = time.perf_counter() - start
    print(f"thread filter on {names} ({len(tables['threads'])} threads):")
    print(f"  tables built + gzipped at analysis: {t_build:.3f} s, {len(stored) / 1e6:.2f} MB")
    print(f"  filter from stored tables:          {t_combine:.3f} s")
    print(f"  filter by re-parsing the raw file:  {t_reparse:.3f} s")


CHILD = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from profiles.pyspy import analyze, read_profile
start = time.perf_counter()
stats = analyze(read_profile(sys.argv[1]))
took = time.perf_counter() - start
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": took, "peak_mb": peak_mb, "samples": stats["total_samples"],
                  "stacks": stats["unique_stacks"]}))
"""


def memory(path: str) -> None:
    if not os.path.exists(path):
        subprocess.run([sys.executable, str(ROOT / "bench/gen_raw.py"), path, "100"], check=True)
    size_mb = os.path.getsize(path) / 1e6
    out = subprocess.run(
        [sys.executable, "-c", CHILD, path, str(ROOT)], check=True, capture_output=True, text=True
    )
    result = json.loads(out.stdout)
    print(
        f"memory on {path} ({size_mb:.1f} MB, {result['samples']} samples, "
        f"{result['stacks']} stacks), fresh process:"
    )
    print(
        f"  full analysis {result['seconds']:.1f} s  {size_mb / result['seconds']:.1f} MB/s  "
        f"peak RSS {result['peak_mb']:.0f} MB (limit 400)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("real", nargs="?", default="/tmp/flamedeck_real.txt")
    parser.add_argument("--big", default="/tmp/flamedeck_100mb.txt")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    if not os.path.exists(args.real):
        record_real(args.real)
    speed(args.real, args.runs)
    thread_filter(args.real)
    if not args.skip_memory:
        memory(args.big)


if __name__ == "__main__":
    main()
