"""Keyword sets: a frame matches a keyword when it contains it (case-sensitive)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from .errors import ProfileError


class Keyword(NamedTuple):
    """A substring to look for in frames and the category its samples count toward."""

    keyword: str
    category: str


def _kw(category: str, *words: str) -> tuple[Keyword, ...]:
    return tuple(Keyword(word, category) for word in words)


GPU_KEYWORDS: tuple[Keyword, ...] = (
    *_kw("launch", "cuLaunchKernel", "cudaLaunchKernel"),
    *_kw(
        "sync",
        "cuStreamSynchronize",
        "cudaStreamSynchronize",
        "cuEventSynchronize",
        "cudaDeviceSynchronize",
    ),
    *_kw("alloc", "CUDACachingAllocator", "malloc", "free"),
    *_kw("copy", "cudaMemcpy", "cuMemcpy"),
    *_kw("host sync", "_local_scalar_dense", "item"),
    *_kw("comm", "nccl"),
    *_kw("mask", "create_block_mask"),
    *_kw("wait", "sched_yield", "futex", "pthread_cond"),
    *_kw("python queue", "queue"),
    *_kw("gil", "take_gil"),
)


def load_keywords(spec: str) -> tuple[Keyword, ...]:
    """`gpu` (the default set), `none`, or a path to a keyword file.

    The file is JSON `[{"keyword": "...", "category": "..."}, ...]`, or text with
    one `category: keyword` per line (blank lines and `#` comments ignored).
    """
    if spec == "gpu":
        return GPU_KEYWORDS
    if spec == "none":
        return ()
    try:
        text = Path(spec).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"keyword file {spec}: cannot read it ({exc})") from None
    if text.lstrip().startswith("["):
        return _keywords_from_json(spec, text)
    return _keywords_from_text(spec, text)


def _keywords_from_json(spec: str, text: str) -> tuple[Keyword, ...]:
    try:
        items = json.loads(text)
        found = tuple(Keyword(str(i["keyword"]), str(i["category"])) for i in items)
    except (ValueError, TypeError, KeyError) as exc:
        raise ProfileError(
            f'keyword file {spec}: expected [{{"keyword": ..., "category": ...}}] ({exc})'
        ) from None
    return _checked(spec, found)


def _keywords_from_text(spec: str, text: str) -> tuple[Keyword, ...]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        category, sep, word = line.partition(":")
        if not sep:
            raise ProfileError(f"keyword file {spec}: line {number} is not `category: keyword`")
        found.append(Keyword(word.strip(), category.strip()))
    return _checked(spec, tuple(found))


def _checked(spec: str, found: tuple[Keyword, ...]) -> tuple[Keyword, ...]:
    if any(not k.keyword for k in found):
        raise ProfileError(f"keyword file {spec}: an empty keyword would match every frame")
    return found
