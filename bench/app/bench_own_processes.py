"""The web server's answer time while the local host is captured (issue 41).

Usage: python bench/app/bench_own_processes.py [--seconds S] [--rate HZ]

A `make run`-like flamedeck (bench/app/hostile_server.py: `manage.py serve`, SQLite, the
embedded broker) and a stand-in training job (four busy Python threads) run here.
`GET /api/runs/` is timed back to back (one client, an operator's token) for S
seconds at a time:
- idle: nothing captured;
- what an operator may do: asking for a blocking 2,000 Hz native capture of the web
  server is refused (403, printed); a blocking 2,000 Hz native capture of the
  training job on the same machine is taken, and the web server is timed meanwhile;
- what a host admin gets by default on the web server: non-blocking, no native;
- a host admin who asks for blocking on the web server (what the review measured,
  which operators can no longer do).
Each line: requests answered, median, p95 and max in ms. docs/figures.md quotes a run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "app"))

from hostile_server import USERS, Server  # noqa: E402

HOST_ADMIN = """
from django.contrib.auth.models import Group, User
from profiles.defaults import operators_group_ensure
from runs.permissions import HOST_ADMINS_GROUP
admin = User.objects.create_user("hostadmin", password="hostadmin-pass")
admin.groups.add(operators_group_ensure(), Group.objects.get(name=HOST_ADMINS_GROUP))
"""
JOB = """
import threading, time
def work():
    while True:
        sum(i * i for i in range(20000))
for _ in range(4):
    threading.Thread(target=work, daemon=True).start()
time.sleep(3600)
"""


def timed_gets(base: str, headers: dict, seconds: float) -> list[float]:
    """Back-to-back requests, a connection each: a kept-alive connection to runserver
    adds loopback's 40 ms delayed ACK to every answer and hides the server's time."""
    took: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        response = requests.get(f"{base}/api/runs/", headers=headers, timeout=60)
        took.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.status_code
    return took


def line(label: str, took: list[float]) -> None:
    ordered = sorted(took)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    print(
        f"  {label:<58} {len(took):>5} requests, median {statistics.median(took):6.1f} ms, "
        f"p95 {p95:6.1f} ms, max {max(took):7.1f} ms",
        flush=True,
    )


def capture(base: str, headers: dict, body: dict) -> requests.Response:
    return requests.post(f"{base}/api/captures/", json=body, headers=headers, timeout=60)


def while_sampling(server: Server, headers: dict, body: dict, seconds: float) -> list[float]:
    """Start a capture, wait until py-spy samples, time the web server, cancel it."""
    made = capture(server.base, headers, body)
    assert made.status_code == 201, made.text
    url = f"{server.base}/api/captures/{made.json()['id']}/"
    deadline = time.monotonic() + 60
    while requests.get(url, headers=headers, timeout=30).json()["status"] == "queued":
        assert time.monotonic() < deadline, "the capture never started"
        time.sleep(0.2)
    time.sleep(1.5)  # py-spy attached and sampling
    took = timed_gets(server.base, headers, seconds)
    requests.post(f"{url}cancel/", headers=headers, timeout=30)
    while (body := requests.get(url, headers=headers, timeout=30).json())["status"] in (
        "queued", "running", "parsing"):  # fmt: skip
        time.sleep(0.5)
    stats, settings = body.get("stats") or {}, body["settings"]
    sampled = (stats.get("lag") or {}).get("samples_reported") or stats.get("total_samples")
    mode = "non-blocking" if settings.get("nonblocking") else "blocking"
    mode += ", native" if settings.get("native") else ""
    print(f"    (capture #{body['id']} {body['status']}, {mode}: {sampled} samples)")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rate", type=int, default=2000)
    args = parser.parse_args()
    server = Server({"FLAMEDECK_MAX_DURATION_S": "600"})
    job = subprocess.Popen([sys.executable, "-c", JOB])
    try:
        server.start()
        server.manage("shell", "-c", HOST_ADMIN)
        operator = {"Authorization": f"Token {server.token('operator')}"}
        admin = {"Authorization": f"Token {server.token('hostadmin')}"}
        (web, *_), _ = server.pids()
        blocking = {"duration": 120, "rate": args.rate, "native": True, "nonblocking": False}
        print(f"web server pid {web}, training job pid {job.pid}, {args.seconds:g} s each:")
        timed_gets(server.base, operator, 2)  # warm up
        line("idle", timed_gets(server.base, operator, args.seconds))
        refused = capture(server.base, operator, {"host": "local", "pid": web, **blocking})
        print(f"  operator, blocking {args.rate} Hz of the web server: {refused.status_code} "
              f"{refused.json().get('detail', '')[:110]}…")  # fmt: skip
        took = while_sampling(server, operator, {"host": "local", "pid": job.pid, **blocking},
                              args.seconds)  # fmt: skip
        line(f"operator: blocking {args.rate} Hz native of the training job", took)
        took = while_sampling(server, admin, {"host": "local", "pid": web, "duration": 120,
                                              "rate": args.rate}, args.seconds)  # fmt: skip
        line(f"host admin, defaults: non-blocking {args.rate} Hz of the web server", took)
        took = while_sampling(server, admin, {"host": "local", "pid": web, **blocking},
                              args.seconds)  # fmt: skip
        line(f"host admin asking: blocking {args.rate} Hz native of the web server", took)
        line("idle again", timed_gets(server.base, operator, args.seconds))
    finally:
        job.kill()
        server.stop()


if __name__ == "__main__":
    assert USERS  # the operator and viewer come from hostile_server
    main()
