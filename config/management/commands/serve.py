"""Serve the dashboard with Celery workers for every queue and beat beside it, and
keep them running: a child that dies is restarted (with backoff) while the others
carry on; Ctrl-C or SIGTERM stops them all, process groups included.

`--workers-only` leaves out the web server (`make worker` on a second machine).
"""

import os
import signal
import sys

from django.conf import settings
from django.core.management.base import BaseCommand

from config.supervisor import Child, Supervisor


def _celery(*args: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "config", *args]


def worker_children(concurrency: int) -> list[Child]:
    """One worker per kind of work, each with the pool that suits it: a threads pool on
    the default and capture queues (waiting on remote samplers, many at once) and a
    prefork pool on the analysis queue (parsing is CPU work, one process per core)."""
    default = settings.CELERY_TASK_DEFAULT_QUEUE
    capture = getattr(settings, "FLAMEDECK_CAPTURE_QUEUE", None)
    analysis = getattr(settings, "FLAMEDECK_ANALYSIS_QUEUE", None)
    waiting = ",".join(q for q in (default, capture) if q)
    # Waiting on remote samplers is I/O: many threads, as many as the request side
    # counts on for a whole-job capture's hosts.
    threads = settings.FLAMEDECK_CAPTURE_CONCURRENCY
    queues = [("capture", waiting, "threads", threads, [])]
    if analysis:
        # Analyses are short: reserve a few per process instead of a broker trip each.
        queues.append(
            ("analysis", analysis, "prefork", concurrency, ["--prefetch-multiplier", "8"])
        )
    return [
        Child(
            f"worker-{name}",
            _celery(
                "worker",
                "-l",
                "info",
                "-Q",
                queue,
                "--pool",
                pool,
                "--concurrency",
                str(count),
                "-n",
                f"{name}@%h",
                "--without-gossip",
                "--without-mingle",
                *extra,
            ),
        )  # fmt: skip
        for name, queue, pool, count, extra in queues
    ]


def beat_child() -> Child:
    schedule = os.path.join(str(settings.VAR_DIR), "celerybeat-schedule")
    return Child("beat", _celery("beat", "-l", "info", "--schedule", schedule))


def web_child(host: str, port: int) -> Child:
    manage = os.path.join(str(settings.BASE_DIR), "manage.py")
    return Child("web", [sys.executable, manage, "runserver", f"{host}:{port}", "--noreload"])


class Command(BaseCommand):
    help = "Run the web server, a Celery worker per queue and beat, supervised."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument(
            "--concurrency",
            type=int,
            default=os.cpu_count() or 2,
            help="analysis worker processes (prefork, one per core)",
        )
        parser.add_argument(
            "--workers-only", action="store_true", help="no web server (a worker machine)"
        )
        parser.add_argument(
            "--no-beat", action="store_true", help="no beat (one machine runs it is enough)"
        )

    def handle(self, *args, port: int, host: str, concurrency: int, **options):
        children = worker_children(concurrency)
        if not options["no_beat"]:
            children.append(beat_child())
        if not options["workers_only"]:
            children.insert(0, web_child(host, port))
        supervisor = Supervisor(children, say=self._say)

        def stop(signum: int, frame: object) -> None:
            supervisor.stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        if not options["workers_only"]:
            self._say(f"http://{host}:{port}/ (Ctrl-C stops everything)")
        supervisor.run()

    def _say(self, line: str) -> None:
        self.stdout.write(f"flamedeck: {line}")
        self.stdout.flush()
