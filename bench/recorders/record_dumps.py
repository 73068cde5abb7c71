"""Re-record the whole-job dump fixtures in tests/data/dumps/ (run as root, repo root).

For each case, starts the four ranks of `bench/targets/hang_train.py` (gloo DDP on 127.0.0.1,
a DataLoader with two workers) with the case's planted hang, waits until every rank
says `ready` and the bad rank says `hung`, lets the hang settle, then runs
`py-spy dump --json --native --pid PID` on every rank, DUMPS times --interval seconds
apart (the ranks of one round one after another, as a whole-job dump does), and keeps
each dump as py-spy wrote it: `<case>/rank-<r>.<k>.json`. Review the files, then
rewrite the goldens with FLAMEDECK_UPDATE_GOLDEN=1
(tests/profiles/pyspy/job/test_dump_verdict_captures.py).

    .venv/bin/python bench/recorders/record_dumps.py [CASE ...] [--interval 1] [--settle 3]

With `--record S`, the `own_code` case is also recorded, right after its dumps,
`py-spy record --native --idle --threads --format raw --rate 40 --duration S` on every
rank: tests/data/jobs/hung/rank-N.txt with py-spy's stdout as rank-N.txt.log, the
whole-job capture of the same hang. Needs torch in a venv of its own (TORCH_PYTHON,
default /work/torchenv/bin/python).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORLD = 4
DUMPS = 3
OUT = Path("tests/data/dumps")
JOBS = Path("tests/data/jobs")
RECORDED = "own_code"
"""The case `--record` also records (as tests/data/jobs/hung)."""
PYSPY = os.environ.get("PYSPY", ".venv/bin/py-spy")
TORCH_PYTHON = os.environ.get("TORCH_PYTHON", "/work/torchenv/bin/python")
CASES = {  # case: hang_train.py --cause
    "own_code": "own_code",
    "skipped_collective": "skipped_collective",
    "loader_deadlock": "loader_deadlock",
    "progressing": "progressing",
}


def start_ranks(cause: str, port: int) -> list[subprocess.Popen]:
    ranks = []
    for rank in range(WORLD):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(WORLD))
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        command = [TORCH_PYTHON, "bench/targets/hang_train.py", "--cause", cause]
        # Its stderr in a file (read when it fails: the others' "connection closed" at
        # the end is noise); a session of its own, so its DataLoader workers end with it.
        errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed with the process
        ranks.append(
            subprocess.Popen(
                command, env=env, stdout=subprocess.PIPE, stderr=errors, start_new_session=True
            )
        )
    return ranks


def wait_for(proc: subprocess.Popen, word: str) -> str:
    """The rank's first line starting with `word` (its earlier lines are skipped)."""
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline().decode().strip()
        if not line:
            proc.wait()
            assert proc.stderr is not None
            proc.stderr.seek(0)
            tail = proc.stderr.read().decode(errors="replace").strip().splitlines()[-3:]
            raise SystemExit(f"rank {proc.pid} ended before saying {word!r}: {' / '.join(tail)}")
        if line.startswith(word):
            return line


def dump_all(case_dir: Path, ranks: list[subprocess.Popen], interval: float) -> None:
    for k in range(DUMPS):
        began = time.monotonic()
        for rank, proc in enumerate(ranks):
            command = [PYSPY, "dump", "--json", "--native", "--pid", str(proc.pid)]
            done = subprocess.run(command, capture_output=True, check=True, timeout=30)
            (case_dir / f"rank-{rank}.{k}.json").write_bytes(done.stdout)
        time.sleep(max(0.0, interval - (time.monotonic() - began)))


def record_all(case_dir: Path, ranks: list[subprocess.Popen], seconds: int) -> None:
    """A whole-job capture of the same moment: <case_dir>/rank-N.txt and its log."""
    case_dir.mkdir(parents=True, exist_ok=True)
    samplers = []
    for rank, proc in enumerate(ranks):
        out = case_dir / f"rank-{rank}.txt"
        command = [PYSPY, "record", "--native", "--idle", "--threads", "--format", "raw"]
        command += ["--rate", "40", "--duration", str(seconds), "--pid", str(proc.pid)]
        log = open(f"{out}.log", "wb")  # noqa: SIM115 - closed below, after py-spy ends
        command += ["-o", str(out)]
        samplers.append((subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), log))
    for sampler, log in samplers:
        sampler.wait()
        log.close()


def record_case(name: str, port: int, args: argparse.Namespace) -> None:
    case_dir = OUT / name
    case_dir.mkdir(parents=True, exist_ok=True)
    for old in case_dir.glob("rank-*.json"):
        old.unlink()
    ranks = start_ranks(CASES[name], port)
    try:
        said = [wait_for(proc, "ready") for proc in ranks]
        if name != "progressing":
            said += [wait_for(ranks[2], "hung")]
        time.sleep(args.settle)  # the others reach their next all-reduce and block
        dump_all(case_dir, ranks, args.interval)
        if args.record and name == RECORDED:
            record_all(JOBS / "hung", ranks, args.record)
    finally:
        for proc in ranks:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if proc.stderr is not None:
                proc.stderr.close()
    print(name, "; ".join(said), flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help=f"some of {', '.join(CASES)} (default: all)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between dumps")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds after `hung`")
    parser.add_argument("--record", type=int, default=0, help="also record own_code S seconds")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    for offset, name in enumerate(args.cases or list(CASES)):
        record_case(name, 29700 + offset, args)


if __name__ == "__main__":
    main(sys.argv[1:])
