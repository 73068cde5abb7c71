"""A small process supervisor for `manage.py serve`: start children, restart one
that dies (with backoff), stop them all.

Each child runs in a process group of its own, so a stop (or a restart after a
crash) ends everything under it: a Celery worker's pool processes, beat. Children
also get SIGTERM from the kernel if the supervisor itself is killed (Linux
PR_SET_PDEATHSIG), so nothing keeps scheduling with no supervisor above it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

PR_SET_PDEATHSIG = 1
STABLE_S = 60.0  # a child that ran this long starts its backoff over
MAX_BACKOFF_S = 30.0


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def backoff_s(failures: int) -> float:
    """1, 2, 4, ... seconds before restarting a child that failed `failures` times in a row."""
    return min(MAX_BACKOFF_S, 2.0 ** max(0, failures - 1))


@dataclass
class Child:
    """One supervised command."""

    name: str
    argv: list[str]
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    failures: int = 0
    restart_at: float | None = None
    restarts: int = 0
    env: dict[str, str] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None


def kill_group(pid: int, sig: int) -> bool:
    """Signal a whole process group; False when nothing is left in it."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Supervisor:
    """Keep `children` running until `stop()`; `say(line)` reports what happens.

    `clock` gives the seconds that starts, backoff and uptime are measured in (tests
    pass their own, so a 30 s backoff or a minute of uptime needs no waiting)."""

    def __init__(
        self,
        children: list[Child],
        say: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.children = children
        self.say = say
        self.clock = clock
        self.stopping = False

    def start(self, child: Child) -> None:
        child.proc = subprocess.Popen(
            child.argv, start_new_session=True, preexec_fn=_die_with_parent, env=child.env
        )
        child.started_at = self.clock()
        child.restart_at = None
        self.say(f"started {child.name} pid {child.proc.pid}")

    def reap(self, child: Child, now: float) -> None:
        """A child that exited: sweep its group, schedule its restart with backoff."""
        code = child.proc.returncode if child.proc else None
        if child.proc is not None:
            kill_group(child.proc.pid, signal.SIGKILL)  # orphaned pool processes
        ran = now - child.started_at
        child.failures = 1 if ran >= STABLE_S else child.failures + 1
        delay = backoff_s(child.failures)
        child.restart_at = now + delay
        child.restarts += 1
        self.say(f"{child.name} pid {child.pid} exited ({code}); restarting in {delay:.0f} s")
        child.proc = None

    def tick(self) -> None:
        now = self.clock()
        for child in self.children:
            if child.proc is not None and child.proc.poll() is not None:
                self.reap(child, now)
            if child.proc is None and child.restart_at is not None and now >= child.restart_at:
                self.start(child)

    def run(self, poll_s: float = 0.2) -> None:
        for child in self.children:
            self.start(child)
        while not self.stopping:
            self.tick()
            time.sleep(poll_s)
        self.stop_all()

    def stop_all(self, grace_s: float = 10.0) -> None:
        """SIGTERM every child (a Celery worker then stops its own pool); SIGKILL
        whatever is left in their groups after `grace_s`."""
        running = [c for c in self.children if c.proc is not None]
        for child in running:
            with contextlib.suppress(OSError):
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for child in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        for child in running:
            # The leader may be gone while its pool processes linger: sweep the group.
            kill_group(child.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(timeout=5)
        self.say("stopped")
