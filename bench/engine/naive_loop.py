"""The seed's hand-made analysis, kept as the speed baseline (wrong on purpose).

Usage: python bench/engine/naive_loop.py FILE  (prints the top leaves and keyword counts)
It splits every line, counts leaf frames and sums keyword hits over frames, so a
keyword in several frames of one stack counts that sample several times; flamedeck
exists because of that. Standard library only, no flamedeck import, so as a process
it pays only the interpreter's start-up.
"""

import sys
from collections import Counter

# The seed's GPU keywords as plain substrings (before anchored patterns existed).
KEYWORDS = [
    "cuLaunchKernel",
    "cudaLaunchKernel",
    "cuStreamSynchronize",
    "cudaStreamSynchronize",
    "cuEventSynchronize",
    "cudaDeviceSynchronize",
    "CUDACachingAllocator",
    "malloc",
    "free",
    "cudaMemcpy",
    "cuMemcpy",
    "_local_scalar_dense",
    "item",
    "nccl",
    "create_block_mask",
    "sched_yield",
    "futex",
    "pthread_cond",
    "queue",
    "take_gil",
]


def naive(path: str) -> tuple[Counter, Counter]:
    leaf: Counter = Counter()
    per_keyword: Counter = Counter()
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            n = int(count)
            frames = stack.split(";")
            leaf[frames[-1]] += n
            for frame in frames:
                for kw in KEYWORDS:
                    if kw in frame:
                        per_keyword[kw] += n
    return leaf, per_keyword


if __name__ == "__main__":
    leaves, keywords = naive(sys.argv[1])
    total = sum(leaves.values())
    for frame, count in leaves.most_common(30):
        print(f"{100 * count / total:6.2f}% {frame}")
    for keyword, count in keywords.most_common():
        print(f"{100 * count / total:6.2f}% {keyword}")
