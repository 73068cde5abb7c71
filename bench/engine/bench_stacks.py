"""Speed and memory of the whole-job dump analysis: `analyze_stacks` on 1,024 ranks × 3 dumps.

Usage: python bench/engine/bench_stacks.py [--ranks 1024] [--dumps 3] [--odd 3] [--runs 5]
       [--case own_code]
The dumps are the real ones of a hung 4-rank gloo DDP job (tests/data/dumps/<case>,
bench/recorders/record_dumps.py): every rank is a copy of its rank 0 (waiting in DDP's all-reduce),
except --odd ranks spread over the job, copies of its rank 2 (the planted hang). Each
copy gets its own pid, tids and unsymbolised native addresses (shifted per rank, as
address-space randomisation does), so ranks share no frame strings but their addresses.
The dumps are parsed once (`parse_dump`, timed apart); the figure is the best of --runs
of `analyze_stacks` alone (target: under 1 s), then its peak Python memory (tracemalloc,
a run of its own: tracing slows it). Prints the verdict so a wrong answer shows.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from profiles.pyspy.formats.dump import parse_dump  # noqa: E402
from profiles.pyspy.job.dump_verdict import analyze_stacks  # noqa: E402


def load(case: str, rank: int, dumps: int) -> list[list[dict]]:
    """A real rank's --json dumps, as py-spy wrote them (raw JSON items)."""
    folder = ROOT / "tests" / "data" / "dumps" / case
    return [json.loads((folder / f"rank-{rank}.{k % 3}.json").read_text()) for k in range(dumps)]


def copy_for(dumps: list[list[dict]], rank: int) -> list[str]:
    """The dumps as `py-spy dump --json` text of another process: pid, tids, addresses."""
    shift = rank << 24
    texts = []
    for threads in dumps:
        out = []
        for thread in threads:
            frames = [
                {**f, "name": hex(int(f["name"], 16) + shift)} if f["name"].startswith("0x") else f
                for f in thread["frames"]
            ]
            tid = thread["os_thread_id"] + 100_000 * rank
            pid = thread["pid"] + 100_000 * rank
            out.append({**thread, "pid": pid, "os_thread_id": tid, "frames": frames})
        texts.append(json.dumps(out))
    return texts


def build(args: argparse.Namespace) -> tuple[list[tuple[str, list]], float]:
    waiting, odd = load(args.case, 0, args.dumps), load(args.case, 2, args.dumps)
    odd_ranks = {round((i + 0.5) * args.ranks / args.odd) for i in range(args.odd)}
    texts = [
        (f"rank-{r}", copy_for(odd if r in odd_ranks else waiting, r)) for r in range(args.ranks)
    ]
    began = time.perf_counter()
    ranks = [(name, [parse_dump(t) for t in dumps]) for name, dumps in texts]
    return ranks, time.perf_counter() - began


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--dumps", type=int, default=3)
    parser.add_argument("--odd", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--case", default="own_code")
    args = parser.parse_args(argv)
    ranks, parse_s = build(args)
    frames = sum(len(t["frames"]) for _, dumps in ranks for d in dumps for t in d)
    times = []
    for _ in range(args.runs):
        gc.collect()
        began = time.perf_counter()
        result = analyze_stacks(ranks)
        times.append(time.perf_counter() - began)
    tracemalloc.start()
    analyze_stacks(ranks)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    verdict = result["verdict"]
    print(
        f"{args.ranks} ranks x {args.dumps} dumps ({frames:,} frames; parse_dump {parse_s:.2f} s)"
    )
    print(f"analyze_stacks: best {min(times):.3f} s, median {sorted(times)[len(times) // 2]:.3f} s "
          f"of {args.runs}; peak {peak / 2**20:.1f} MiB (tracemalloc)")  # fmt: skip
    print(f"verdict: {verdict['kind']}, odd {verdict['odd']}, {len(result['classes'])} classes")
    print(verdict["explanation"])


if __name__ == "__main__":
    main(sys.argv[1:])
