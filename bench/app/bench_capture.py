"""Capture pipeline benchmark: API request → worker → ssh → py-spy → done.

1. Overhead of a 5-second capture over loopback SSH, from the API request to `done`
   (target: under 1.5 s beyond the 5 s of sampling), median of several.
2. 20 captures requested at once against 2 workers: all must finish `done`.

Uses real parts: PostgreSQL and Redis when they answer on 127.0.0.1 (else SQLite and
the filesystem broker), OpenSSH's sshd on loopback, Celery workers, py-spy.
Run: .venv/bin/python bench/app/bench_capture.py [--repeat 3] [--burst 20]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from config.env import local_port_answers  # noqa: E402


def _configure() -> None:
    var = tempfile.mkdtemp(prefix="flamedeck-bench-")
    os.environ["FLAMEDECK_VAR_DIR"] = var
    os.environ["CELERY_QUEUE"] = f"flamedeck-bench-{os.getpid()}"
    if local_port_answers(5432):
        subprocess.run(
            [
                "psql",
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-qc",
                "DROP DATABASE IF EXISTS flamedeck_bench",
            ],
            check=True,
        )
        subprocess.run(
            ["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", "CREATE DATABASE flamedeck_bench"],
            check=True,
        )
        os.environ["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/flamedeck_bench"
    if local_port_answers(6379):
        os.environ["REDIS_URL"] = "redis://127.0.0.1:6379/14"
    os.environ["ALLOWED_HOSTS"] = "testserver,127.0.0.1"
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"


def _wait(ids: list[int], timeout_s: float) -> dict[int, tuple[str, float]]:
    from profiles.models import Capture

    deadline = time.monotonic() + timeout_s
    finished: dict[int, tuple[str, float]] = {}
    while len(finished) < len(ids) and time.monotonic() < deadline:
        for capture in Capture.objects.filter(pk__in=ids).exclude(pk__in=list(finished)):
            if capture.is_final:
                finished[capture.pk] = (capture.status, time.monotonic())
        time.sleep(0.05)
    return finished


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--burst", type=int, default=20)
    parser.add_argument("--duration", type=int, default=5)
    args = parser.parse_args()
    _configure()
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from runs.models import Host
    from runs.tokens import api_token_create
    from tests.support.sshd import ALIAS, SSHServer
    from tests.support.worker import WorkerProcess
    from tests.support.workload import start_workload

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_superuser("bench", password="x")  # noqa: S106
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    sshd = SSHServer().start()
    Host.objects.create(
        name="loop", transport="ssh", address=ALIAS, py_spy=Host.objects.get(name="local").py_spy
    )
    workload = start_workload(threads=2)
    # The burst gets a process per capture: py-spy attaches to a process once (409).
    targets = [start_workload(threads=1) for _ in range(args.burst)]
    logdir = Path(os.environ["FLAMEDECK_VAR_DIR"])
    env = {"FLAMEDECK_SSH_CONFIG": str(sshd.config)}
    workers = [
        WorkerProcess(logdir / f"worker{n}.log", concurrency=1, name=f"bench{n}", env=env)
        for n in range(2)
    ]
    db = "postgresql" if "DATABASE_URL" in os.environ else "sqlite"
    broker = "redis" if "REDIS_URL" in os.environ else "filesystem"
    print(f"flamedeck capture benchmark ({db}, {broker} broker, 2 workers, loopback ssh)")
    try:
        overheads = []
        for _ in range(args.repeat):
            t0 = time.monotonic()
            response = client.post(
                "/api/captures/",
                {"host": "loop", "pid": workload.pid, "duration": args.duration, "rate": 50},
                content_type="application/json",
            )
            capture_id = response.json()["id"]
            status, t1 = _wait([capture_id], 120)[capture_id]
            assert status == "done", status
            overheads.append(t1 - t0 - args.duration)
        print(
            f"  {args.duration}-s capture, API request to done: overhead median "
            f"{statistics.median(overheads):.2f} s (runs: "
            f"{', '.join(f'{o:.2f}' for o in overheads)}; target < 1.5 s)"
        )
        t0 = time.monotonic()
        ids = [
            client.post(
                "/api/captures/",
                {"host": "loop", "pid": target.pid, "duration": 2, "rate": 50},
                content_type="application/json",
            ).json()["id"]
            for target in targets
        ]
        finished = _wait(ids, 600)
        done = sum(1 for status, _ in finished.values() if status == "done")
        wall = max(t for _, t in finished.values()) - t0 if finished else float("nan")
        print(
            f"  {args.burst} captures of 2 s at once on 2 workers: {done}/{args.burst} done "
            f"in {wall:.1f} s (ideal {args.burst * 2 / 2:.0f} s of sampling)"
        )
    finally:
        for worker in workers:
            worker.stop()
        for process in (workload, *targets):
            process.stop()
        sshd.cleanup()


if __name__ == "__main__":
    main()
