"""Run one analysis in a child process, under a time limit and a memory limit.

The engine spends long stretches in C (a regular expression, a big `str.split`)
where no signal reaches Python, and a worker that runs out of memory is killed with
its task and re-sent. So each analysis runs in a forked child: the child caps its own
address space (RLIMIT_AS: what the worker already maps plus `memory_mb`) and the
parent waits, calling `on_tick` about once a second (the capture's heartbeat) and
killing the child once `time_limit_s` has passed. Either limit ends in
BudgetExceeded naming it; the worker itself carries on with its next task.

The child only computes: it touches no database connection or storage (the caller
reads inputs before and stores results after), writes its result to a temp file
and leaves with os._exit, so nothing the parent holds is closed or flushed twice.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import resource
import select
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MEMORY_EXIT = 86  # the child ran out of its address space
ERROR_EXIT = 87  # the child's function raised; the exception is in the result file


class BudgetExceeded(Exception):
    """An analysis stopped at its time or memory limit; `cause` is
    `analysis_time_limit` or `analysis_memory_limit`, `str()` says which and how much."""

    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass(frozen=True)
class Usage:
    """What the child used."""

    seconds: float
    peak_mb: float


def megabytes(mb: int) -> str:
    return f"{mb // 1024} GB" if mb % 1024 == 0 else f"{mb} MB"


def run_bounded(
    func: Callable[..., Any],
    args: tuple,
    *,
    time_limit_s: float,
    memory_mb: int,
    on_tick: Callable[[], None] = lambda: None,
    tick_s: float = 1.0,
) -> tuple[Any, Usage]:
    """`func(*args)` in a child process; its result (pickled back) and its usage.

    An exception `func` raises is raised here; BudgetExceeded when a limit stops it.
    """
    fd, path = tempfile.mkstemp(prefix="flamedeck-analysis-")
    os.close(fd)
    started, parent = time.monotonic(), os.getpid()
    try:
        # The worker's objects in the permanent generation: the child's collections skip
        # them instead of touching (and so copying) every page of the worker's heap.
        gc.freeze()
        try:
            pid = os.fork()
        finally:
            if os.getpid() == parent:
                gc.unfreeze()
        if pid == 0:  # pragma: no cover — the child; coverage cannot follow it
            _child(func, args, path, memory_mb)
        status, rusage = _wait(pid, started + time_limit_s, on_tick, tick_s, time_limit_s)
        usage = Usage(round(time.monotonic() - started, 2), round(rusage.ru_maxrss / 1024, 1))
        return _outcome(status, path, memory_mb), usage
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _child(func: Callable[..., Any], args: tuple, path: str, memory_mb: int) -> None:
    code = ERROR_EXIT
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        limit = _address_space() + memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            result = ("ok", func(*args))
        except MemoryError:
            code = MEMORY_EXIT
            raise
        except BaseException as exc:  # noqa: BLE001 — handed to the parent as it is
            result = ("error", _picklable(exc))
        with open(path, "wb") as fh:
            pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
        code = 0
    except MemoryError:
        code = MEMORY_EXIT
    finally:
        os._exit(code)


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))  # noqa: S301 — our own bytes, made on the line
    except Exception:  # noqa: BLE001 — any exception that cannot cross, as text
        return RuntimeError(f"{type(exc).__name__}: {str(exc)[:300]}")
    return exc


def _address_space() -> int:
    """Bytes this process maps now (VmSize), the child's starting point."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _wait(
    pid: int, deadline: float, on_tick: Callable[[], None], tick_s: float, limit_s: float
) -> tuple[int, Any]:
    """The child's wait status and rusage; kills it at the deadline."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BudgetExceeded("analysis_time_limit", _time_message(limit_s))
            _sleep(pidfd, min(tick_s, remaining))
            done = os.wait4(pid, os.WNOHANG)
            if done[0] == pid:
                return done[1], done[2]
            on_tick()
    except BaseException:
        _kill(pid)
        raise
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _time_message(limit_s: float) -> str:
    return (
        f"Analysis stopped at its time limit of {limit_s:.0f} s (FLAMEDECK_ANALYSIS_TIME_S "
        "plus FLAMEDECK_ANALYSIS_S_PER_MB per MB of samples)."
    )


def _sleep(pidfd: int | None, seconds: float) -> None:
    """Until the child exits (pidfd readable) or `seconds` pass."""
    if pidfd is None:
        time.sleep(min(seconds, 0.05))
    else:
        select.select([pidfd], [], [], seconds)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _outcome(status: int, path: str, memory_mb: int) -> Any:
    code = os.waitstatus_to_exitcode(status)
    if code == MEMORY_EXIT:
        raise BudgetExceeded(
            "analysis_memory_limit",
            f"Analysis stopped at {megabytes(memory_mb)}, its memory limit "
            "(FLAMEDECK_ANALYSIS_MEMORY_MB).",
        )
    if code != 0:
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        raise RuntimeError(f"the analysis process died ({how})")
    with open(path, "rb") as fh:
        kind, value = pickle.load(fh)  # noqa: S301 — written by our own child just now
    if kind == "error":
        raise value
    return value
