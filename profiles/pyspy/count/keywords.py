"""Keyword sets: which frames count toward which category.

A keyword is text; its form says how it matches a frame `name (location)`:
- `TEXT`: the frame text (name and location) contains TEXT (case-sensitive);
- `=NAME`: the function name (the text before ` (location)`) is exactly NAME;
- `re:REGEX`: regular expression searched in the function name
  (`re:^pthread_cond_(timed)?wait$`), run on RE2 in time linear in the name
  (linear_regex.py: Python's syntax less lookaround and backreferences); one
  that matches the empty name, or that RE2 does not take, is refused;
- any of these, then ` under ` and a second one: the frame matches only when its
  direct caller (the frame above it) matches the second. The caller may also be
  the word `python`: a Python frame or a frame of the interpreter itself
  (`libpython3.11.so`, `python3.12`), which is where py-spy shows a GIL wait.
A frame counts toward one category only: the category of the first keyword, in
list order, that matches it; every keyword of that category matching it counts.
So `gil: re:^pthread_cond_timedwait$ under python` listed before
`wait: re:^pthread_cond_timedwait$` makes that GIL wait a gil sample, not a wait.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from ..core.frames import is_interpreter, is_python, split_location
from ..core.linear_regex import LinearPattern, UnsupportedPattern
from ..errors import ProfileError

UNDER = " under "
PYTHON_CALLER = "python"


class Keyword(NamedTuple):
    """A keyword (see the module doc for its forms) and the category it counts toward."""

    keyword: str
    category: str


class Pattern(NamedTuple):
    """One `TEXT`, `=NAME` or `re:REGEX` form, compiled."""

    text: str
    kind: str
    regex: LinearPattern | None = None

    def matches(self, frame: str) -> bool:
        if self.kind == "substring":
            return self.text in frame
        name = split_location(frame)[0]
        if self.kind == "exact":
            return name == self.text
        if self.kind == "python":
            return is_python(frame) or is_interpreter(frame)
        assert self.regex is not None
        return self.regex.search(name)

    def needle(self) -> str | None:
        """Text every matching frame contains (for a fast pre-filter), if there is one."""
        return self.text if self.kind in ("substring", "exact") else None


class Rule(NamedTuple):
    """A compiled keyword: what the frame must match, and what its caller must."""

    match: Pattern
    caller: Pattern | None


def parse_keyword(text: str) -> Rule:
    """Compile one keyword; ProfileError naming the problem when it is not valid."""
    head, sep, tail = text.partition(UNDER)
    match = _pattern(text, head, caller=False)
    caller = _pattern(text, tail, caller=True) if sep else None
    return Rule(match, caller)


@lru_cache(maxsize=4096)
def compiled_keyword(text: str) -> Rule:
    """parse_keyword, once a process (a Rule is immutable): an analysis compiles its
    keywords through it, so a worker that forks one analysis a capture compiles them
    once (analysis.prepare_analysis), not once a child."""
    return parse_keyword(text)


def keyword_problem(text: str) -> str | None:
    """Why `text` is not a valid keyword, or None (for forms that validate input)."""
    try:
        parse_keyword(text)
    except ProfileError as exc:
        return str(exc)
    return None


def _pattern(whole: str, text: str, caller: bool) -> Pattern:
    if caller and text == PYTHON_CALLER:
        return Pattern(text, "python")
    if text.startswith("re:"):
        try:
            regex = LinearPattern(text[3:])
        except UnsupportedPattern as exc:
            raise ProfileError(f"keyword {whole!r}: bad regular expression ({exc})") from None
        if not text[3:] or regex.search(""):
            raise ProfileError(f"keyword {whole!r}: the regular expression matches every name")
        return Pattern(text[3:], "regex", regex)
    if text.startswith("="):
        if not text[1:].strip():
            raise ProfileError(f"keyword {whole!r}: `=` needs a function name after it")
        return Pattern(text[1:], "exact")
    if not text.strip():
        raise ProfileError(f"keyword {whole!r}: an empty keyword would match every frame")
    return Pattern(text, "substring")


def _kw(category: str, *words: str) -> tuple[Keyword, ...]:
    return tuple(Keyword(word, category) for word in words)


_COND_WAIT = "re:^pthread_cond_(timed|clock)?wait"
# pybind11's GIL guards, by whole name: the release *destructor* and the acquire
# *constructor* take the GIL back. `gil_scoped_` as a substring also matched template
# arguments (`initialize<..., call_guard<pybind11::gil_scoped_release>>` wraps every
# c10d call) and so read collective waits as GIL waits.
_GIL_GUARDS = "re:^pybind11::gil_scoped_(release::~gil_scoped_release|acquire::gil_scoped_acquire)$"
GPU_KEYWORDS: tuple[Keyword, ...] = (
    # GIL first. py-spy hides take_gil and PyEval_RestoreThread in most builds, so
    # a GIL wait shows as a condition wait right under Python, the interpreter, a
    # pybind11 GIL guard or torch's bindings (which release the GIL around ops):
    # every such wait in the captures of bench/targets/torch_target.py was the GIL.
    *_kw(
        "gil",
        "=take_gil",
        "=drop_gil",
        "=PyEval_RestoreThread",
        "=PyEval_AcquireThread",
        _GIL_GUARDS,
        f"{_COND_WAIT} under python",
        f"{_COND_WAIT} under {_GIL_GUARDS}",
        f"{_COND_WAIT} under libtorch_python",
    ),
    *_kw("launch", "cuLaunchKernel", "cudaLaunchKernel"),
    *_kw(
        "sync",
        "cuStreamSynchronize",
        "cudaStreamSynchronize",
        "cuEventSynchronize",
        "cudaDeviceSynchronize",
    ),
    # Whole names: `malloc`/`free` as substrings matched file paths (`freelist.py`)
    # and unrelated symbols (`mallocator_stats`).
    *_kw(
        "alloc",
        "CUDACachingAllocator",
        "=malloc",
        "=free",
        "=calloc",
        "=realloc",
        "=posix_memalign",
        "re:^cuda(Malloc|Free)",
        "re:^cuMem(Alloc|Free)",
    ),
    *_kw("copy", "cudaMemcpy", "cuMemcpy"),
    # `.item()` is THPVariable_item / at::native::item; __getitem__, THPVariable_getitem
    # and at::indexing::get_item are indexing (all seen in bench/targets/torch_target.py captures).
    *_kw("host sync", "_local_scalar_dense", "re:(^|[.:]|THPVariable_)item$"),
    # Collectives of every backend: NCCL, gloo and c10d (ProcessGroup*, Work::wait), by
    # native name. Not the Python file: `distributed_c10d.py` also runs imports and
    # get_rank (the thread states know the Python API by function and file).
    *_kw("comm", "nccl", "re:^c10d::", "re:^gloo::"),
    *_kw("mask", "create_block_mask"),
    # pthread_cond_signal/broadcast wake others up: not a wait.
    *_kw("wait", "sched_yield", "futex", _COND_WAIT),
    *_kw("python queue", "queue"),
)


def load_keywords(spec: str) -> tuple[Keyword, ...]:
    """`gpu` (the default set), `none`, or a path to a keyword file.

    The file is JSON `[{"keyword": "...", "category": "..."}, ...]`, or text with
    one `category: keyword` per line (blank lines and `#` comments ignored); the
    keyword part may use any form of the module doc (`gil: =take_gil`).
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
    for kw in found:
        problem = keyword_problem(kw.keyword)
        if problem:
            raise ProfileError(f"keyword file {spec}: {problem}")
    return found
