"""bench/app/bench_group.py end to end at a small size with the py-spy stand-in: its `--json`
contract (docs: DESIGN's contract 3, the bench's docstring) and every rank done. On
`make run`'s defaults (SQLite, the filesystem broker), in a process of its own, with
two loopback sshd hosts and the app's real workers: about 25 s here."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"ranks", "hosts", "sampler", "skew_s", "final_s", "report_s", "worker_rss_mb", "workers"}


@pytest.mark.slow
@pytest.mark.sshd
@pytest.mark.services
def test_sixteen_stand_in_ranks_print_one_json_line_with_every_figure():
    outside = ("DATABASE_URL", "REDIS_URL", "CELERY_QUEUE", "FLAMEDECK_VAR_DIR")
    env = {k: v for k, v in os.environ.items() if k not in outside}
    argv = [sys.executable, "bench/app/bench_group.py", "--embedded", "--sizes", "16",
            "--sampler", "stand-in", "--duration", "2", "--json"]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout  # nothing but the figures on stdout
    figures = json.loads(lines[0])
    assert KEYS <= set(figures), figures
    assert (figures["ranks"], figures["hosts"], figures["sampler"]) == (16, 2, "stand-in")
    assert figures["done"] == 16 and figures["workers"] == 1, figures
    for key in ("skew_s", "final_s", "report_s", "worker_rss_mb"):
        assert isinstance(figures[key], float) and figures[key] >= 0, figures
    assert figures["final_s"] >= 2 and figures["worker_rss_mb"] > 10, figures
