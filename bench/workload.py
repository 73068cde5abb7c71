"""A real multi-threaded Python workload for py-spy captures (fixtures and bench).

Named threads ``target-0..N`` run recursive work that ends in native code (zlib,
hashlib, sorting), hand items through a ``queue.Queue`` and wait on locks, so
captures contain deep Python stacks, native frames and idle/wait states.
Run: ``python bench/workload.py SECONDS [THREADS]``.
"""

import hashlib
import queue
import sys
import threading
import time
import zlib

PAYLOAD = bytes(range(256)) * 512


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
    while not stop.is_set():
        try:
            item = items.get(timeout=0.05)
        except queue.Empty:
            continue
        step(index, item)


def step(index: int, item: int) -> None:
    kind = (index + item) % 3
    if kind == 0:
        compress_block(4 + index)
    elif kind == 1:
        hash_block(2 + index)
    else:
        sort_block()


def main(seconds: float, threads: int) -> None:
    stop = threading.Event()
    items: queue.Queue = queue.Queue(maxsize=64)
    workers = [threading.Thread(target=produce, args=(items, stop), name="loader")]
    for i in range(threads):
        workers.append(
            threading.Thread(target=consume, args=(i, items, stop), name=f"target-{i}")
        )
    for w in workers:
        w.start()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join()


if __name__ == "__main__":
    main(float(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 5)
