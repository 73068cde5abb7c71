"""A tiny training job for the timeline tests: a loader thread feeds a queue, the main
thread trains on each batch and every `--eval-every` steps runs the planted stall for
about `--eval-s` seconds: `evaluate()` (computes) or, with `--checkpoint`,
`save_checkpoint()` (waits on an event: the `idle` state). It prints, on its own clock
(time.time()), `{"ready": epoch}` once started and one JSON line per stall:
{"burst_start": epoch, "burst_end": epoch}. `--steady` never stalls.

Usage: python periodic_job.py SECONDS [--steady] [--checkpoint] [--eval-every N] [--eval-s S]
"""

import json
import queue
import sys
import threading
import time

STEP_S = 0.025


def spin(seconds: float) -> int:
    """Pure-Python work for `seconds` (a stand-in for a model's forward and backward)."""
    deadline, total = time.perf_counter() + seconds, 0
    while time.perf_counter() < deadline:
        total += sum(i * i for i in range(200))
    return total


def load(batches: queue.Queue) -> None:
    while True:
        batches.put(spin(0.002))


def train_step(batch: int) -> int:
    return spin(STEP_S) + batch


def evaluate(seconds: float) -> int:
    return spin(seconds)


def save_checkpoint(seconds: float) -> None:
    threading.Event().wait(seconds)  # waits for a writer, as a blocking save does


def main() -> None:
    args = sys.argv[1:]
    seconds = float(args[0])
    steady = "--steady" in args
    eval_every = int(args[args.index("--eval-every") + 1]) if "--eval-every" in args else 88
    eval_s = float(args[args.index("--eval-s") + 1]) if "--eval-s" in args else 0.8
    batches: queue.Queue = queue.Queue(maxsize=4)
    threading.Thread(target=load, args=(batches,), name="loader", daemon=True).start()
    end, step = time.time() + seconds, 0
    print(json.dumps({"ready": time.time()}), flush=True)
    while time.time() < end:
        train_step(batches.get())
        step += 1
        if not steady and step % eval_every == 0:
            start = time.time()
            (save_checkpoint if "--checkpoint" in args else evaluate)(eval_s)
            print(json.dumps({"burst_start": start, "burst_end": time.time()}), flush=True)


if __name__ == "__main__":
    main()
