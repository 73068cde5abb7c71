"""The whole-job window on `make run`'s defaults: SQLite and the filesystem broker (no
PostgreSQL, no Redis), the capture worker's threads pool and the analysis prefork pool
that `make run` starts. It runs the whole-job bench for 8 real processes in a process
of its own (this test process is bound to PostgreSQL when CI has it) and holds its
figures to the requirement: all done, every py-spy sampling within 1 s of the others,
all final within duration + 5 s of the request."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DURATION_S = 5  # as in test_group_window_e2e.py: the same bounds, half the bench's window
LINE = re.compile(
    r"(\d+) processes on 1 host\(s\): (\d+)/\d+ done, start skew ([\d.]+) s, "
    r"request to all done ([\d.]+) s"
)


# `alone`: on a machine loaded by the rest of the suite the analyses after the window
# are what run late. Beside four test processes starting their browsers and databases
# this case took 10.3 s for a 5 s window (sampling began 2.1-2.3 s after the request, the
# last analysis ended at 9.5 s): a figure of the machine's load, not of the product.
@pytest.mark.alone
@pytest.mark.services
def test_eight_ranks_sample_in_one_window_on_make_runs_embedded_defaults():
    outside = ("DATABASE_URL", "REDIS_URL", "CELERY_QUEUE", "FLAMEDECK_VAR_DIR")
    env = {k: v for k, v in os.environ.items() if k not in outside}
    done = subprocess.run(
        [sys.executable, "bench/bench_group.py", "--embedded", "--sizes", "8"]
        + ["--duration", str(DURATION_S)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "(sqlite, filesystem broker" in done.stdout, done.stdout
    match = LINE.search(done.stdout)
    assert match, done.stdout
    processes, finished, skew, wall = (float(g) for g in match.groups())
    assert (processes, finished) == (8, 8), done.stdout
    assert skew < 1.0, done.stdout
    assert wall < DURATION_S + 5, done.stdout
