"""`run()`: the one function that starts a process for flamedeck."""

from __future__ import annotations

import contextlib
import mmap
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Completed:
    """What `run()` saw of one process."""

    returncode: int
    stdout: bytes | mmap.mmap
    """What the process printed: bytes, or past `spool_over_bytes` a read-only map of
    the file it was spooled to (it finds and slices as bytes do)."""
    stderr: str
    elapsed_s: float
    stopped: Literal["completed", "stopped", "killed"]
    trigger: Literal["should_stop", "timeout"] | None = None

    @property
    def text(self) -> str:
        """stdout decoded as UTF-8 (undecodable bytes replaced)."""
        return bytes(self.stdout).decode(errors="replace")


def _pump(pipe: Any, sink: Any, events: queue.Queue | None, start: float) -> None:
    """Copy `pipe` into `sink` (a list, or a file), each line to `events` too."""
    keep = sink.append if isinstance(sink, list) else sink.write
    for chunk in iter(pipe.readline, b""):
        try:
            keep(chunk)
        except ValueError:  # the spool was closed: run() gave up on this pipe
            break
        if events is not None:
            events.put((chunk, time.monotonic() - start))
    if events is not None:
        events.put(None)


def _spooled(sink: Any) -> bytes | mmap.mmap:
    """What a spool holds: bytes while it stayed in memory, else a map of its file
    (file pages the kernel can drop, not the worker's heap)."""
    size = sink.tell()
    if not sink._rolled:  # noqa: SLF001 — SpooledTemporaryFile says whether it rolled over
        sink.seek(0)
        return sink.read()
    sink.flush()
    if not size:
        return b""
    return mmap.mmap(sink.fileno(), size, access=mmap.ACCESS_READ)


class _Lines:
    """stdout lines waiting for the caller's thread, and whether stdout has ended."""

    def __init__(self, on_line: Callable[[str, float], None] | None) -> None:
        self.events: queue.Queue = queue.Queue()
        self.on_line = on_line
        self.eof = False

    def deliver(self, proc: subprocess.Popen, wait_s: float) -> None:
        """Hand waiting lines to on_line; block up to wait_s for a line or, after EOF, the exit."""
        if self.eof:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=wait_s)
            return
        with contextlib.suppress(queue.Empty):
            item = self.events.get(timeout=wait_s)
            while item is not None:
                chunk, elapsed = item
                if self.on_line is not None:
                    self.on_line(chunk.decode(errors="replace").rstrip("\r\n"), elapsed)
                item = self.events.get_nowait()
            self.eof = True


def _kill_group(proc: subprocess.Popen, term_wait_s: float = 1.0) -> None:
    # SIGTERM first so the record script's traps can still remove its temp dir.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=term_wait_s)
            return
    with contextlib.suppress(OSError):
        proc.kill()


def _close(stream: Any) -> None:
    with contextlib.suppress(OSError, ValueError):
        if stream is not None:
            stream.close()


def run(
    argv: list[str],
    *,
    stdin_open: bool = True,
    timeout_s: float,
    on_line: Callable[[str, float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    feed: Callable[[], bytes] | None = None,
    poll_s: float = 0.2,
    grace_s: float = 5.0,
    spool_over_bytes: int | None = None,
) -> Completed:
    """Run one local argv (see `wrap`), streaming stdout lines to `on_line(line, elapsed_s)`.

    When `should_stop()` turns true or `timeout_s` passes, stdin is closed (the
    record script answers with SIGINT to py-spy); if the process is still alive
    `grace_s` later, its process group is killed. `feed()`, polled before each
    `should_stop()`, returns bytes to write to stdin (b"" for none). The callbacks run
    in the calling thread. Raises OSError when argv[0] cannot be started.
    `spool_over_bytes`: stdout past that size goes to a temporary file rather than the
    worker's memory (a host session that brings back many ranks' samples at once).
    """
    start = time.monotonic()
    stdin = subprocess.PIPE if stdin_open else subprocess.DEVNULL
    proc = subprocess.Popen(
        argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    out: Any = [] if spool_over_bytes is None else tempfile.SpooledTemporaryFile(spool_over_bytes)
    err: list[bytes] = []
    lines = _Lines(on_line)
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, out, lines.events, start), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, err, None, start), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    control = _Control(should_stop, feed)
    stopped, trigger = _supervise(proc, start + timeout_s, control, lines, poll_s, grace_s)
    elapsed = time.monotonic() - start
    for pump in pumps:
        pump.join(timeout=2)  # a leftover grandchild may hold a pipe; don't wait on it
    lines.deliver(proc, 0)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        _close(stream)
    stderr = b"".join(err).decode(errors="replace")
    if isinstance(out, list):
        return Completed(proc.returncode, b"".join(out), stderr, elapsed, stopped, trigger)
    with out:  # the map outlives the file, which was never linked anywhere
        stdout = _spooled(out)
    return Completed(proc.returncode, stdout, stderr, elapsed, stopped, trigger)


class _Control:
    """The caller's say while the process runs: lines for its stdin, and when to stop."""

    def __init__(
        self, should_stop: Callable[[], bool] | None, feed: Callable[[], bytes] | None
    ) -> None:
        self.should_stop = should_stop
        self.feed = feed

    def wants_stop(self, proc: subprocess.Popen) -> bool:
        if self.feed is not None:
            data = self.feed()
            if data and proc.stdin is not None:
                # A process that stopped reading is about to end: nothing left to tell it.
                with contextlib.suppress(OSError, ValueError):
                    proc.stdin.write(data)
                    proc.stdin.flush()
        return self.should_stop is not None and self.should_stop()


def _supervise(
    proc: subprocess.Popen,
    deadline: float,
    control: _Control,
    lines: _Lines,
    poll_s: float,
    grace_s: float,
) -> tuple[Literal["completed", "stopped", "killed"], Any]:
    stop_at: float | None = None
    trigger = None
    while proc.poll() is None:
        now = time.monotonic()
        if stop_at is None:
            if control.wants_stop(proc):
                trigger = "should_stop"
            elif now >= deadline:
                trigger = "timeout"
            if trigger:
                stop_at = now
                _close(proc.stdin)
        elif now - stop_at >= grace_s:
            _kill_group(proc)
            proc.wait()
            return "killed", trigger
        wait = poll_s if stop_at is not None else min(poll_s, max(0.0, deadline - now))
        lines.deliver(proc, wait)
    return ("stopped" if stop_at is not None else "completed"), trigger
