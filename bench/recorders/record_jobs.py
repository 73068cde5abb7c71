"""Re-record the whole-job fixtures in tests/data/jobs/ (run as root, from the repo root).

For each case, starts the four ranks of `bench/targets/train.py` (gloo on 127.0.0.1) with the
case's planted cause, waits until every rank says `ready`, then starts one
`py-spy record --native --threads --format raw` per rank at the same moment (with
`--idle` unless the case says otherwise), keeps py-spy's stdout beside each file as
`rank-N.txt.log`, and gzips a recording larger than --gzip-over bytes (the engine
reads gzip). Review the files, then rewrite the goldens with FLAMEDECK_UPDATE_GOLDEN=1.

    .venv/bin/python bench/recorders/record_jobs.py [CASE ...] [--rate 40] [--duration 10]

Needs torch in a venv of its own (TORCH_PYTHON, default /work/torchenv/bin/python).
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import time
from pathlib import Path

WORLD = 4
OUT = Path("tests/data/jobs")
PYSPY = os.environ.get("PYSPY", ".venv/bin/py-spy")
TORCH_PYTHON = os.environ.get("TORCH_PYTHON", "/work/torchenv/bin/python")
# case: (train.py --cause, record with --idle)
CASES = {
    "balanced": ("none", True),
    "straggler": ("straggler", True),
    "straggler_noidle": ("straggler", False),
    "starved": ("starved", True),
    "hostsync": ("hostsync", True),
    "backpressure": ("backpressure", True),
    "gil": ("gil", True),
}


def start_ranks(cause: str, port: int, seconds: float) -> list[subprocess.Popen]:
    ranks = []
    for rank in range(WORLD):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(WORLD))
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        command = [TORCH_PYTHON, "bench/targets/train.py", "--cause", cause]
        command += ["--seconds", str(seconds)]
        ranks.append(
            subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        )
    return ranks


def wait_ready(ranks: list[subprocess.Popen]) -> list[str]:
    lines = []
    for proc in ranks:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        if not line.startswith("ready"):
            raise SystemExit(f"rank {proc.pid} did not start: {line!r}")
        lines.append(line)
    return lines


def record(case_dir: Path, ranks: list[subprocess.Popen], idle: bool, args) -> None:
    samplers = []
    for rank, proc in enumerate(ranks):
        out = case_dir / f"rank-{rank}.txt"
        command = [PYSPY, "record", "--native", "--threads", "--format", "raw"]
        command += ["--rate", str(args.rate), "--duration", str(args.duration)]
        command += ["--pid", str(proc.pid), "-o", str(out)] + (["--idle"] if idle else [])
        log = open(f"{out}.log", "wb")  # noqa: SIM115 - closed below, after py-spy ends
        samplers.append((subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), log))
    for sampler, log in samplers:
        sampler.wait()
        log.close()


def shrink(case_dir: Path, limit: int) -> None:
    for path in sorted(case_dir.glob("rank-*.txt")):
        if path.stat().st_size > limit:
            Path(f"{path}.gz").write_bytes(gzip.compress(path.read_bytes(), 9, mtime=0))
            path.unlink()


def record_case(name: str, port: int, args) -> None:
    cause, idle = CASES[name]
    case_dir = OUT / name
    case_dir.mkdir(parents=True, exist_ok=True)
    for old in case_dir.glob("rank-*"):
        old.unlink()
    ranks = start_ranks(cause, port, args.duration + 60)
    try:
        ready = wait_ready(ranks)
        time.sleep(2)  # a few steps with the planted cause before sampling
        record(case_dir, ranks, idle, args)
    finally:
        for proc in ranks:
            proc.kill()
            proc.wait()
    shrink(case_dir, args.gzip_over)
    print(name, "; ".join(ready), flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help=f"some of {', '.join(CASES)} (default: all)")
    parser.add_argument("--rate", type=int, default=40)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--gzip-over", type=int, default=300_000)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    for offset, name in enumerate(args.cases or list(CASES)):
        record_case(name, 29600 + offset, args)


if __name__ == "__main__":
    main(sys.argv[1:])
