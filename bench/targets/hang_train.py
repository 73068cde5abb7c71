"""A real 4-rank PyTorch DDP job (gloo, CPU) that hangs where it is told to.

One process per rank, started with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in
the environment (`bench/recorders/record_dumps.py` starts four, waits for the hang and dumps
every rank with `py-spy dump --json`). Each rank trains a small model wrapped in
DistributedDataParallel on batches from a DataLoader with two worker processes; the
main thread runs the step (DDP's gradient all-reduce waits inside `loss.backward()`).
``--cause`` plants a hang on rank ``--bad-rank`` after ``--hang-after`` steps (the
planted lines carry a `# HANG_...` comment; where the ranks then wait, `# WAITS_...`):
- ``own_code``: the bad rank waits, in its own code, for a lock file that never goes
  away (``wait_for_lock``, polling with ``time.sleep``) before its next step; the
  others wait for it in the all-reduce of their next backward;
- ``skipped_collective``: the bad rank leaves its loop early (it skips the rest of
  the steps and their collectives) and waits at the final ``dist.barrier()`` of its
  teardown; the others wait in the all-reduce of their next backward;
- ``loader_deadlock``: on the bad rank, every ``__getitem__`` past the first batches
  blocks for ever (a lock taken twice) in both DataLoader workers, so its main thread
  waits in the DataLoader's ``_next_data``; the others in the all-reduce;
- ``progressing``: nothing is planted: a healthy job.
Prints ``ready`` after its first step and ``hung`` (with the step) once it reaches the
planted hang (the others' hang follows at their next all-reduce). Ends itself after
``--seconds``. Needs torch (``/work/torchenv``).
"""

import argparse
import multiprocessing
import os
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset

CAUSES = ("own_code", "skipped_collective", "loader_deadlock", "progressing")
FEATURES = 64
BATCH = 32


class Samples(Dataset):
    """Random samples; on the bad rank of `loader_deadlock`, items past `block_from`
    never come back."""

    def __init__(self, length: int, block_from: int | None) -> None:
        self.length, self.block_from = length, block_from
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if self.block_from is not None and index >= self.block_from:
            take_twice(self.lock)
        generator = torch.Generator().manual_seed(index)
        return torch.randn(FEATURES, generator=generator), index % 10


def take_twice(lock: threading.Lock) -> None:
    with lock:
        lock.acquire()  # HANG_LOADER: a non-reentrant lock taken twice never returns


def wait_for_lock(path: str) -> None:
    """Wait until another job removes `path` (nobody ever does)."""
    while os.path.exists(path):
        time.sleep(0.05)  # HANG_OWN_CODE: the lock file never goes away


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, 10))


def train_step(model: nn.Module, optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()  # WAITS_IN_ALL_REDUCE: DDP's gradient all-reduce, where the others wait
    optimizer.step()
    return float(loss.detach())


def teardown() -> None:
    dist.barrier()  # HANG_SKIPPED: the others are still in the loop's all-reduce


def announce(what: str, step: int) -> None:
    print(f"{what} rank={dist.get_rank()} step={step} pid={os.getpid()}", flush=True)


def train(args: argparse.Namespace, loader: DataLoader, model: nn.Module, optimizer) -> None:
    bad = args.cause != "progressing" and dist.get_rank() == args.bad_rank
    step = 0
    while True:
        for x, y in loader:  # WAITS_FOR_BATCH: where the loader_deadlock rank waits
            if bad and step == args.hang_after:
                announce("hung", step)
                if args.cause == "own_code":
                    wait_for_lock(sys.executable)  # exists for as long as the job runs
                if args.cause == "skipped_collective":
                    return  # HANG_SKIP_LOOP: leaves the loop before its next collective
            train_step(model, optimizer, x, y)
            if step == 0:
                announce("ready", step)
            step += 1
            time.sleep(args.pause)


def end() -> None:
    """Exit now, with the DataLoader's workers: a worker blocked in `__getitem__` never
    looks for its parent, and would outlive the job."""
    for child in multiprocessing.active_children():
        child.kill()
    os._exit(0)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cause", choices=CAUSES, default="progressing")
    parser.add_argument("--bad-rank", type=int, default=2)
    parser.add_argument("--hang-after", type=int, default=20, help="steps before the hang")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between steps")
    parser.add_argument("--seconds", type=float, default=120.0, help="ends itself after")
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    threading.Timer(args.seconds, end).start()  # never outlives its dumps
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    blocks = args.cause == "loader_deadlock" and rank == args.bad_rank
    # Past the batches the workers prefetch before the hang, every item blocks.
    dataset = Samples(100_000, (args.hang_after + 1) * BATCH if blocks else None)
    loader = DataLoader(dataset, batch_size=BATCH, num_workers=2, persistent_workers=True)
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    train(args, loader, model, optimizer)
    teardown()
    end()


if __name__ == "__main__":
    main(sys.argv[1:])
