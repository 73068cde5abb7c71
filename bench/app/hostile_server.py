"""A `make run`-like flamedeck for bench/app/bench_hostile.py: a throwaway var/ (SQLite, the
embedded filesystem broker), `manage.py serve` (runserver, the capture and analysis
workers, beat) on a free loopback port, a viewer and an operator with sessions and
API tokens, and a sampler of the workers' memory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.procs import descendants  # noqa: E402 — one /proc walk for both
from tests.support.worker import _rss_kb  # noqa: E402

PY = sys.executable
USERS = """
from django.contrib.auth.models import Group, User
from profiles.defaults import operators_group_ensure
User.objects.create_user("viewer", password="viewer-pass")
op = User.objects.create_user("operator", password="operator-pass")
op.groups.add(operators_group_ensure())
"""


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """`manage.py serve` on a private var/, with the bench's environment."""

    def __init__(self, extra_env: dict[str, str]) -> None:
        self.var = Path(tempfile.mkdtemp(prefix="flamedeck-bench-hostile-"))
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env.update(FLAMEDECK_VAR_DIR=str(self.var), DJANGO_SETTINGS_MODULE="config.settings")
        env.update(PYTHONUNBUFFERED="1", **extra_env)
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.log = self.var / "serve.log"

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [PY, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True
        )
        if done.returncode:
            raise RuntimeError(f"manage.py {args[0]}: {done.stderr[-2000:]}")
        return done.stdout

    def start(self) -> Server:
        self.manage("migrate", "--noinput", "-v0")
        self.manage("bootstrap")
        self.manage("shell", "-c", USERS)
        argv = [PY, "manage.py", "serve", "--port", str(self.port), "--concurrency", "2"]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self._wait_ready()
        return self

    def _wait_ready(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.log.read_text()
            if text.count(" ready.") >= 2 and self._answers():
                return
            time.sleep(0.5)
        raise RuntimeError(f"serve did not start: {self.log.read_text()[-3000:]}")

    def _answers(self) -> bool:
        try:
            return requests.get(f"{self.base}/accounts/login/", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)

    def token(self, username: str) -> str:
        return self.manage("create_api_token", username).strip()

    def session(self, username: str, password: str) -> requests.Session:
        """A logged-in browser-like session (cookies, CSRF header for forms)."""
        session = requests.Session()
        page = session.get(f"{self.base}/accounts/login/", timeout=30)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        form = {"username": username, "password": password, "csrfmiddlewaretoken": token}
        response = session.post(f"{self.base}/accounts/login/", data=form, timeout=30)
        assert response.status_code == 200 and "logout" in response.text, response.text[:500]
        session.headers["X-CSRFToken"] = session.cookies["csrftoken"]
        return session

    def restarts(self) -> int:
        """How often the supervisor restarted a child (a worker that crashed)."""
        return self.log.read_text().count("restarting in")

    def pids(self) -> tuple[list[int], list[int]]:
        """(the web server's processes, every other process under serve: workers, beat,
        analysis children)."""
        tree = descendants(self.proc.pid)
        web = [pid for pid in tree if "runserver" in _cmdline(pid)]
        return web, [pid for pid in tree if pid not in web]


class MemoryWatch:
    """Samples serve's processes every 0.1 s: the peak RSS of the largest worker-side
    process (a worker, or an analysis child) and of the web server."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.peak_one_mb = self.peak_web_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            web, workers = self.server.pids()
            self.peak_web_mb = max([self.peak_web_mb, *map(_rss_mb, web)])
            self.peak_one_mb = max([self.peak_one_mb, *map(_rss_mb, workers)])
            time.sleep(0.1)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _rss_mb(pid: int) -> float:
    return _rss_kb(pid) / 1024
