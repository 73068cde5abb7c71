"""A real DDP training job (torch gloo, CPU) with a planted periodic evaluation and its
own clock: the reference that timelines are held against (issue 48 item 5).

One process per rank, started with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in
the environment. The main thread trains a small MLP wrapped in
`DistributedDataParallel` (the gradient all-reduce waits inside `loss.backward()`);
every `--eval-every` steps every rank runs `evaluate`: forward passes under
`torch.no_grad()` for 1.0-1.35 s (the same length on every rank, drawn from the step
number), then one `all_reduce` of the metric. Each rank appends one JSON line per
evaluation to `--clock PATH` on its own clock (`time.time()`, read right before and
right after `evaluate`): {"rank", "step", "start", "end"}. Prints `ready` once steps
flow, then trains until `--seconds` have passed.

    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 \
        .torchenv/bin/python bench/targets/eval_job.py --clock /tmp/clock.jsonl
"""

import argparse
import json
import os
import random
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

BATCH = 256
FEATURES = 128
EVAL_S = (1.0, 1.35)


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(FEATURES, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    x, y = torch.randn(BATCH, FEATURES), torch.randint(0, 10, (BATCH,))
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()  # DDP all-reduces the gradients in here
    optimizer.step()


def evaluate(model: nn.Module, seconds: float) -> float:
    """Forward passes without gradients for `seconds`, then the metric over the ranks."""
    correct, seen = 0, 0
    deadline = time.perf_counter() + seconds
    with torch.no_grad():
        while time.perf_counter() < deadline:
            x, y = torch.randn(BATCH, FEATURES), torch.randint(0, 10, (BATCH,))
            correct += int((model(x).argmax(1) == y).sum())
            seen += BATCH
    metric = torch.tensor([correct / max(seen, 1)])
    dist.all_reduce(metric)
    return float(metric) / dist.get_world_size()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clock", required=True, help="where each evaluation's times go")
    parser.add_argument("--eval-every", type=int, default=60)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(int(os.environ["RANK"]))
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DistributedDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(3):
        train_step(model, optimizer)
    print(f"ready rank={rank}", flush=True)
    deadline, step = time.monotonic() + args.seconds, 0
    with open(args.clock, "a", buffering=1) as clock:
        while time.monotonic() < deadline:
            train_step(model, optimizer)
            step += 1
            if step % args.eval_every == 0:
                seconds = random.Random(step).uniform(*EVAL_S)
                start = time.time()
                evaluate(model.module, seconds)
                end = time.time()
                clock.write(json.dumps({"rank": rank, "step": step, "start": start, "end": end}))
                clock.write("\n")
    # The ranks stop at different steps, so a clean stop would hang in a collective.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
