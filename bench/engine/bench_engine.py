"""Speed and memory of the analysis engine (not run by the unit tests).

Usage: python bench/engine/bench_engine.py [REAL_RAW] [--big PATH] [--runs N] [--baseline REF]
- speed, in one process: full `analyze` (every field, flamegraph included) against
  the seed's naive loop (bench/engine/naive_loop.py) on the same file, best of N runs;
- speed, end to end as processes: `python -m profiles.pyspy analyze FILE` against
  `python bench/engine/naive_loop.py FILE` (start-up, imports, parsing, JSON out), wall
  and CPU (user+sys) time, best of N; plus the CLI's import time;
  (with --baseline REF, the CLI of that git revision's engine too, for before/after);
- speedscope: a ~30 MB py-spy-style speedscope file, parsed and analysed in a fresh
  process: seconds and peak RSS (with --baseline REF, that engine too);
- memory: a fresh subprocess parses and analyses the 100 MB generated raw file
  (bench/support/gen_raw.py) and reports its peak RSS.
REAL_RAW defaults to /tmp/flamedeck_torch7.txt: a real `--native --threads --idle`
capture of bench/targets/torch_target.py at 1000 Hz (recorded here when torch and py-spy are
available, else tests/data/pyspy/torch_native_idle.txt), repeated with shifted thread
ids until it reaches 7.4 MB (the size of the capture issue 13 measured).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "engine"))

from naive_loop import naive  # noqa: E402

from profiles.pyspy import (  # noqa: E402
    AnalysisOptions,
    analyze,
    combine_threads,
    read_profile,
    thread_tables,
)

TORCH_PYTHON = os.environ.get("TORCH_PYTHON", "/work/torchenv/bin/python")
FIXTURE = ROOT / "tests/data/pyspy/torch_native_idle.txt"
BASE = "/tmp/flamedeck_torch_base.txt"
TARGET_MB = 7.4


def full(path: str) -> dict:
    return dict(analyze(read_profile(path), AnalysisOptions()))


def best_of(runs: int, fns: list, path: str) -> list[tuple[float, float]]:
    """Best (wall, cpu) of each function, runs interleaved so load spikes hit both."""
    best = [(float("inf"), float("inf"))] * len(fns)
    for _ in range(runs):
        for index, fn in enumerate(fns):
            wall, cpu = time.perf_counter(), time.process_time()
            fn(path)
            took = (time.perf_counter() - wall, time.process_time() - cpu)
            best[index] = (min(best[index][0], took[0]), min(best[index][1], took[1]))
    return best


def record_torch_base(path: str) -> None:
    """45 s of bench/targets/torch_target.py under py-spy at 1000 Hz (as root)."""
    target = subprocess.Popen(
        [TORCH_PYTHON, str(ROOT / "bench/targets/torch_target.py"), "70"], stderr=subprocess.DEVNULL
    )
    try:
        time.sleep(8)
        print("recording", path, "with py-spy (45 s) ...", flush=True)
        cmd = [str(ROOT / ".venv/bin/py-spy"), "record", "--native", "--threads", "--idle"]
        cmd += ["--format", "raw", "--rate", "1000", "-d", "40", "--pid", str(target.pid)]
        cmd += ["-o", path]
        subprocess.run(["timeout", "-s", "INT", "45", *cmd], stdout=subprocess.DEVNULL)
    finally:
        target.kill()
        target.wait()


def make_real(path: str) -> None:
    """A ~7.4 MB real capture: a real one repeated with shifted thread ids."""
    base = BASE
    if not os.path.exists(base) and os.path.exists(TORCH_PYTHON) and os.geteuid() == 0:
        record_torch_base(base)
    if not os.path.exists(base):
        base = str(FIXTURE)
    lines = Path(base).read_text(encoding="utf-8").splitlines()
    out, size, copy = [], 0, 0
    thread = re.compile(r"^thread \((\d+)\)")
    while size < TARGET_MB * 1e6:
        for line in lines:
            tid = thread.match(line)
            if tid:
                line = f"thread ({int(tid[1]) + 1_000_000 * copy}){line[tid.end() :]}"
            out.append(line)
            size += len(line) + 1
        copy += 1
    Path(path).write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"made {path}: {copy} copies of {base}")


def speed(path: str, runs: int) -> None:
    size_mb = os.path.getsize(path) / 1e6
    (w_naive, c_naive), (w_full, c_full) = best_of(runs, [naive, full], path)
    stats = full(path)
    print(
        f"speed on {path} ({size_mb:.1f} MB, {stats['total_samples']} samples, "
        f"{stats['unique_stacks']} stacks), in one process, best of {runs}:"
    )
    print(f"  naive loop (leaf + keywords): {w_naive:.3f} s wall, {c_naive:.3f} s CPU")
    print(f"  full analysis:                {w_full:.3f} s wall, {c_full:.3f} s CPU")
    print(
        f"  ratio full/naive: {w_full / w_naive:.2f} wall, {c_full / c_naive:.2f} CPU (limit 1.5)"
    )


# As installed code runs: bytecode cached (PYTHONDONTWRITEBYTECODE would make every
# run compile the engine's modules again, ~20 ms that no deployment pays).
CACHED_BYTECODE = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _process(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU of one run; a command may start with ("cwd", DIR) to run there."""
    cwd = ROOT
    if cmd[0] == "cwd":
        cwd, cmd = Path(cmd[1]), cmd[2:]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, cwd=cwd, env=CACHED_BYTECODE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _best_processes(runs: int, cmds: list[list[str]]) -> list[tuple[float, float]]:
    """Best (wall, CPU) of each command after one unmeasured warm-up run each."""
    for cmd in cmds:
        _process(cmd)
    best = [(float("inf"), float("inf"))] * len(cmds)
    for _ in range(runs):
        for index, cmd in enumerate(cmds):
            wall, cpu = _process(cmd)
            best[index] = (min(best[index][0], wall), min(best[index][1], cpu))
    return best


def end_to_end(path: str, runs: int, baseline: str | None = None) -> None:
    py = sys.executable
    cli = [py, "-m", "profiles.pyspy", "analyze", path]
    loop = [py, str(ROOT / "bench/engine/naive_loop.py"), path]
    with tempfile.TemporaryDirectory() as old:
        cmds = [loop, cli]
        if baseline:
            _extract_engine(baseline, old)
            cmds.append(["cwd", old, *cli])
        best = _best_processes(runs, cmds)
    (w_naive, c_naive), (w_cli, c_cli) = best[:2]
    (w_bare, _), (w_import, _) = _best_processes(
        runs, [[py, "-c", "pass"], [py, "-c", "import profiles.pyspy.cli"]]
    )
    print(f"end to end as processes (stdout to /dev/null, bytecode cached), best of {runs}:")
    print(f"  python bench/engine/naive_loop.py FILE:    {w_naive:.3f} s wall, {c_naive:.3f} s CPU")
    print(f"  python -m profiles.pyspy analyze FILE:     {w_cli:.3f} s wall, {c_cli:.3f} s CPU")
    print(f"  ratio cli/naive: {w_cli / w_naive:.2f} wall, {c_cli / c_naive:.2f} CPU (limit 1.5)")
    if baseline:
        (w_old, c_old) = best[2]
        print(f"  the engine at {baseline}:  {w_old:.3f} s wall, {c_old:.3f} s CPU", end="")
        print(f" (ratio {w_old / w_naive:.2f} wall, {c_old / c_naive:.2f} CPU)")
    print(
        f"  interpreter start-up {w_bare:.3f} s; importing the CLI adds {w_import - w_bare:.3f} s"
    )


def _extract_engine(revision: str, folder: str) -> None:
    """The engine (profiles/pyspy) of a git revision, into `folder`."""
    cmd = ["git", "-C", str(ROOT), "archive", revision, "profiles/__init__.py", "profiles/pyspy"]
    archive = subprocess.run(cmd, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)


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
start, cpu = time.perf_counter(), time.process_time()
stats = analyze(read_profile(sys.argv[1]))
took, cpu = time.perf_counter() - start, time.process_time() - cpu
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": took, "cpu": cpu, "peak_mb": peak_mb,
                  "samples": stats["total_samples"], "stacks": stats["unique_stacks"]}))
"""


def _child(path: str, engine_root: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, path, engine_root], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def make_speedscope(raw: str, path: str, megabytes: float = 30) -> None:
    """py-spy-style speedscope: one sample per tick, per-thread profiles, time weights."""
    frames: dict[str, int] = {}
    threads: dict[str, list[list[int]]] = {}
    size, lines = 0, Path(raw).read_text(encoding="utf-8").splitlines()
    while size < megabytes * 1e6:
        for line in lines:
            stack, _, count = line.rpartition(" ")
            thread, *rest = stack.split(";")
            sample = [frames.setdefault(f, len(frames)) for f in rest]
            threads.setdefault(thread, []).extend([sample] * int(count))
            size += (len(sample) * 5 + 8) * int(count)
    profiles = [_sampled(thread, samples) for thread, samples in threads.items()]
    doc = {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": [_speedscope_frame(f) for f in frames]},
        "profiles": profiles,
        "exporter": "py-spy@0.4.3 (imitated)",
        "name": "bench",
    }
    Path(path).write_text(json.dumps(doc), encoding="utf-8")


def _sampled(thread: str, samples: list[list[int]]) -> dict:
    tid, _, name = thread.removeprefix("thread (").partition("): ")
    return {
        "type": "sampled",
        "name": f'Thread {tid.rstrip(")")} "{name}"',
        "unit": "seconds",
        "startValue": 0,
        "endValue": len(samples) / 1000,
        "samples": samples,
        "weights": [0.001] * len(samples),
    }


def _speedscope_frame(name: str) -> dict:
    match = re.match(r"(.*) \((.*?)(?::(\d+))?\)\Z", name)
    if not match:
        return {"name": name}
    return {"name": match[1], "file": match[2], "line": int(match[3] or 0)}


def speedscope(raw: str, path: str, baseline: str | None) -> None:
    if not os.path.exists(path):
        make_speedscope(raw, path)
    size_mb = os.path.getsize(path) / 1e6
    now = _child(path, str(ROOT))
    print(f"speedscope {path} ({size_mb:.1f} MB, {now['samples']} samples), fresh process:")
    print(f"  this engine:  {_took(now)}, peak RSS {now['peak_mb']:.0f} MB")
    if baseline:
        with tempfile.TemporaryDirectory() as old:
            _extract_engine(baseline, old)
            then = _child(path, old)
        print(f"  at {baseline}: {_took(then)}, peak RSS {then['peak_mb']:.0f} MB")


def _took(result: dict) -> str:
    return f"{result['seconds']:.2f} s wall, {result['cpu']:.2f} s CPU"


def memory(path: str) -> None:
    if not os.path.exists(path):
        gen_raw = ROOT / "bench" / "support" / "gen_raw.py"
        subprocess.run([sys.executable, str(gen_raw), path, "100"], check=True)
    size_mb = os.path.getsize(path) / 1e6
    result = _child(path, str(ROOT))
    print(
        f"memory on {path} ({size_mb:.1f} MB, {result['samples']} samples, "
        f"{result['stacks']} stacks), fresh process:"
    )
    print(
        f"  full analysis {_took(result)}, {size_mb / result['cpu']:.1f} MB/s of CPU, "
        f"peak RSS {result['peak_mb']:.0f} MB (limit 400)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("real", nargs="?", default="/tmp/flamedeck_torch7.txt")
    parser.add_argument("--big", default="/tmp/flamedeck_100mb.txt")
    parser.add_argument("--speedscope", default="/tmp/flamedeck_30mb_speedscope.json")
    parser.add_argument(
        "--baseline", help="git revision whose engine to compare (end to end, speedscope)"
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    if not os.path.exists(args.real):
        make_real(args.real)
    speed(args.real, args.runs)
    end_to_end(args.real, args.runs, args.baseline)
    thread_filter(args.real)
    speedscope(args.real, args.speedscope, args.baseline)
    if not args.skip_memory:
        memory(args.big)


if __name__ == "__main__":
    main()
