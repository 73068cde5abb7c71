"""A real multi-threaded Python workload for py-spy captures (fixtures and bench).

Named threads ``target-0..N`` run recursive work that ends in native code (zlib,
hashlib, sorting), hand items through a ``queue.Queue`` and wait on locks, so
captures contain deep Python stacks, native frames and idle/wait states.
Run: ``python bench/targets/workload.py SECONDS [THREADS] [--deep]``; ``--deep`` sends
every item through 8-32 levels of four alternating functions first, so almost
every sample has a distinct stack (a realistic, several-MB raw file).
"""

import hashlib
import queue
import sys
import threading
import time
import zlib

PAYLOAD = bytes(range(256)) * 512
DEEP = False


def compress_block(depth: int) -> int:
    if depth > 0:
        return compress_block(depth - 1)
    return len(zlib.compress(PAYLOAD, 6))


def hash_block(depth: int) -> str:
    if depth > 0:
        return hash_block(depth - 1)
    return hashlib.sha256(PAYLOAD * 4).hexdigest()


def sort_block() -> int:
    data = [((i * 7919) % 10007) for i in range(20000)]
    return sorted(data)[len(data) // 2]


def produce(items: queue.Queue, stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        items.put(n)
        n += 1
        time.sleep(0.001)


def consume(index: int, items: queue.Queue, stop: threading.Event) -> None:
    item = index * 1000003
    while DEEP and not stop.is_set():
        item += 1
        deep_step(index, item)
    while not stop.is_set():
        try:
            item = items.get(timeout=0.05)
        except queue.Empty:
            continue
        (deep_step if DEEP else step)(index, item)


def walk_a(depth: int, code: int) -> int:
    return descend(depth, code) + 1


def walk_b(depth: int, code: int) -> int:
    return descend(depth, code) + 2


def walk_c(depth: int, code: int) -> int:
    return descend(depth, code) + 3


def walk_d(depth: int, code: int) -> int:
    return descend(depth, code) + 4


WALKERS = (walk_a, walk_b, walk_c, walk_d)


def descend(depth: int, code: int) -> int:
    """Deep, varied stacks: each level picks one of four functions from `code`."""
    if depth == 0:
        return step(code % 5, code)
    return WALKERS[code % 4](depth - 1, code // 4)


def deep_step(index: int, item: int) -> int:
    return descend(8 + item % 24, (item * 2654435761 + index) % (1 << 62))


def step(index: int, item: int) -> int:
    kind = (index + item) % 3
    if kind == 0:
        return compress_block(4 + index)
    if kind == 1:
        return len(hash_block(2 + index))
    return sort_block()


def main(seconds: float, threads: int) -> None:
    stop = threading.Event()
    items: queue.Queue = queue.Queue(maxsize=64)
    workers = [threading.Thread(target=produce, args=(items, stop), name="loader")]
    for i in range(threads):
        workers.append(threading.Thread(target=consume, args=(i, items, stop), name=f"target-{i}"))
    for w in workers:
        w.start()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join()


if __name__ == "__main__":
    DEEP = "--deep" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--deep"]
    main(float(args[0]), int(args[1]) if len(args) > 1 else 5)
