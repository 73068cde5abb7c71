"""The data module of bench/targets/loader_job/train.py: the input pipeline's own functions.

`tokenize` is the planted slowdown: pure Python, run in the DataLoader's worker
processes for every item of the slow rank, for the time it is given. `augment` is the
cheaper rest of an item's preparation. Neither is a comprehension (a `<listcomp>` frame
of Python 3.11 would sit under them): each loops where its line says.
"""

from __future__ import annotations

import time

VOCABULARY = 50_000


def tokenize(text: str, seconds: float) -> list[int]:
    """Turn `text` into token ids again and again for `seconds` (the slow part)."""
    deadline = time.perf_counter() + seconds
    tokens: list[int] = []
    while time.perf_counter() < deadline:
        tokens = []
        for word in text.split():
            tokens.append(hash(word) % VOCABULARY)  # TOKENIZE_HOT
    return tokens


def augment(tokens: list[int], seconds: float) -> list[int]:
    """Shuffle-like work on the ids for `seconds` (the cheaper part)."""
    deadline = time.perf_counter() + seconds
    out = tokens
    while time.perf_counter() < deadline:
        out = out[1:] + out[:1]  # AUGMENT_HOT
    return out
