"""A real Lightning job (a small model, no downloads) under torch.distributed on gloo,
CPU, with a planted cause and its own clock.

One process per rank, started with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT in the environment (tests/profiles/jobs/test_frameworks_torch.py starts
two; Lightning then takes the processes as created outside it). The DDP strategy on
gloo wraps the model; the dataset runs in the main thread (no loader workers).
``--cause``:
- ``slow_data``: on ``--bad-rank`` every item runs ``make_features``: busy CPU work
  that takes ``--slow-ms`` on an idle core (marked SLOW_DATA), a fixed amount of work so
  that load slows it as much as the model's step; the other ranks wait for it in the
  collectives of their next batch. Every rank's model works too (``--model-repeats``
  passes of a hidden layer, about 0.6 of the slow rank's data time a batch), so the
  others wait for part of the step, not all of it: a straggler, not a hang;
- ``hung_callback``: after ``--hang-after`` batches a callback on ``--bad-rank`` waits
  for a file lock that its holder never releases (marked HANG_CALLBACK): blocked in
  ``flock``, its stack stays the same from dump to dump (a loop polling a lock file
  would move between its lines, and a dump would read it as progressing); the others
  wait in their next collective.
The clock: every batch prints ``clock rank=R step=N t=EPOCH slow_s=SECONDS`` (seconds
spent in make_features so far), the hang prints ``hung rank=R step=N t=EPOCH``. Ends
itself after ``--seconds``. Needs torch and lightning (``.torchenv``).
"""

import argparse
import fcntl
import os
import sys
import tempfile
import threading
import time
import warnings

# isort: off
# torch first: a venv without it then fails on torch, and the file is imported in PyTorch's
# own (tests/bench/test_bench_imports.py).
import torch
import lightning as L  # noqa: N812
from lightning.pytorch.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader, Dataset
# isort: on

FEATURES, WIDTH = 64, 512
CLOCK = {"slow_s": 0.0}


def busy_chunk() -> float:
    """Seconds one chunk of make_features' busy work takes now."""
    started = time.perf_counter()
    sum(i * i for i in range(2000))
    return time.perf_counter() - started


def chunks_for(slow_s: float) -> int:
    """Chunks of busy work that take `slow_s` on an idle core: the fastest of 50 timed
    chunks sets the pace. A fixed amount of work (not a fixed time) is slowed by a
    loaded machine as much as the model's work is, so the slow rank's share of the step,
    and the others' wait, stay about the same whatever the load."""
    return max(1, round(slow_s / min(busy_chunk() for _ in range(50)))) if slow_s else 0


def make_features(index: int, chunks: int) -> torch.Tensor:
    """Busy work on the slow rank: CPU time that the job's clock counts."""
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(index)
    x = torch.randn(FEATURES, generator=generator)
    for _ in range(chunks):  # SLOW_DATA: the planted slow item
        sum(i * i for i in range(2000))
    CLOCK["slow_s"] += time.perf_counter() - started
    return x


class Samples(Dataset):
    def __init__(self, slow_s: float) -> None:
        self.chunks = chunks_for(slow_s)

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, index: int):
        if self.chunks:
            x = make_features(index, self.chunks)
        else:
            x = torch.randn(FEATURES, generator=torch.Generator().manual_seed(index))
        return x, index % 10


class Model(L.LightningModule):
    """A small net whose hidden layer runs `repeats` times a step: model work on every
    rank (a few hundred thousand parameters, so DDP's all-reduce stays small)."""

    def __init__(self, repeats: int) -> None:
        super().__init__()
        self.repeats = repeats
        self.inp, self.hidden = nn.Linear(FEATURES, WIDTH), nn.Linear(WIDTH, WIDTH)
        self.out = nn.Linear(WIDTH, 10)

    def forward(self, x):
        x = torch.relu(self.inp(x))
        for _ in range(self.repeats):
            x = torch.relu(self.hidden(x))
        return self.out(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def wait_for_lock() -> None:
    """Wait for a file lock that its holder (this job) never releases."""
    held, path = tempfile.mkstemp(prefix="flamedeck-lock-")
    mine = os.open(path, os.O_RDONLY)
    os.unlink(path)  # nothing left behind when the job is killed
    fcntl.flock(held, fcntl.LOCK_EX)
    fcntl.flock(mine, fcntl.LOCK_EX)  # HANG_CALLBACK: the holder never releases it


class Clock(L.Callback):
    """Prints the job's clock every batch; on the bad rank of hung_callback, hangs."""

    def __init__(self, rank: int, hang_after: int | None) -> None:
        self.rank, self.hang_after = rank, hang_after

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        print(f"clock rank={self.rank} step={step} t={time.time():.3f} "
              f"slow_s={CLOCK['slow_s']:.3f}", flush=True)  # fmt: skip
        if self.hang_after is not None and step >= self.hang_after:
            print(f"hung rank={self.rank} step={step} t={time.time():.3f}", flush=True)
            wait_for_lock()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cause", choices=("slow_data", "hung_callback"), default="slow_data")
    parser.add_argument("--bad-rank", type=int, default=1)
    parser.add_argument("--slow-ms", type=float, default=4.0)
    parser.add_argument("--model-repeats", type=int, default=64)
    parser.add_argument("--hang-after", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=120.0)
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    threading.Timer(args.seconds, lambda: os._exit(0)).start()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    bad = rank == args.bad_rank
    slow_s = args.slow_ms / 1000 if bad and args.cause == "slow_data" else 0.0
    hang = args.hang_after if bad and args.cause == "hung_callback" else None
    trainer = L.Trainer(
        accelerator="cpu",
        devices=world,
        strategy=DDPStrategy(process_group_backend="gloo"),
        max_steps=1_000_000,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[Clock(rank, hang)],
    )
    loader = DataLoader(Samples(slow_s), batch_size=16, num_workers=0)
    print(f"ready rank={rank} pid={os.getpid()} t={time.time():.3f}", flush=True)
    model = Model(args.model_repeats)
    trainer.fit(model, loader)  # WAITS_IN_FIT: the user's call into the framework
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
