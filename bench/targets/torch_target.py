"""A real PyTorch CPU target for py-spy captures (engine fixtures and bench).

Threads, each named so captures can be filtered by thread:
- ``loader``: makes batches and puts them on a ``queue.Queue`` (bounded, so it
  also blocks in ``put`` when the trainer falls behind);
- ``trainer``: takes batches from the queue, runs an ``nn.Linear`` model forward and
  backward with an optimizer step, then calls ``.item()`` per row of the batch
  (``ROW_ITEMS``) and on the loss (``LOSS_ITEM``): the host syncs a GPU job would
  pay, which the engine must attribute to those lines;
- ``metrics``: reads ``.item()`` of a running statistic under a lock, then sleeps;
- ``evaluator``: runs forwards under ``torch.no_grad()`` (competes for the GIL).
Run: ``python bench/targets/torch_target.py SECONDS``; needs torch (a venv of its own).
"""

import queue
import sys
import threading
import time

import torch
from torch import nn

torch.set_num_threads(2)
STATE = {"loss": torch.zeros(()), "steps": 0}
LOCK = threading.Lock()


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))


def load(batches: queue.Queue, stop: threading.Event) -> None:
    while not stop.is_set():
        x = torch.randn(64, 256)
        y = torch.randint(0, 10, (64,))
        try:
            batches.put((x, y), timeout=0.1)
        except queue.Full:
            continue


def train_step(model, optimizer, x, y) -> tuple[float, int]:
    optimizer.zero_grad()
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    preds = logits.detach().argmax(dim=1)
    hits = 0
    for row in range(len(y)):
        hits += int(preds[row].item() == y[row].item())  # ROW_ITEMS: a host sync per row
    return loss.item(), hits  # LOSS_ITEM: the host sync to move off the critical path


def train(batches: queue.Queue, stop: threading.Event) -> None:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    while not stop.is_set():
        try:
            x, y = batches.get(timeout=0.1)
        except queue.Empty:
            continue
        value, _hits = train_step(model, optimizer, x, y)
        with LOCK:
            STATE["loss"] = torch.tensor(value)
            STATE["steps"] += 1


def report(stop: threading.Event) -> None:
    while not stop.is_set():
        with LOCK:
            loss = STATE["loss"]
        _ = loss.item() + loss.mean().item()  # METRIC_ITEMS
        time.sleep(0.002)


def evaluate(stop: threading.Event) -> None:
    model = make_model()
    data = torch.randn(128, 256)
    with torch.no_grad():
        while not stop.is_set():
            model(data).argmax(dim=1).sum()


def main(seconds: float) -> None:
    batches: queue.Queue = queue.Queue(maxsize=4)
    stop = threading.Event()
    threads = [
        threading.Thread(target=load, args=(batches, stop), name="loader"),
        threading.Thread(target=train, args=(batches, stop), name="trainer"),
        threading.Thread(target=report, args=(stop,), name="metrics"),
        threading.Thread(target=evaluate, args=(stop,), name="evaluator"),
    ]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 30.0)
