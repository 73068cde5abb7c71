"""Process-tree checks from /proc (no psutil): what runs under a pid, what is alive."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path


def stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (the state first), or None."""
    with contextlib.suppress(OSError):
        # The command name may hold spaces or parentheses; the state follows the last ')'.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return None


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    fields = stat(pid)
    return fields is not None and fields[0] != "Z"


def pids() -> list[int]:
    """Every pid in /proc now. A listing, not a glob: pathlib's glob stats each entry and
    raises ProcessLookupError when a process exits between the listing and the stat."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _children_by_parent() -> dict[int, list[int]]:
    """Every process on the machine (zombies included) under its parent's pid."""
    parents: dict[int, list[int]] = {}
    for pid in pids():
        fields = stat(pid)
        if fields is not None:
            parents.setdefault(int(fields[1]), []).append(pid)
    return parents


def children(pid: int) -> set[int]:
    """The direct children of `pid`, zombies included: a child that was killed but
    never reaped is still one."""
    return set(_children_by_parent().get(pid, []))


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`."""
    parents = _children_by_parent()
    found, queue = [], [pid]
    while queue:
        below = parents.get(queue.pop(), [])
        found += below
        queue += below
    return [p for p in found if alive(p)]


def command_line(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


def wait_until(condition, timeout_s: float, poll_s: float = 0.1) -> bool:
    """Poll `condition()` until it holds or `timeout_s` passes; return its last value."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(poll_s)
    return bool(condition())


def pyspy_pids(pid: int) -> list[int]:
    """py-spy processes (record or dump) attached to `pid` on this machine."""
    found = subprocess.run(["pgrep", "-f", f"py-spy (record|dump).* --pid {pid}( |$)"],
                           capture_output=True, text=True)  # fmt: skip
    return [int(p) for p in found.stdout.split()]


@contextlib.contextmanager
def sleepers(count: int):
    """`count` real processes that sleep until the block ends; yields their PIDs."""
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
             for _ in range(count)]  # fmt: skip
    try:
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
