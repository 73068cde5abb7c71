"""A real Python workload for py-spy: named CPU threads plus one waiting thread.

Threads `target-0` .. `target-{N-1}` run CPU work three functions deep
(`train_step` -> `forward` -> `matmul_like`) in bursts of 3 ms of its own CPU time,
each followed by 10 ms asleep in `train_step`; thread `waiter` blocks on an Event. A
target thread keeps about a fifth of a core busy, not all of one: a test that runs
several workloads (the fault matrix runs six) leaves this 2-core machine to the
product it tests. Without
`--idle` every sample py-spy keeps is in the CPU work.
Prints `workload ready pid=<pid>` once every thread runs.

Run: `python tests/support/workload.py [--threads N] [--exit-after SECONDS]`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve()


def matmul_like(size: int) -> int:
    total = 0
    for i in range(size):
        total += (i * i) % 7
    return total


def forward(size: int) -> int:
    return matmul_like(size) + matmul_like(size // 2)


BURST_CPU_S = 0.003
"""CPU seconds of work per burst, measured on the thread's own clock, so a thread is
busy the same share of the time on a fast machine as on a slow one (a fixed count of
iterations took 1.2 ms on one machine and 2 ms on another, and py-spy kept half as
many samples on the faster one)."""


def train_step(stop: threading.Event) -> None:
    while not stop.is_set():
        until = time.thread_time() + BURST_CPU_S
        while time.thread_time() < until:
            forward(2_000)
        time.sleep(0.010)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--exit-after", type=float, default=None)
    args = parser.parse_args()
    stop = threading.Event()
    for index in range(args.threads):
        name = f"target-{index}"
        threading.Thread(target=train_step, args=(stop,), name=name, daemon=True).start()
    threading.Thread(target=stop.wait, name="waiter", daemon=True).start()
    print(f"workload ready pid={os.getpid()}", flush=True)
    stop.wait(args.exit_after)  # None waits until killed
    stop.set()


class Workload:
    """A running workload process; use as a context manager or call `stop()`."""

    def __init__(self, threads: int = 2, exit_after: float | None = None) -> None:
        argv = [sys.executable, str(SCRIPT), "--threads", str(threads)]
        if exit_after is not None:
            argv += ["--exit-after", str(exit_after)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("workload ready pid="):
            self.stop()
            raise RuntimeError(f"workload did not start: {line!r}")
        self.pid = int(line.split("=", 1)[1])
        self.threads = threads + 2  # the targets, the waiter and the main thread

    def exit_once_sampled(self, after_s: float, sampling: threading.Event) -> Workload:
        """End the workload (SIGTERM) `after_s` seconds after `sampling` is set: the
        test sets it when py-spy prints its sampling line for this PID, i.e. once
        py-spy has attached. A timer from the workload's own start (or from py-spy's
        process start) races the SSH connect and py-spy's attach on a loaded machine;
        a process gone before the attach is a failed capture (no such process), not
        one that exited mid-capture."""

        def end() -> None:
            if not sampling.wait(timeout=120):
                return  # never sampled: the test fails on its own assertions
            time.sleep(after_s)
            if self.proc.poll() is None:
                self.proc.terminate()

        threading.Thread(target=end, name=f"end-{self.pid}", daemon=True).start()
        return self

    def wait_exit(self, timeout_s: float) -> int:
        """Wait for the workload to exit on its own."""
        return self.proc.wait(timeout=timeout_s)

    def stop(self) -> None:
        """Kill the workload if it still runs."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self) -> Workload:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_workload(threads: int = 2, exit_after: float | None = None) -> Workload:
    """Start the workload as a subprocess and return once its threads run."""
    return Workload(threads=threads, exit_after=exit_after)


if __name__ == "__main__":
    main()


def pyspy_running(pid: int) -> bool:
    """True while a `py-spy record --pid PID` runs on this machine."""
    found = subprocess.run(["pgrep", "-f", f"py-spy record --pid {pid} "], capture_output=True)
    return found.returncode == 0
