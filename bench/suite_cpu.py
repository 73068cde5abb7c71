"""Where the test suite's time goes: a pytest plugin that writes, per test, its wall
seconds and the whole machine's busy CPU seconds around it (from /proc/stat, so the
PostgreSQL server, Chromium and every process a test starts are counted, which no
Python profile shows), then prints the files that cost the most.

Run it in one process with nothing else running (the machine's CPU is what it reads):

    CI=true PYTHONPATH=bench .venv/bin/python -m pytest -p suite_cpu -n 0 -q

`SUITE_CPU_OUT` names the TSV (default var/suite_cpu.tsv; nodeid, wall, CPU-s). The
figures it gave are in docs/figures.md#where-the-suites-time-goes.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

_TICKS = os.sysconf("SC_CLK_TCK")
_OUT = Path(os.environ.get("SUITE_CPU_OUT", "var/suite_cpu.tsv"))
_rows: list[tuple[str, float, float]] = []


def busy_cpu_s() -> float:
    """Busy CPU seconds of the whole machine since boot (every core, not idle or iowait)."""
    with open("/proc/stat") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICKS


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = busy_cpu_s(), time.monotonic()
    yield
    _rows.append((item.nodeid, time.monotonic() - wall, busy_cpu_s() - cpu))


def pytest_sessionfinish(session):
    if not _rows:
        return
    _OUT.parent.mkdir(parents=True, exist_ok=True)
    _OUT.write_text("".join(f"{n}\t{w:.3f}\t{c:.3f}\n" for n, w, c in _rows))
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for nodeid, wall, cpu in _rows:
        entry = by_file[nodeid.split("::")[0]]
        entry[0], entry[1], entry[2] = entry[0] + wall, entry[1] + cpu, entry[2] + 1
    wall = sum(r[1] for r in _rows)
    cpu = sum(r[2] for r in _rows)
    print(f"\nsuite_cpu: {len(_rows)} tests, {wall:.0f} s of tests, {cpu:.0f} busy CPU-s")
    for path, (w, c, n) in sorted(by_file.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"{c:7.1f} CPU-s {w:7.1f} s {n:4d} tests  {path}")
    print(f"per test: {_OUT}")
