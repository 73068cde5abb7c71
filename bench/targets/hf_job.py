"""A real Hugging Face Trainer job (tiny GPT-2 from a config, no downloads) under
torch.distributed on gloo, CPU, with a planted cause and its own clock.

One process per rank, started with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT in the environment (tests/profiles/jobs/test_frameworks_torch.py starts
two). The Trainer wraps the model in DistributedDataParallel; the dataset runs in the
main thread (no loader workers), so a slow item shows in the step thread.
``--cause``:
- ``slow_data``: on ``--bad-rank`` every item runs ``make_features``: busy CPU work
  that takes ``--slow-ms`` on an idle core (marked SLOW_DATA), a fixed amount of work so
  that load slows it as much as the model's step; the other ranks wait for it in the
  Trainer's batch fetch (it gathers the batch's token count: a collective) for part of
  every step;
- ``hung_callback``: after ``--hang-after`` steps a callback on ``--bad-rank`` waits
  for a file lock that its holder never releases (marked HANG_CALLBACK): blocked in
  ``flock``, its stack stays the same from dump to dump (a loop polling a lock file
  would move between its lines, and a dump would read it as progressing); the others
  wait in their next collective.
The clock: every step prints ``clock rank=R step=N t=EPOCH slow_s=SECONDS`` (seconds
spent in make_features so far), the hang prints ``hung rank=R step=N t=EPOCH``. Ends
itself after ``--seconds``. Needs torch, transformers and accelerate (``.torchenv``).
"""

import argparse
import fcntl
import os
import sys
import tempfile
import threading
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from torch.utils.data import Dataset  # noqa: E402
from transformers import (  # noqa: E402
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

SEQ, VOCAB = 32, 256
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
    ids = torch.randint(0, VOCAB, (SEQ,), generator=generator)
    for _ in range(chunks):  # SLOW_DATA: the planted slow item
        sum(i * i for i in range(2000))
    CLOCK["slow_s"] += time.perf_counter() - started
    return ids


class Tokens(Dataset):
    def __init__(self, slow_s: float) -> None:
        self.chunks = chunks_for(slow_s)

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, index: int) -> dict:
        if self.chunks:
            ids = make_features(index, self.chunks)
        else:
            ids = torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(index))
        return {"input_ids": ids, "labels": ids}


def wait_for_lock() -> None:
    """Wait for a file lock that its holder (this job) never releases."""
    held, path = tempfile.mkstemp(prefix="flamedeck-lock-")
    mine = os.open(path, os.O_RDONLY)
    os.unlink(path)  # nothing left behind when the job is killed
    fcntl.flock(held, fcntl.LOCK_EX)
    fcntl.flock(mine, fcntl.LOCK_EX)  # HANG_CALLBACK: the holder never releases it


class Clock(TrainerCallback):
    """Prints the job's clock every step; on the bad rank of hung_callback, hangs."""

    def __init__(self, rank: int, hang_after: int | None) -> None:
        self.rank, self.hang_after = rank, hang_after

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        print(f"clock rank={self.rank} step={step} t={time.time():.3f} "
              f"slow_s={CLOCK['slow_s']:.3f}", flush=True)  # fmt: skip
        if self.hang_after is not None and step >= self.hang_after:
            print(f"hung rank={self.rank} step={step} t={time.time():.3f}", flush=True)
            wait_for_lock()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cause", choices=("slow_data", "hung_callback"), default="slow_data")
    parser.add_argument("--bad-rank", type=int, default=1)
    parser.add_argument("--slow-ms", type=float, default=60.0)
    parser.add_argument("--hang-after", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--out", default="/tmp/flamedeck-hf-job")
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    threading.Timer(args.seconds, lambda: os._exit(0)).start()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rank = int(os.environ["RANK"])
    bad = rank == args.bad_rank
    slow_s = args.slow_ms / 1000 if bad and args.cause == "slow_data" else 0.0
    hang = args.hang_after if bad and args.cause == "hung_callback" else None
    config = GPT2Config(n_layer=2, n_head=2, n_embd=64, n_positions=SEQ, vocab_size=VOCAB)
    model = GPT2LMHeadModel(config)
    training = TrainingArguments(
        output_dir=f"{args.out}-{os.getpid()}",
        per_device_train_batch_size=4,
        max_steps=1_000_000,
        use_cpu=True,
        ddp_backend="gloo",
        ddp_find_unused_parameters=False,
        dataloader_num_workers=0,
        logging_strategy="no",
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=training,
        train_dataset=Tokens(slow_s),
        callbacks=[Clock(rank, hang)],
    )
    print(f"ready rank={rank} pid={os.getpid()} t={time.time():.3f}", flush=True)
    trainer.train()  # WAITS_IN_TRAIN: the user's call into the framework
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
