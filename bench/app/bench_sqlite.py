"""SQLite under the embedded default: do concurrent writers hit "database is locked"?

Everything runs for real on one SQLite file (WAL) and the filesystem broker, no
PostgreSQL or Redis: gunicorn (2 workers x 4 threads), Celery workers as `make run`
starts them (64 capture threads, so the whole burst samples at once, heartbeats every
second; a prefork analysis pool) with embedded beat, management commands back to back
(`import_capture`, `prune_raw`, in this process) and the bench's own API clients. A
burst of 20 captures (2 s, py-spy on real processes through host `local`) is requested
at once while the clients poll. It counts captures by final status, HTTP 5xx answers,
failed commands and "database is locked" lines in every log.

Run: .venv/bin/python bench/app/bench_sqlite.py [--burst 20] [--artifacts database]
     [--capture-threads 64]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
SAMPLE = ROOT / "tests" / "data" / "pyspy" / "threads.txt"


def _configure() -> Path:
    var = Path(tempfile.mkdtemp(prefix="flamedeck-bench-sqlite-"))
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    os.environ.update(
        FLAMEDECK_VAR_DIR=str(var),
        DJANGO_SETTINGS_MODULE="config.settings",
        FLAMEDECK_SCHEDULE_TICK_S="1",
        CELERY_QUEUE=f"flamedeck-bench-{os.getpid()}",
    )
    return var


class Api:
    def __init__(self, base: str, token: str) -> None:
        self.base, self.token = base, token
        self.errors: list[str] = []

    def call(self, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 — loopback http only
            self.base + path,
            data,
            {"Authorization": f"Token {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            self.errors.append(f"{exc.code} {path}: {exc.read()[:200]!r}")
            return {}


def _commands_loop(stop: threading.Event, log: Path) -> dict[str, int]:
    """Another writer: management commands (`import_capture` analyses in-process and
    stores its artifacts; `prune_raw`), back to back on their own connection."""
    from django.core.management import call_command
    from django.db import connection

    counts = {"runs": 0, "failed": 0}
    steps = [["import_capture", str(SAMPLE)], ["prune_raw", "--budget-mb", "1000"]]
    with open(log, "w") as out:
        while not stop.is_set():
            try:
                call_command(*steps[counts["runs"] % len(steps)], stdout=out)
            except Exception as exc:  # noqa: BLE001 — counted and logged, like a cron job's
                counts["failed"] += 1
                out.write(f"{type(exc).__name__}: {exc}\n")
            counts["runs"] += 1
    connection.close()
    return counts


def _burst(api: Api, pids: list[int], burst: int) -> list[int]:
    def request(i: int) -> int | None:
        body = {"host": "local", "pid": pids[i % len(pids)], "duration": 2, "rate": 20}
        return api.call("/api/captures/", body).get("id")

    with ThreadPoolExecutor(max_workers=burst) as pool:
        return [i for i in pool.map(request, range(burst)) if i]


def _wait(api: Api, ids: list[int], timeout_s: float) -> dict[int, str]:
    final: dict[int, str] = {}
    deadline = time.monotonic() + timeout_s
    with ThreadPoolExecutor(max_workers=4) as pool:
        while len(final) < len(ids) and time.monotonic() < deadline:
            todo = [i for i in ids if i not in final]
            for capture_id, body in zip(
                todo, pool.map(lambda i: api.call(f"/api/captures/{i}/"), todo), strict=True
            ):
                if body.get("status") in ("done", "failed", "cancelled"):
                    final[capture_id] = body["status"]
            api.call("/api/runs/")
            time.sleep(0.2)
    return final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=20)
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--artifacts", default="filesystem", help="FLAMEDECK_ARTIFACTS")
    parser.add_argument(
        "--capture-threads", type=int, default=64, help="FLAMEDECK_CAPTURE_CONCURRENCY"
    )
    args = parser.parse_args()
    var = _configure()
    os.environ["FLAMEDECK_ARTIFACTS"] = args.artifacts
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from config.env import local_port_answers
    from runs.tokens import api_token_create
    from tests.support.worker import WorkerProcess
    from tests.support.workload import start_workload

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_superuser("bench", password="x")  # noqa: S106
    api = Api(f"http://127.0.0.1:{args.port}", api_token_create(user=user)[1])
    web_log = open(var / "gunicorn.log", "w")  # noqa: SIM115 — closed below
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "-b", f"127.0.0.1:{args.port}"]
        + ["-w", "2", "--threads", "4"],
        cwd=ROOT,
        stdout=web_log,
        stderr=subprocess.STDOUT,
    )
    # As `make run`: a threads pool for captures (every capture of the burst at once),
    # a prefork pool for analysis, beat.
    worker = WorkerProcess(var / "worker.log", concurrency=args.capture_threads, beat=True)
    # One process per capture: py-spy attaches to a process once (a second is a 409).
    workloads = [start_workload(threads=1) for _ in range(args.burst)]
    stop = threading.Event()
    result: dict[str, dict[str, int]] = {}
    commands = threading.Thread(
        target=lambda: result.update(cmd=_commands_loop(stop, var / "commands.log"))
    )
    try:
        while not local_port_answers(args.port):
            time.sleep(0.2)
        commands.start()
        started = time.monotonic()
        ids = _burst(api, [w.pid for w in workloads], args.burst)
        final = _wait(api, ids, 600)
        wall = time.monotonic() - started
    finally:
        stop.set()
        commands.join() if commands.is_alive() else None
        worker.stop()
        web.terminate()
        web.wait(timeout=30)
        web_log.close()
        for workload in workloads:
            workload.stop()
    locked = {
        log.name: log.read_text(errors="replace").count("database is locked")
        for log in (var / "gunicorn.log", var / "worker.log", var / "commands.log")
    }
    statuses = {s: list(final.values()).count(s) for s in sorted(set(final.values()))}
    print(
        json.dumps(
            {
                "artifacts": args.artifacts,
                "captures_requested": args.burst,
                "captures_created": len(ids),
                "final_statuses": statuses,
                "wall_s": round(wall, 1),
                "http_errors": len(api.errors),
                "management_commands": result.get("cmd"),
                "database_is_locked": locked,
                "logs": str(var),
            }
        )
    )
    for error in api.errors[:5]:
        print("  ", error)


if __name__ == "__main__":
    main()
