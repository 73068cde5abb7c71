"""Serve the dashboard with Celery workers for every queue and beat beside it, and
keep them running: a child that dies is restarted (with backoff) while the others
carry on; Ctrl-C or SIGTERM stops them all, process groups included.

`--workers-only` leaves out the web server (`make worker` on a second machine).
"""

import os
import signal
import sys
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand

from config.env import env_list
from config.hosts import address_for_others, default_allowed_hosts, is_loopback
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
    # Waiting on remote samplers is I/O: many threads, one per host of a whole-job
    # capture; more processes split the CPU work after a window (docs/deployment.md).
    threads = settings.FLAMEDECK_CAPTURE_CONCURRENCY
    count = settings.FLAMEDECK_CAPTURE_WORKERS
    names = ["capture"] if count == 1 else [f"capture{i}" for i in range(1, count + 1)]
    # A host's task only with a free thread (Celery's switch, Redis only): host tasks
    # are acknowledged on receipt (a redelivery would start a second py-spy), so with
    # prefetching one worker took more hosts than its threads and held them past the
    # group's instant while another sat idle (2 workers, 128 hosts: one 40 s late).
    fair = ["--disable-prefetch"] if settings.CELERY_BROKER_URL.startswith("redis") else []
    queues = [(name, waiting, "threads", threads, fair) for name in names]
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


def where_to_reach(host: str, port: int) -> list[str]:
    """What `serve` says at start: the address to open and, bound beyond loopback, the
    address other machines use and the Host names it answers (ALLOWED_HOSTS)."""
    if is_loopback(host):
        return [
            f"http://{host}:{port}/ (Ctrl-C stops everything)",
            "only this machine can reach it; HOST=0.0.0.0 make run serves the nodes of a job",
        ]
    base_url = os.environ.get("FLAMEDECK_BASE_URL", "").strip()
    allowed = env_list("ALLOWED_HOSTS", []) or default_allowed_hosts(host, base_url)
    others = base_url.rstrip("/") or f"http://{address_for_others(host)}:{port}"
    lines = [
        f"{others}/ from other machines, bound to {host}:{port} (Ctrl-C stops everything)",
        f"ranks register with FLAMEDECK_URL={others}",
        "answers requests for: " + ", ".join(allowed),
    ]
    if "*" in allowed:
        lines.append("ALLOWED_HOSTS=* answers any Host header: name the server instead")
    elif urlsplit(others).hostname not in {h.strip("[]") for h in allowed}:  # set by hand
        lines.append(f"ALLOWED_HOSTS lacks {urlsplit(others).hostname}: it gets 400 Bad Request")
    else:
        lines.append("another name (a DNS alias, a proxy): add it to ALLOWED_HOSTS")
    return lines


class Command(BaseCommand):
    help = "Run the web server, a Celery worker per queue and beat, supervised."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--host",
            default=os.environ.get("HOST") or "127.0.0.1",
            help="address to bind: 127.0.0.1 (default, this machine only) or 0.0.0.0 "
            "(every address: the nodes of a job reach it)",
        )
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
        # The web server's settings answer the names of the address it binds; served
        # beyond loopback, links in watch messages use the address the nodes reach.
        os.environ["FLAMEDECK_BIND"] = host
        served = not is_loopback(host) and not options["workers_only"]
        if served and not os.environ.get("FLAMEDECK_BASE_URL", "").strip():
            os.environ["FLAMEDECK_BASE_URL"] = f"http://{address_for_others(host)}:{port}"
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
            for line in where_to_reach(host, port):
                self._say(line)
        supervisor.run()

    def _say(self, line: str) -> None:
        self.stdout.write(f"flamedeck: {line}")
        self.stdout.flush()
