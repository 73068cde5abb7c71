"""Speed of the whole-job report: `python -m profiles.pyspy job` on 64 rank files of ~1 MB.

Usage: python bench/engine/bench_job.py [--ranks 64] [--mb 1.0] [--runs 3] [--dir DIR]
The rank files are the real 4-rank straggler job (tests/data/jobs/straggler): ranks
0..N-2 cycle through its ranks 0-2, the last rank is its rank 3 (the straggler). Each is
grown to ~MB by repeating its stacks under other unsymbolised return addresses (as a
longer capture has: the same code reached through other addresses), so every file has
many distinct stacks, not one stack with a big count. Prints the size, the wall time of
the whole process (best of --runs; start-up, 64 parses, analysis and JSON out) and what
the report found. The target is under 10 s; on a shared 2-core machine quote it with
that caveat.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "data" / "jobs" / "straggler"


def source_lines(rank: int) -> list[str]:
    plain = SOURCE / f"rank-{rank}.txt"
    packed = Path(f"{plain}.gz")
    data = plain.read_bytes() if plain.exists() else gzip.decompress(packed.read_bytes())
    return [line for line in data.decode().splitlines() if line.strip()]


def grown(lines: list[str], size: int) -> str:
    """`lines` repeated, copy c with its first address shifted by c, up to `size` bytes."""
    out, total, copy = [], 0, 0
    while total < size:
        prefix = f"0x{copy:04x}"
        for line in lines:
            if copy:
                line = line.replace("0x", prefix, 1)
            out.append(line)
            total += len(line) + 1
        copy += 1
    return "\n".join(out) + "\n"


def write_ranks(folder: Path, ranks: int, size: int) -> list[Path]:
    sources = {r: source_lines(r) for r in range(4)}
    paths = []
    for rank in range(ranks):
        origin = 3 if rank == ranks - 1 else rank % 3
        path = folder / f"rank-{rank}.txt"
        path.write_text(grown(sources[origin], size))
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--mb", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", help="write the rank files here (default: a temp folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.dir or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        paths = write_ranks(folder, args.ranks, int(args.mb * 1_000_000))
        sizes = [p.stat().st_size for p in paths]
        command = [sys.executable, "-m", "profiles.pyspy", "job", *map(str, paths)]
        best, out = float("inf"), ""
        for _ in range(args.runs):
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True)
            best, out = min(best, time.perf_counter() - start), done.stdout
    report = json.loads(out)
    straggler = report["straggler"]
    print(f"ranks: {len(paths)}, {sum(sizes) / 1e6:.1f} MB ({min(sizes) / 1e6:.2f}-"
          f"{max(sizes) / 1e6:.2f} MB each)")  # fmt: skip
    print(f"job: {best:.2f} s wall (best of {args.runs}, whole process; target < 10 s)")
    print(f"straggler: {straggler and straggler['name']}")
    for row in report["classes"]:
        print(f"class: {row['label']}")


if __name__ == "__main__":
    main()
