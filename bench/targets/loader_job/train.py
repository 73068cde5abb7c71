"""A real 2-rank PyTorch DDP job (gloo, CPU) whose slow rank waits for its DataLoader.

One process per rank, started with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in
the environment. Every rank trains a small model under DistributedDataParallel on
batches from a DataLoader with `--workers` worker processes. On rank `--slow-rank`
each item's `__getitem__` runs `data.tokenize` (`--tokenize-ms`, the planted
slowdown) then `data.augment` (`--augment-ms`), both in bench/targets/loader_job/data.py, in
the worker processes: the rank's main thread waits for batches (data_wait) and the
other ranks wait for it in DDP's all-reduce. The other ranks' items cost nothing.

The job keeps its own clock of its workers: every `--clock-every` seconds each rank
prints
    clock rank=R t=EPOCH_S steps=N tokenize_s=S augment_s=S worker_s=S items=N
where `worker_s` is the seconds its workers lived, added up (each tick counts the
rank's live worker processes, read from /proc without reaping them, times the tick),
and `tokenize_s` / `augment_s` the seconds they spent in those calls (the workers add
them up in memory shared with the rank, as each item ends).

Workers are respawned every epoch unless `--persistent` (`persistent_workers=False`,
`--epoch-batches` batches an epoch). A worker that dies (a SIGKILL) ends its epoch
with the DataLoader's error; the rank prints `worker died` and goes on with a new
DataLoader's fresh workers. `--non-python-child` starts a `sleep` child (a non-Python
process under the rank, as py-spy#846 is about). Prints `ready rank=R pid=P` after
its first step; ends itself after `--seconds`. Needs torch (`make torchenv`).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import data
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset

FEATURES = 32
TEXT = " ".join(f"word{i}" for i in range(64))
TOKENIZE, AUGMENT, ITEMS = range(3)


class Items(Dataset):
    """Items whose preparation runs `tokenize` and `augment` when `slow`, timed on `clock`."""

    def __init__(self, length: int, slow: bool, args: argparse.Namespace, clock) -> None:
        self.length, self.slow, self.clock = length, slow, clock
        self.tokenize_s, self.augment_s = args.tokenize_ms / 1000, args.augment_ms / 1000

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        tokenized = augmented = 0.0
        if self.slow:
            start = time.perf_counter()
            tokens = data.tokenize(TEXT, self.tokenize_s)
            tokenized = time.perf_counter() - start
            data.augment(tokens, self.augment_s)
            augmented = time.perf_counter() - start - tokenized
        with self.clock.get_lock():
            self.clock[TOKENIZE] += tokenized
            self.clock[AUGMENT] += augmented
            self.clock[ITEMS] += 1
        return torch.full((FEATURES,), float(index % 7)), index % 10


def make_loader(args: argparse.Namespace, slow: bool, clock) -> DataLoader:
    items = Items(args.epoch_batches * args.batch, slow, args, clock)
    return DataLoader(
        items, batch_size=args.batch, num_workers=args.workers,
        persistent_workers=args.persistent, prefetch_factor=2,
    )  # fmt: skip


def train(args: argparse.Namespace, slow: bool, clock, state: dict) -> None:
    model = DistributedDataParallel(nn.Sequential(nn.Linear(FEATURES, 64), nn.Linear(64, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = make_loader(args, slow, clock)
    while True:
        batches = iter(loader)
        try:
            for x, y in batches:
                optimizer.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()  # DDP's all-reduce
                optimizer.step()
                if state["steps"] == 0:
                    print(f"ready rank={dist.get_rank()} pid={os.getpid()}", flush=True)
                state["steps"] += 1
        except (RuntimeError, OSError, EOFError) as exc:
            # A killed worker: the DataLoader's error, or a broken hand-over when it died
            # while passing a batch (tensors travel as file descriptors).
            if not _worker_died(exc):
                raise
            loader = respawn(batches, exc, args, slow, clock)


def _worker_died(exc: BaseException) -> bool:
    return not isinstance(exc, RuntimeError) or "DataLoader worker" in str(exc)


def respawn(batches, exc: BaseException, args: argparse.Namespace, slow: bool, clock):  # noqa: ANN001
    """A new DataLoader (a persistent iterator stays broken) once the dead worker's
    iterator is shut down. Until then the DataLoader's SIGCHLD handler raises its own
    error in whatever line runs when the signal comes: after a broken hand-over it once
    came in the middle of printing `worker died` and ended the rank, its workers never
    started again. Shutting the iterator down takes its workers off that watch."""
    while True:
        try:
            batches._shutdown_workers()  # noqa: SLF001 - what the iterator's __del__ calls
            print(f"worker died rank={dist.get_rank()}: {exc!r}", flush=True)
            return make_loader(args, slow, clock)
        except (RuntimeError, OSError, EOFError) as again:
            if not _worker_died(again):
                raise
            exc = again


def live_workers() -> int:
    """The rank's worker processes now: its children that run this script (a forked
    worker keeps the rank's command line) and are not zombies."""
    mine, count = Path("/proc/self/cmdline").read_bytes(), 0
    for children in Path("/proc/self/task").glob("*/children"):
        for pid in children.read_text().split():
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                count += state != "Z" and Path(f"/proc/{pid}/cmdline").read_bytes() == mine
            except (OSError, IndexError):
                pass  # gone meanwhile
    return count


def keep_clock(args: argparse.Namespace, clock, state: dict) -> None:
    rank, lived, last = dist.get_rank(), 0.0, time.monotonic()
    while True:
        time.sleep(args.clock_every)
        now = time.monotonic()
        lived += live_workers() * (now - last)
        last = now
        with clock.get_lock():
            figures = list(clock)
        print(
            f"clock rank={rank} t={time.time():.3f} steps={state['steps']} "
            f"tokenize_s={figures[TOKENIZE]:.4f} augment_s={figures[AUGMENT]:.4f} "
            f"worker_s={lived:.4f} items={int(figures[ITEMS])}",
            flush=True,
        )


def end() -> None:
    for child in multiprocessing.active_children():
        child.kill()
    os._exit(0)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow-rank", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--tokenize-ms", type=float, default=20.0)
    parser.add_argument("--augment-ms", type=float, default=5.0)
    parser.add_argument("--epoch-batches", type=int, default=20)
    parser.add_argument("--persistent", action="store_true")
    parser.add_argument("--non-python-child", action="store_true")
    parser.add_argument("--clock-every", type=float, default=0.25)
    parser.add_argument("--seconds", type=float, default=60.0, help="ends itself after")
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    threading.Timer(args.seconds, end).start()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    clock = multiprocessing.Array("d", 3)
    state = {"steps": 0}
    if args.non_python_child:
        subprocess.Popen(["sleep", str(args.seconds + 5)])
    slow = dist.get_rank() == args.slow_rank
    threading.Thread(target=keep_clock, args=(args, clock, state), daemon=True).start()
    train(args, slow, clock, state)


if __name__ == "__main__":
    main(sys.argv[1:])
