"""A burst on the embedded broker (`make run`'s filesystem transport), for
bench/app/bench_hostile.py: 3 processes send 500 `analyze_capture` messages (of captures
that do not exist: each task is a quick "skipped") while 3 worker processes consume
them. Counts the tasks that ran, and the workers that crashed (exited, or logged
kombu's "Unrecoverable error"). `root` runs it against another checkout's code."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEND = """
import django, sys
django.setup()
from profiles.captures.enqueue import analysis_enqueue
start, count = int(sys.argv[1]), int(sys.argv[2])
for i in range(start, start + count):
    analysis_enqueue(capture_id=10**9 + i)
"""


def _env(root: Path, var: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        FLAMEDECK_VAR_DIR=var,
        CELERY_QUEUE="burst",
        DJANGO_SETTINGS_MODULE="config.settings",
        PYTHONPATH=str(root),
        PYTHONUNBUFFERED="1",
    )
    return env


def _worker(root: Path, env: dict, index: int, log: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "info"]
    argv += ["-Q", "burst.analysis", "--pool", "solo", "-n", f"burst{index}@%h"]
    argv += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    with open(log, "w") as out:
        return subprocess.Popen(argv, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)


def _ran(logs: list[Path]) -> int:
    return sum(log.read_text().count("succeeded in") for log in logs)


def burst(root: str | None = None, total: int = 500) -> tuple[int, int, int, float]:
    """(sent, ran, crashes, seconds from the first send until the last ran)."""
    code_root = Path(root) if root else ROOT
    var = tempfile.mkdtemp(prefix="flamedeck-bench-burst-")
    env = _env(code_root, var)
    manage = [sys.executable, "manage.py", "migrate", "--noinput", "-v0"]
    subprocess.run(manage, cwd=code_root, env=env, check=True)
    logs = [Path(var) / f"worker-{i}.log" for i in range(3)]
    workers = [_worker(code_root, env, i, log) for i, log in enumerate(logs)]
    try:
        _wait(lambda: all(" ready." in log.read_text() for log in logs), 90)
        started = time.monotonic()
        share = [total // 3 + (i < total % 3) for i in range(3)]
        senders = [
            subprocess.Popen(
                [sys.executable, "-c", SEND, str(sum(share[:i])), str(share[i])],
                cwd=code_root,
                env=env,
            )  # fmt: skip
            for i in range(3)
        ]
        for sender in senders:
            sender.wait(300)
        alive = lambda: any(w.poll() is None for w in workers)  # noqa: E731
        _wait(lambda: _ran(logs) >= total or not alive(), 180)
        seconds = time.monotonic() - started
        time.sleep(2)  # a duplicate would show up by now
        crashes = sum(
            w.poll() is not None or "Unrecoverable error" in log.read_text()
            for w, log in zip(workers, logs, strict=True)
        )
        return total, _ran(logs), crashes, seconds
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.terminate()
                worker.wait(30)


def _wait(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)
