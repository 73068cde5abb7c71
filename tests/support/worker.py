"""Real `celery -A config worker` processes as children, sharing the caller's database.

Used by the tests (on the test database) and by bench/app/bench_capture.py.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def worker_env() -> dict[str, str]:
    """Environment for a worker process that shares this test run's database."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        url = f"sqlite:///{db['NAME']}"
    else:
        url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=url,
        FLAMEDECK_VAR_DIR=str(settings.VAR_DIR),
        MEDIA_ROOT=str(settings.MEDIA_ROOT),
        PYTHONUNBUFFERED="1",
    )
    return env


def worker_argv(
    queues: list[str],
    pool: str,
    concurrency: int,
    name: str,
    beat_schedule: Path | None = None,
    app: str = "config",
) -> list[str]:
    """`celery -A config worker` consuming `queues` with `pool` (as `manage.py serve`)."""
    argv = [sys.executable, "-m", "celery", "-A", app, "worker", "-l", "info"]
    argv += ["-Q", ",".join(queues), "--pool", pool, "--concurrency", str(concurrency)]
    argv += ["--prefetch-multiplier", "8"] if pool == "prefork" else []
    argv += ["--disable-prefetch"] if pool == "threads" and _redis_broker() else []
    argv += ["-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    return argv + (["--beat", "--schedule", str(beat_schedule)] if beat_schedule else [])


def _redis_broker() -> bool:
    from django.conf import settings

    return settings.CELERY_BROKER_URL.startswith("redis")


class WorkerProcess:
    """The app's workers as child processes, stopped (or killed) by the test.

    Two workers, as `make worker` starts them: a threads pool on the default and
    capture queues (waiting on samplers; `concurrency` threads) and a prefork pool on
    the analysis queue (parsing; `analysis_concurrency` processes). All log to
    `log_path`. `app` is the Celery app module (tests.support.slow_analysis slows
    every analysis down). `capture_workers` > 1 starts that many threads-pool workers
    on the same queues, `concurrency` threads each (beat, if asked, runs in the first).
    """

    def __init__(
        self,
        log_path: Path,
        concurrency: int = 16,
        name: str = "w1",
        env: dict | None = None,
        beat: bool = False,
        analysis_concurrency: int = 2,
        app: str = "config",
        capture_workers: int = 1,
    ) -> None:
        self.log_path = log_path
        self.log = open(log_path, "a")  # noqa: SIM115 — closed in stop()
        # The queues the child's own settings name: an env with CELERY_QUEUE gets
        # queues of its own (as config/settings.py derives them), not this run's.
        default = (env or {}).get("CELERY_QUEUE", settings.CELERY_TASK_DEFAULT_QUEUE)
        schedule = log_path.with_suffix(".beat") if beat else None
        self.procs = [
            self._start(
                worker_argv(
                    [default, f"{default}.capture"],
                    "threads",
                    concurrency,
                    f"{name}-capture",
                    schedule,
                    app,
                ),
                env,
            ),
            self._start(
                worker_argv(
                    [f"{default}.analysis"],
                    "prefork",
                    analysis_concurrency,
                    f"{name}-analysis",
                    app=app,
                ),
                env,
            ),
        ]
        # More capture workers on the same queues, each a process of its own.
        self.procs += [
            self._start(
                worker_argv(
                    [default, f"{default}.capture"],
                    "threads",
                    concurrency,
                    f"{name}-capture{index}",
                    app=app,
                ),
                env,
            )
            for index in range(2, capture_workers + 1)
        ]
        self.proc = self.procs[0]
        self.capture_procs = [self.procs[0], *self.procs[2:]]
        self._wait_ready()

    def _start(self, argv: list[str], env: dict | None) -> subprocess.Popen:
        return subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**worker_env(), **(env or {})},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _wait_ready(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(proc.poll() is not None for proc in self.procs):
                self.stop()
                raise RuntimeError(f"celery worker exited: {self.log_path.read_text()[-2000:]}")
            if self.log_path.read_text().count(" ready.") >= len(self.procs):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"celery worker not ready: {self.log_path.read_text()[-2000:]}")

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    def tree(self) -> list[int]:
        """The workers' processes and everything they started."""
        from tests.support.procs import descendants

        return [pid for proc in self.procs for pid in (proc.pid, *descendants(proc.pid))]

    def ssh_clients(self) -> int:
        """How many `ssh` clients the workers run right now (one per connection)."""
        return sum(1 for pid in self.tree() if _argv0(pid) == "ssh")

    def rss_mb(self) -> float:
        """Resident memory of the workers' own processes (pool children included)."""
        total = 0
        for pid in self.tree():
            if _argv0(pid).endswith(("python", "python3", "celery")):
                total += _rss_kb(pid)
        return total / 1024

    def capture_rss_mb(self) -> float:
        """Resident memory of the capture workers (a threads pool: one process each),
        read from their own /proc entries only: cheap with thousands of processes."""
        return sum(_rss_kb(proc.pid) for proc in self.capture_procs) / 1024

    def capture_ssh_clients(self) -> int:
        """How many `ssh` clients the capture workers run right now, from their
        threads' /proc children lists (not a walk of every process on the machine)."""
        found = 0
        for proc in self.capture_procs:
            try:  # a listing, not a glob: a thread may end between listing and reading
                tasks = os.listdir(f"/proc/{proc.pid}/task")
            except OSError:
                continue
            for task in tasks:
                try:
                    pids = Path(f"/proc/{proc.pid}/task/{task}/children").read_text().split()
                except OSError:
                    continue
                found += sum(1 for pid in pids if _argv0(int(pid)) == "ssh")
        return found

    def kill(self) -> None:
        """SIGKILL both workers (main processes and pool children)."""
        for proc in self.procs:
            os.killpg(proc.pid, 9)
            proc.wait()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
        self.log.close()


def _argv0(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode().rsplit("/")[-1]
    except OSError:
        return ""


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
