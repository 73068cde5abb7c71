"""A stand-in rank of a hung job, in plain Python (no torch): cheap to start, and py-spy
dumps it like any rank. The real hangs (gloo ranks) are in bench/targets/hang_train.py.

- `--as waiter`: the main thread blocks in `all_reduce_wait`, on an Event that is never
  set, as ranks blocked in a collective do (one frame below `train_loop`);
- `--as locked`: the main thread polls a lock file that never goes away
  (`wait_for_lock`, `time.sleep`), the rank the others wait for;
- `--as stepping`: the main thread keeps stepping through `train_step` (a healthy rank);
- `--exit-after S`: the process ends after S seconds (a rank that dies between dumps).
Prints `rank ready pid=<pid>` once its main thread is where it was asked to be.

Run: `python tests/support/hung_ranks.py --as waiter`.
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


def all_reduce_wait(done: threading.Event) -> None:
    done.wait()


def wait_for_lock(path: str) -> None:
    while True:  # the lock file never goes away
        if not os.path.exists(path):
            return
        time.sleep(0.05)


def forward(n: int) -> int:
    return sum(i * i for i in range(n))


def train_step(step: int) -> int:
    return forward(2000 + step % 3000)


def train_loop(role: str) -> None:
    step = 0
    while True:
        if role == "waiter":
            all_reduce_wait(threading.Event())
        elif role == "locked":
            wait_for_lock(sys.executable)  # exists for as long as the process runs
        else:
            train_step(step)
            step += 1
            time.sleep(0.001)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--as", dest="role", choices=("waiter", "locked", "stepping"))
    parser.add_argument("--exit-after", type=float, default=0.0)
    args = parser.parse_args()
    if args.exit_after:
        threading.Timer(args.exit_after, lambda: os._exit(0)).start()
    print(f"rank ready pid={os.getpid()}", flush=True)
    train_loop(args.role)


class Rank:
    """A running stand-in rank, stopped by the test."""

    def __init__(self, role: str, exit_after: float = 0.0) -> None:
        argv = [sys.executable, str(SCRIPT), "--as", role]
        argv += ["--exit-after", str(exit_after)] if exit_after else []
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        assert line.startswith("rank ready"), line
        self.pid = self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


if __name__ == "__main__":
    main()
