"""Serve the dashboard and a Celery worker (with beat) beside it; Ctrl-C stops both."""

import os
import signal
import subprocess
import sys
import time

from django.core.management.base import BaseCommand


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = "Run the web server and a Celery worker together (the embedded default)."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--concurrency", type=int, default=2)

    def handle(self, *args, port: int, host: str, concurrency: int, **options):
        python = sys.executable
        web = [python, "manage.py", "runserver", f"{host}:{port}", "--noreload"]
        worker = [
            python,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--beat",
            "-l",
            "info",
            "--concurrency",
            str(concurrency),
            "--schedule",
            os.path.join(os.environ.get("FLAMEDECK_VAR_DIR", "var"), "celerybeat-schedule"),
        ]
        children = [subprocess.Popen(worker), subprocess.Popen(web)]
        self.stdout.write(f"flamedeck: http://{host}:{port}/ (Ctrl-C stops the server and worker)")
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            while all(child.poll() is None for child in children):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self._stop(children)

    def _stop(self, children: list[subprocess.Popen]) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
        self.stdout.write("flamedeck: stopped")
