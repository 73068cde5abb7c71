"""A real multi-rank PyTorch training job (gloo, CPU) with causes planted on purpose.

One process per rank, started with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in
the environment (`bench/recorders/record_jobs.py` starts four and records them all at once).
Each rank runs named threads:
- ``loader``: makes batches and puts them on a bounded ``queue.Queue``;
- ``trainer`` (the step thread): takes a batch, runs forward and backward, averages
  every gradient over the ranks with a gloo ``all_reduce``, then an SGD step;
- the main thread joins them.
``--cause`` plants one slowdown (frames and lines the fixtures' findings must name):
- ``none``: a balanced job;
- ``straggler``: rank ``--slow-rank`` also runs ``metric_per_sample``, pure-Python
  work sized to ~40% of its step, so the other ranks wait for it in ``all_reduce``;
- ``starved``: the loader decodes each sample in Python (``decode_sample``), slower
  than a step, so the trainer waits in ``Queue.get``;
- ``hostsync``: ``loss.item()`` after the forward and ``.item()`` of the gradient norm
  after the backward (logging them), every step, with the model on
  torch's lazy device (TorchScript backend, the mechanism XLA uses): ops are queued, and
  ``.item()`` runs the queued work and makes the host wait for it, as a GPU job's
  ``.item()`` waits for its stream. (On CPU eager tensors ``.item()`` costs ~0.2 us:
  there is nothing to wait for, so a plain CPU job cannot show a host sync.)
- ``backpressure``: the trainer hands each step's loss to a ``writer`` thread through
  a bounded queue that it drains slowly, so the step blocks in ``Queue.put``;
- ``gil``: a ``monitor`` thread runs pure Python without pause, so the trainer waits
  for the GIL each time a torch call gives it back.
Prints ``ready`` once the timed costs are calibrated and steps are flowing, then runs
until ``--seconds`` have passed. Needs torch (``/work/torchenv``).
"""

import argparse
import math
import os
import queue
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch import nn

BATCH = 2048
FEATURES = 256
CAUSES = ("none", "straggler", "starved", "hostsync", "backpressure", "gil")


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(FEATURES, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )


def make_batch() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(BATCH, FEATURES), torch.randint(0, 10, (BATCH,))


def decode_sample(row: list[float], passes: int) -> float:
    """Python-side per-sample preprocessing (a stand-in for tokenising or augmenting)."""
    acc = 0.0
    for _ in range(passes):
        for value in row:
            acc += math.tanh(value) * 0.5
    return acc


def decode_batch(x: torch.Tensor, passes: int) -> list[float]:
    return [decode_sample(row, passes) for row in x[:, :8].tolist()]


def load(batches: queue.Queue, stop: threading.Event, decode_passes: int) -> None:
    while not stop.is_set():
        x, y = make_batch()
        if decode_passes:
            decode_batch(x, decode_passes)
        try:
            batches.put((x, y), timeout=0.5)
        except queue.Full:
            continue


def metric_per_sample(logits: list[list[float]], passes: int) -> float:
    """An extra per-sample metric in pure Python: the straggler's planted cost."""
    total = 0.0
    for _ in range(passes):
        for row in logits:
            peak = max(row)
            norm = sum(math.exp(v - peak) for v in row)
            total += -sum((math.exp(v - peak) / norm) * (v - peak - math.log(norm)) for v in row)
    return total


def all_reduce_grads(model: nn.Module, world: int) -> None:
    """One collective per step over all gradients (a single bucket, as DDP would)."""
    params = list(model.parameters())
    flat = torch.cat([param.grad.reshape(-1) for param in params])
    device = flat.device
    flat = flat.cpu()  # gloo reduces CPU tensors; a no-op unless the model is lazy
    dist.all_reduce(flat)
    flat /= world
    offset = 0
    for param in params:
        param.grad = flat[offset : offset + param.numel()].view_as(param).to(device)
        offset += param.numel()


def lazy_device() -> torch.device:
    import torch._lazy.ts_backend

    torch._lazy.ts_backend.init()
    return torch.device("lazy")


class Job:
    """One rank's model, optimizer and planted costs."""

    def __init__(self, args: argparse.Namespace, rank: int, world: int) -> None:
        self.args, self.rank, self.world = args, rank, world
        self.device = lazy_device() if args.cause == "hostsync" else torch.device("cpu")
        self.model = make_model().to(self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.metric_passes = 0
        self.results: queue.Queue = queue.Queue(maxsize=2)
        self.steps = 0
        self.planted = False  # no planted cost while the plain step is timed
        self.last_loss = self.last_norm = 0.0

    def plants(self, cause: str) -> bool:
        return self.planted and self.args.cause == cause

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        start = time.perf_counter()
        x, y = x.to(self.device), y.to(self.device)
        self.optimizer.zero_grad()
        logits = self.model(x)
        loss = nn.functional.cross_entropy(logits, y)
        if self.plants("hostsync"):
            self.last_loss = loss.item()  # HOSTSYNC_LOSS: the host waits for the forward
        loss.backward()
        if self.plants("hostsync"):  # (clip_grad_norm_'s norm has no lazy kernel: it would
            # fall back to eager and sync inside the library instead)
            squares = torch.stack([p.grad.pow(2).sum() for p in self.model.parameters()])
            self.last_norm = squares.sum().sqrt().item()  # HOSTSYNC_NORM: ... and the backward
        if self.device.type == "lazy":
            torch._lazy.mark_step()  # run the backward once, before gloo reads the grads
        all_reduce_grads(self.model, self.world)
        self.optimizer.step()
        if self.device.type == "lazy":
            torch._lazy.mark_step()
        if self.metric_passes and self.planted:
            rest_s, began = time.perf_counter() - start, time.perf_counter()
            metric_per_sample(logits.detach()[:, :10].tolist(), self.metric_passes)  # STRAGGLER
            self.resize_metric(rest_s, time.perf_counter() - began)
        if self.plants("backpressure"):
            self.results.put((self.steps, loss.detach()))  # BACKPRESSURE: a full queue
        self.steps += 1

    def resize_metric(self, rest_s: float, spent_s: float) -> None:
        """Keep metric_per_sample at ~40% of the step (2/3 of the rest of it), however
        loaded the machine is."""
        wanted = self.metric_passes * (2 / 3) * rest_s / max(spent_s, 1e-6)
        self.metric_passes = max(1, round(0.7 * self.metric_passes + 0.3 * wanted))

    def train(self, batches: queue.Queue, stop: threading.Event) -> None:
        while not stop.is_set():
            x, y = batches.get()
            self.train_step(x, y)


def write_results(results: queue.Queue, stop: threading.Event, seconds: float) -> None:
    """A slow consumer (say, uploading metrics): drains one result per `seconds`."""
    while not stop.is_set():
        try:
            results.get(timeout=0.5)
        except queue.Empty:
            continue
        time.sleep(seconds)


def monitor(stop: threading.Event) -> None:
    """Pure-Python bookkeeping that never sleeps: it holds the GIL whenever it can."""
    window: list[float] = []
    while not stop.is_set():
        window.append(sum(i * 0.5 for i in range(200)))
        if len(window) > 1000:
            window = window[-100:]


def timed_step(job: Job, batches: queue.Queue) -> float:
    start = time.perf_counter()
    x, y = batches.get()
    job.train_step(x, y)
    return time.perf_counter() - start


def calibrate(job: Job, batches: queue.Queue) -> float:
    """The median plain step time, measured on every rank (the collectives need all)."""
    times = sorted(timed_step(job, batches) for _ in range(12))
    median = torch.tensor([times[len(times) // 2]], dtype=torch.float64)
    dist.all_reduce(median)  # one figure for every rank, so the causes scale alike
    return float(median) / job.world


def passes_for(seconds: float, work, *work_args) -> int:
    """How many passes of `work` take `seconds` here (one pass timed, at least 1)."""
    start = time.perf_counter()
    work(*work_args, 1)
    one = max(time.perf_counter() - start, 1e-6)
    return max(1, round(seconds / one))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cause", choices=CAUSES, default="none")
    parser.add_argument("--slow-rank", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--torch-threads", type=int, default=1)
    return parser.parse_args(argv)


def start_threads(job: Job, batches: queue.Queue, stop: threading.Event, step_s: float) -> list:
    cause = job.args.cause
    threads = [threading.Thread(target=job.train, args=(batches, stop), name="trainer")]
    if cause == "backpressure":
        writer = (job.results, stop, 1.6 * step_s)
        threads.append(threading.Thread(target=write_results, args=writer, name="writer"))
    if cause == "gil":
        threads.append(threading.Thread(target=monitor, args=(stop,), name="monitor"))
    for thread in threads:
        thread.start()
    return threads


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(int(os.environ["RANK"]))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    job = Job(args, rank, world)
    batches: queue.Queue = queue.Queue(maxsize=4)
    stop = threading.Event()
    plain = threading.Thread(target=load, args=(batches, stop, 0), name="loader")
    plain.start()
    step_s = calibrate(job, batches)
    stop.set()
    plain.join()
    stop.clear()
    decode = 0
    if args.cause == "starved":  # the loader needs 2.5 steps per batch
        decode = passes_for(2.5 * step_s, decode_batch, make_batch()[0])
    if args.cause == "straggler" and rank == args.slow_rank:  # 40% of its new step
        rows = [[0.1 * i for i in range(10)]] * BATCH
        job.metric_passes = passes_for(step_s * 0.4 / 0.6, metric_per_sample, rows)
    job.planted = True
    loader = threading.Thread(target=load, args=(batches, stop, decode), name="loader")
    loader.start()
    threads = [loader, *start_threads(job, batches, stop, step_s)]
    print(f"ready rank={rank} step_s={step_s:.4f}", flush=True)
    deadline = time.monotonic() + args.seconds
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    # The ranks stop at different steps, so a clean stop would hang in a collective.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
