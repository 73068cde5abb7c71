"""Where the test suite's time goes: a pytest plugin that writes, per test, its wall
seconds and the whole machine's busy CPU seconds around it (from /proc/stat, so the
PostgreSQL server, Chromium and every process a test starts are counted, which no
Python profile shows), then prints the files that cost the most.

Run it in one process with nothing else running (the machine's CPU is what it reads):

    CI=true PYTHONPATH=bench/suite .venv/bin/python -m pytest -p suite_cpu -n 0 -q

`SUITE_CPU_OUT` names the TSV (default var/suite_cpu.tsv; nodeid, wall, CPU-s, start
and end in seconds since the epoch, then the CPU seconds of the test process itself
and of the children it waited for, then for an `alone` test when its block asked for
the machine, got it and gave it back). Under pytest-xdist (`-n 2`) each process writes
its own (`suite_cpu.gw0.tsv`, …): the CPU column then counts the other processes' tests
too (the test process's own columns do not), but the start and end times show when
each process ran what, and `--timeline` in `python bench/suite/suite_cpu.py --timeline
var/suite_cpu.gw*.tsv` prints the busy processes minute by minute, what ran in the
last minutes and the `alone` blocks. The figures it gave are
in docs/figures.md#where-the-suites-time-goes.

Which kinds of process spent the machine's CPU while a command ran (test processes,
Chromium's browser, renderer and GPU processes, Celery workers, the profiled workloads,
PostgreSQL, …), from a look at every process every 0.3 s (what lived less than that
is missed; what ran before the command counts from its start):

    CI=true .venv/bin/python bench/suite/suite_cpu.py --kinds -- make test

Whether the machine was the limit: its user, system, idle and stolen core-seconds
over a command, from /proc/stat before and after (nothing sampled meanwhile, so the
run is not slowed as `--kinds` slows it):

    CI=true .venv/bin/python bench/suite/suite_cpu.py --machine -- make test
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest

if __name__ == "__main__":  # run as a script: the repository's packages are importable
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.procs import command_line, stat  # noqa: E402

_TICKS = os.sysconf("SC_CLK_TCK")
_OUT = Path(os.environ.get("SUITE_CPU_OUT", "var/suite_cpu.tsv"))
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    _OUT = _OUT.with_suffix(f".{_WORKER}{_OUT.suffix}")
_rows: list[tuple[str, float, float, float, float]] = []


def _ticks() -> list[int]:
    """The machine's CPU ticks since boot, every core: user, nice, system, idle, iowait,
    irq, softirq, steal."""
    with open("/proc/stat") as stat:
        return [int(v) for v in stat.readline().split()[1:9]]


def busy_cpu_s() -> float:
    """Busy CPU seconds of the whole machine since boot (every core, not idle or iowait)."""
    ticks = _ticks()
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICKS


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall, start, own = busy_cpu_s(), time.monotonic(), time.time(), _own_cpu_s()
    yield
    _rows.append(
        (item.nodeid, time.monotonic() - wall, busy_cpu_s() - cpu, start, time.time())
        + tuple(now - then for now, then in zip(_own_cpu_s(), own, strict=True))
        + next((times for name, times in item.user_properties if name == "alone"), ())
    )


def _own_cpu_s() -> tuple[float, float]:
    """CPU seconds of this test process (every thread: the live server's too) and of
    the children it has waited for (`manage.py` commands, workers stopped, py-spy)."""
    me, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


def pytest_sessionfinish(session):
    if not _rows:
        return
    _OUT.parent.mkdir(parents=True, exist_ok=True)
    _OUT.write_text(
        "".join("\t".join([row[0], *(f"{v:.3f}" for v in row[1:])]) + "\n" for row in _rows)
    )
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for nodeid, wall, cpu, *_ in _rows:
        entry = by_file[nodeid.split("::")[0]]
        entry[0], entry[1], entry[2] = entry[0] + wall, entry[1] + cpu, entry[2] + 1
    wall = sum(r[1] for r in _rows)
    cpu = sum(r[2] for r in _rows)
    print(f"\nsuite_cpu: {len(_rows)} tests, {wall:.0f} s of tests, {cpu:.0f} busy CPU-s")
    for path, (w, c, n) in sorted(by_file.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"{c:7.1f} CPU-s {w:7.1f} s {n:4d} tests  {path}")
    print(f"per test: {_OUT}")


def timeline(paths: list[str], last_s: float = 120.0) -> None:
    """How many processes ran a test in each minute of a parallel run, and which tests
    ran in its last `last_s` seconds (where a run's tail waits on a few long tests)."""
    runs, blocks = [], []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            nodeid, _, _, start, end, *rest = line.split("\t")
            runs.append((Path(path).suffixes[-2].strip("."), nodeid, float(start), float(end)))
            if len(rest) == 5:  # an `alone` block: asked, got, released
                blocks.append((nodeid, *map(float, rest[2:])))
    t0, t1 = min(r[2] for r in runs), max(r[3] for r in runs)
    print(f"{len(runs)} tests from {len(paths)} processes over {t1 - t0:.0f} s")
    for minute in range(int((t1 - t0) // 60) + 1):
        lo, hi = t0 + 60 * minute, min(t0 + 60 * (minute + 1), t1)
        busy = sum(max(0.0, min(e, hi) - max(s, lo)) for _, _, s, e in runs)
        print(f"minute {minute:2d}: {busy / max(hi - lo, 1e-9):.2f} processes busy")
    print(f"in the last {last_s:.0f} s:")
    for worker, nodeid, start, end in sorted(runs, key=lambda r: r[2]):
        if end > t1 - last_s and end - start > 1.0:
            print(f"  {worker} {start - t0:6.1f}-{end - t0:6.1f} s  {nodeid}")
    if blocks:
        print("`alone` blocks (asked, held from-to):")
    for nodeid, asked, got, released in sorted(blocks, key=lambda b: b[2]):
        print(f"  {asked - t0:6.1f}  {got - t0:6.1f}-{released - t0:6.1f} s  {nodeid}")


_KINDS = (  # (kind, pattern searched in the command line), first match wins
    ("chromium", re.compile(r"chrom")),
    ("celery worker", re.compile(r"-m celery|bin/celery")),
    ("py-spy", re.compile(r"py-spy")),
    ("profiled workload", re.compile(r"workload\.py|pyspy_faults")),
    ("test process", re.compile(r"pytest|xdist|-c import sys;exec")),
    ("manage.py", re.compile(r"manage\.py")),
    ("gunicorn", re.compile(r"gunicorn")),
    ("postgresql", re.compile(r"^postgres")),
    ("redis", re.compile(r"^redis")),
    ("ssh", re.compile(r"^(/usr/s?bin/)?sshd?\b|^sshd")),
)


def _kind(pid: int) -> str:
    line = command_line(pid).strip()
    if not line:
        return "no command line (kernel threads, exited processes)"
    for kind, pattern in _KINDS:
        if pattern.search(line):
            if kind == "chromium":
                typed = re.search(r"--type=([\w-]+)", line)
                return f"chromium {typed.group(1) if typed else 'browser'}"
            return kind
    return "other: " + line.split(" ", 1)[0].rsplit("/", 1)[-1][:30]


def _cpu_s(pid: int) -> tuple[str, float] | None:
    """(start time, CPU seconds so far) of `pid`, or None once it is gone."""
    fields = stat(pid)
    if fields is None:
        return None
    return fields[19], (int(fields[11]) + int(fields[12])) / _TICKS


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def kinds(command: list[str], every_s: float = 0.3) -> int:
    """Run `command`, then print the CPU seconds each kind of process spent meanwhile,
    and how many processes of that kind were seen."""
    first: dict[tuple[int, str], float] = {}  # what ran before the command: its CPU then
    for pid in _pids():
        if (cpu := _cpu_s(pid)) is not None:
            first[(pid, cpu[0])] = cpu[1]
    seen: dict[tuple[int, str], list] = {}
    busy, wall = busy_cpu_s(), time.monotonic()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        for pid in _pids():
            if (cpu := _cpu_s(pid)) is None:
                continue
            key = (pid, cpu[0])
            if key not in seen:
                seen[key] = [_kind(pid), first.get(key, 0.0), cpu[1]]
            seen[key][2] = cpu[1]
        time.sleep(every_s)
    totals: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for kind, start, last in seen.values():
        totals[kind] += last - start
        counts[kind] += 1
    print(
        f"\nsuite_cpu --kinds: {time.monotonic() - wall:.0f} s, "
        f"{busy_cpu_s() - busy:.0f} busy CPU-s of the machine; by kind of process:"
    )
    for kind, cpu_s in sorted(totals.items(), key=lambda kv: -kv[1]):
        if cpu_s >= 0.5:
            print(f"{cpu_s:8.1f} CPU-s  {counts[kind]:5d} processes  {kind}")
    return proc.returncode


def machine(command: list[str]) -> int:
    """Run `command`, then print the machine's core-seconds meanwhile: user, system,
    idle and stolen, and the cores busy on average."""
    before, wall = _ticks(), time.monotonic()
    code = subprocess.call(command)
    spent = [(now - then) / _TICKS for now, then in zip(_ticks(), before, strict=True)]
    wall = time.monotonic() - wall
    user, system = spent[0] + spent[1], spent[2] + spent[5] + spent[6]
    idle, steal = spent[3] + spent[4], spent[7]
    print(
        f"\nsuite_cpu --machine: {wall:.0f} s on {os.cpu_count()} cores; core-seconds: "
        f"user {user:.0f}, system {system:.0f}, idle {idle:.0f}, stolen {steal:.0f}; "
        f"{(user + system) / wall:.2f} cores busy on average"
    )
    return code


if __name__ == "__main__":
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--timeline", nargs="+", metavar="TSV", help=timeline.__doc__)
    mode.add_argument("--kinds", action="store_true", help=kinds.__doc__)
    mode.add_argument("--machine", action="store_true", help=machine.__doc__)
    parser.add_argument("--last", type=float, default=120.0, help="seconds at the end")
    parser.add_argument("command", nargs="*", help="with --kinds, --machine: the command")
    args = parser.parse_args()
    if args.kinds:
        sys.exit(kinds(args.command))
    if args.machine:
        sys.exit(machine(args.command))
    timeline(args.timeline, args.last)
