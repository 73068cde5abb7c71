"""Real PyTorch CPU targets with planted causes, for the thread-state captures.

Usage: python bench/targets/states_target.py MODE SECONDS  (needs torch: a venv of its own)
MODE:
- ``starved``: a ``loader`` thread makes each batch slowly (``slow_batch`` waits as on
  slow storage) and puts it on a bounded ``queue.Queue``; the ``trainer`` thread waits for
  it in ``get`` (data_wait), runs an ``nn.Linear`` model, reads ``.item()`` per row and on
  the loss and ``.tolist()`` of an activation every step (host_sync); a ``metrics`` thread
  sleeps (idle); the main thread waits in ``Thread.join`` (idle).
- ``backpressure``: the loader is fast and the trainer slow (a wider model, so its
  ``.tolist()`` is a large host sync), so the loader blocks in ``put`` on the full
  queue (backpressure).
- ``gloo``: two ranks (gloo on CPU, started by this script; rank pids go to
  ``$STATES_PIDS`` when set, and each rank touches ``$STATES_PIDS.N`` once it trains)
  all_reduce their gradients every step in ``train_step``;
  rank 1 also runs ``metric_per_sample`` (pure Python), so rank 0 waits for it in
  the collective.
Lines the tests look for carry a ``# MARKER`` comment.
"""

import os
import queue
import subprocess
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch import nn

torch.set_num_threads(1)
STOP = threading.Event()


def model_of(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(256, width), nn.ReLU(), nn.Linear(width, 10))


def slow_batch() -> tuple[torch.Tensor, torch.Tensor]:
    time.sleep(0.03)  # SLOW_READ: a loader waiting on storage, holding no GIL
    return fast_batch()


def fast_batch() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(64, 256), torch.randint(0, 10, (64,))


def load(batches: queue.Queue, make) -> None:
    while not STOP.is_set():
        batch = make()
        while not STOP.is_set():
            try:
                batches.put(batch, timeout=0.5)  # LOADER_PUT
                break
            except queue.Full:
                continue


def train(batches: queue.Queue, width: int) -> None:
    model = model_of(width)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    while not STOP.is_set():
        try:
            x, y = batches.get(timeout=0.5)  # TRAINER_GET
        except queue.Empty:
            continue
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        preds = model(x).argmax(dim=1)
        hits = sum(int(p.item() == t.item()) for p, t in zip(preds, y, strict=True))  # ROW_ITEMS
        features = model[0](x).detach().tolist()  # TOLIST: the host reads a whole activation
        _ = loss.item() + hits + len(features)  # LOSS_ITEM


def report() -> None:
    while not STOP.is_set():
        time.sleep(0.05)  # METRICS_SLEEP


def threaded(seconds: float, make, width: int) -> None:
    batches: queue.Queue = queue.Queue(maxsize=4)
    threads = [
        threading.Thread(target=load, args=(batches, make), name="loader"),
        threading.Thread(target=train, args=(batches, width), name="trainer"),
        threading.Thread(target=report, name="metrics"),
    ]
    for thread in threads:
        thread.start()
    threading.Timer(seconds, STOP.set).start()
    for thread in threads:
        thread.join()  # MAIN_JOIN


def metric_per_sample(logits: torch.Tensor) -> float:
    values = logits.detach().tolist()
    return sum(sum(v * v for v in row) for row in values for _ in range(48))  # STRAGGLER


def train_step(model, optimizer, rank: int) -> None:
    x, y = fast_batch()
    optimizer.zero_grad()
    logits = model(x)
    nn.functional.cross_entropy(logits, y).backward()
    if rank == 1:
        metric_per_sample(logits)
    for param in model.parameters():
        dist.all_reduce(param.grad)  # ALL_REDUCE
    optimizer.step()


def rank_main(rank: int, seconds: float) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=2)
    model = model_of(128)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    end = time.monotonic() + seconds
    ready = os.environ.get("STATES_PIDS")
    while True:
        done = torch.tensor([float(time.monotonic() > end)])
        dist.all_reduce(done)  # both ranks stop on the same step
        if done.item():
            break
        train_step(model, optimizer, rank)
        if ready:
            open(f"{ready}.{rank}", "w").close()
            ready = None
    dist.destroy_process_group()


def gloo(seconds: float) -> None:
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29517"}
    ranks = [
        subprocess.Popen([sys.executable, __file__, "rank", str(rank), str(seconds)], env=env)
        for rank in range(2)
    ]
    if os.environ.get("STATES_PIDS"):
        with open(os.environ["STATES_PIDS"], "w", encoding="utf-8") as fh:
            fh.write(" ".join(str(p.pid) for p in ranks) + "\n")
    for process in ranks:
        process.wait()


if __name__ == "__main__":
    mode, seconds = sys.argv[1], float(sys.argv[-1])
    if mode == "starved":
        threaded(seconds, slow_batch, 64)
    elif mode == "backpressure":
        threaded(seconds, fast_batch, 2048)
    elif mode == "gloo":
        gloo(seconds)
    elif mode == "rank":
        rank_main(int(sys.argv[2]), seconds)
    else:
        raise SystemExit(f"unknown mode {mode!r}: starved, backpressure or gloo")
