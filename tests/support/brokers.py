"""Brokers for fault tests: point this process's Celery app elsewhere, and a private
redis-server a test may stop and restart (never the shared one on 6379)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator

from config.env import local_port_answers
from tests.support.sshd import free_port


def _reset_pools(app) -> None:
    app._pool = None
    app.amqp._producer_pool = None


@contextlib.contextmanager
def broker_url(url: str) -> Iterator[None]:
    """Send this process's task messages to `url` for the duration of the block."""
    from config.celery import app

    old = app.conf.broker_url
    app.conf.broker_url = url
    _reset_pools(app)
    try:
        yield
    finally:
        app.conf.broker_url = old
        _reset_pools(app)


class PrivateRedis:
    """A redis-server on its own loopback port, no persistence: a restart loses
    every message, as a crashed broker without AOF would."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> PrivateRedis:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--save", "", "--appendonly", "no", "--loglevel", "warning"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not local_port_answers(self.port):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"redis-server did not listen on {self.port}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self, down_s: float = 1.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()
