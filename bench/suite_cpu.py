"""Where the test suite's time goes: a pytest plugin that writes, per test, its wall
seconds and the whole machine's busy CPU seconds around it (from /proc/stat, so the
PostgreSQL server, Chromium and every process a test starts are counted, which no
Python profile shows), then prints the files that cost the most.

Run it in one process with nothing else running (the machine's CPU is what it reads):

    CI=true PYTHONPATH=bench .venv/bin/python -m pytest -p suite_cpu -n 0 -q

`SUITE_CPU_OUT` names the TSV (default var/suite_cpu.tsv; nodeid, wall, CPU-s, start
and end in seconds since the epoch). Under pytest-xdist (`-n 2`) each process writes
its own (`suite_cpu.gw0.tsv`, …): the CPU column then counts the other processes' tests
too, but the start and end times show when each process ran what, and `--timeline`
in `python bench/suite_cpu.py --timeline var/suite_cpu.gw*.tsv` prints the busy
processes minute by minute and what ran in the last minutes. The figures it gave are
in docs/figures.md#where-the-suites-time-goes.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

_TICKS = os.sysconf("SC_CLK_TCK")
_OUT = Path(os.environ.get("SUITE_CPU_OUT", "var/suite_cpu.tsv"))
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    _OUT = _OUT.with_suffix(f".{_WORKER}{_OUT.suffix}")
_rows: list[tuple[str, float, float, float, float]] = []


def busy_cpu_s() -> float:
    """Busy CPU seconds of the whole machine since boot (every core, not idle or iowait)."""
    with open("/proc/stat") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICKS


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall, start = busy_cpu_s(), time.monotonic(), time.time()
    yield
    _rows.append((item.nodeid, time.monotonic() - wall, busy_cpu_s() - cpu, start, time.time()))


def pytest_sessionfinish(session):
    if not _rows:
        return
    _OUT.parent.mkdir(parents=True, exist_ok=True)
    _OUT.write_text(
        "".join(f"{n}\t{w:.3f}\t{c:.3f}\t{s:.3f}\t{e:.3f}\n" for n, w, c, s, e in _rows)
    )
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for nodeid, wall, cpu, _, _ in _rows:
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
    runs = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            nodeid, _, _, start, end = line.split("\t")
            runs.append((Path(path).suffixes[-2].strip("."), nodeid, float(start), float(end)))
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


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=timeline.__doc__)
    parser.add_argument("--timeline", nargs="+", required=True, metavar="TSV")
    parser.add_argument("--last", type=float, default=120.0, help="seconds at the end")
    args = parser.parse_args()
    timeline(args.timeline, args.last)
