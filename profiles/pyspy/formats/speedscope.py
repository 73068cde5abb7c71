"""py-spy `--format speedscope`: JSON with shared frames and one sampled profile per thread.

Each sample (a list of frame indices, root first) counts as one sample, because
py-spy gives every sample the same weight (1/rate seconds); for files whose unit
is "none" and whose weights are whole numbers, the weight is the count. The
profile name `Thread 5066 "target-2"` (or `Process 10 Thread 11 "name"`) becomes
the same synthetic root frames raw output has (`process 10:""`, `thread (11): name`)
unless the samples already start with them (py-spy --threads), so both formats
analyse alike. Frame names are `name (file:line)` with the file as given (py-spy
writes full paths here, short ones in raw). Malformed samples count in `skipped_lines`.

The document is read as a stream (formats/json_stream.py), never as one object tree: each
sample is reduced to the id of its distinct frame list (4-8 bytes a sample), each
weight to a count, and frames to their names, in whatever order the keys come
(py-spy writes "profiles" before "shared"). The checks then run on that summary in
the order a decoded document would be checked, so a broken file gets the same reason.
A sample deeper than MAX_STACK_DEPTH or naming a frame longer than MAX_FRAME_CHARS
counts in `skipped_lines` (limits.py); such frame names are not kept.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from typing import Any

from ..core.frames import is_synthetic
from ..core.profile import Profile, ProfileBuilder
from ..errors import ProfileError
from ..limits import MAX_FRAME_CHARS, MAX_STACK_DEPTH
from .json_stream import JsonStream

_NAME = re.compile(r'(?:Process (\d+) )?Thread (\d+|0[xX][0-9a-fA-F]+)(?: "(.*)")?\Z', re.S)
_INT = r"(?:0|[1-9][0-9]*)"
_NUM = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
_LIST = rf"\[ *(?:{_INT}(?: *, *{_INT})*)? *\]"
# A sample as py-spy (no spaces) or json.dumps (", ") writes it; anything else
# (newlines inside, floats, nesting) takes the slow path through the decoder.
_SAMPLE = re.compile(rf"[ \t\n\r]*({_LIST})[ \t\n\r]*([,\]])")
_NUMBER = re.compile(rf"[ \t\n\r]*({_NUM})[ \t\n\r]*([,\]])")
_CANONICAL_SAMPLE = re.compile(rf"(?:{_INT}(?:,{_INT})*)?")
_CANONICAL_NUMBER = re.compile(_NUM)
_SPACE = re.compile(r"[ \t\n\r]+")
# Characters a run of samples (or weights) may hold; str.translate deletes them, so
# anything left over sends the run to the element-by-element path.
_SAMPLE_CHARS = str.maketrans("", "", "0123456789,[]")
_NUMBER_CHARS = str.maketrans("", "", "0123456789,.eE+-")
BAD_SAMPLE = -1
"""The id of a sample that is not a list of frame indexes; the count of a weight that
is a number but no whole count."""
_NO_WEIGHT = -2
"""The count of a weight that is no weight at all (its problem is kept beside it)."""


class _NotCanonical(Exception):
    """A run holds text that is not what it seemed (`01`, `1,,2`): read it item by item."""


class _Ids(dict[str, int]):
    """Distinct samples as canonical text (`3,1,4`: valid JSON ints, no spaces) -> id."""

    def __missing__(self, text: str) -> int:
        if _CANONICAL_SAMPLE.fullmatch(text) is None:
            raise _NotCanonical(text)
        if text.count(",") >= MAX_STACK_DEPTH:
            return BAD_SAMPLE  # too deep: counted as malformed, and its text is not kept
        value = self[text] = len(self)
        return value


class _Counts(dict[str, int]):
    """A weight's JSON text -> its count, BAD_SAMPLE or _NO_WEIGHT (py-spy repeats one weight)."""

    def __init__(self) -> None:
        super().__init__()
        self.problems: dict[str, str] = {}
        self.texts: list[str] = []  # the last run's, to name its first problem

    def __missing__(self, text: str) -> int:
        if _CANONICAL_NUMBER.fullmatch(text) is None:
            raise _NotCanonical(text)
        count = _weight_count(float(text) if any(c in text for c in ".eE") else int(text))
        if isinstance(count, str):
            self.problems[text], count = count, _NO_WEIGHT
        self[text] = count
        return count


class Sampled:
    """What one profile object of the document leaves behind once read."""

    __slots__ = ("name", "samples", "type", "unit", "weight_problem", "weights")

    def __init__(self) -> None:
        self.type: Any = None
        self.name: Any = ""
        self.unit: Any = None
        self.samples: array | None = None
        """Per sample, the id of its frame list in Speedscope.stacks; None: not a list."""
        self.weights: array | None = None
        """Per weight, its count (BAD_SAMPLE: not whole, _NO_WEIGHT: no number); None: none."""
        self.weight_problem: str | None = None
        """Why the weights are unusable (the first bad weight), if they are."""


class Speedscope:
    """A speedscope document reduced as it streams: frame names, profiles, distinct stacks."""

    def __init__(self) -> None:
        self.is_speedscope = False
        self.names: list[str] | None = None
        self.profiles: list[Sampled] | None = None
        self.stacks = _Ids()
        self.weight_counts = _Counts()


def read_speedscope(stream: JsonStream) -> Speedscope:
    """Read the JSON object at the stream's position (invalid JSON raises JsonError)."""
    doc, seen = Speedscope(), set()
    for key in stream.members():
        seen.add(key)
        if key == "shared":
            doc.names = _read_shared(stream)
        elif key == "profiles":
            doc.profiles = _read_profiles(stream, doc)
        else:
            stream.value()
    doc.is_speedscope = {"profiles", "shared"} <= seen
    return doc


def parse_speedscope(doc: Speedscope, label: str = "input") -> Profile:
    """Build a Profile from a document read by read_speedscope."""
    if doc.names is None:
        raise ProfileError(f"{label} is speedscope JSON without shared.frames")
    if doc.profiles is None:
        raise ProfileError(f"{label} is speedscope JSON without a list of profiles")
    sampled = [p for p in doc.profiles if p.type == "sampled"]
    if not sampled:
        raise ProfileError(
            f"{label} is speedscope JSON with no sampled profiles "
            "(evented profiles are not py-spy output)"
        )
    stacks, doc.stacks = list(doc.stacks), {}
    builder = ProfileBuilder()
    for prof in sampled:
        _add_profile(builder, prof, doc.names, stacks, label)
    return builder.build("speedscope")


def _read_shared(stream: JsonStream) -> list[str] | None:
    if stream.peek() != "{":
        stream.value()
        return None
    names = None
    for key in stream.members():
        if key == "frames" and stream.peek() == "[":
            names = [_bounded(_frame_name(frame)) for frame in stream.values()]
        else:
            names = None if key == "frames" else names
            stream.value()
    return names


TOO_LONG = "(frame name too long)"
"""This very object (compared by identity) stands for a frame name past
MAX_FRAME_CHARS: the samples naming it count as malformed."""


def _bounded(name: str) -> str:
    return TOO_LONG if len(name) > MAX_FRAME_CHARS else name


def _frame_name(frame: object) -> str:
    if not isinstance(frame, dict):
        return str(frame)
    name, file, line = str(frame.get("name", "?")), frame.get("file"), frame.get("line")
    if file and isinstance(line, int) and line > 0:
        return f"{name} ({file}:{line})"
    return f"{name} ({file})" if file else name


def _read_profiles(stream: JsonStream, doc: Speedscope) -> list[Sampled] | None:
    if stream.peek() != "[":
        stream.value()
        return None
    profiles = []
    for _ in stream.items():
        if stream.peek() == "{":
            profiles.append(_read_profile(stream, doc))
        else:
            stream.value()
    return profiles


def _read_profile(stream: JsonStream, doc: Speedscope) -> Sampled:
    prof = Sampled()
    for key in stream.members():
        is_list = stream.peek() == "["
        if key == "samples":
            prof.samples = _read_samples(stream, doc.stacks) if is_list else _skip(stream)
        elif key == "weights" and is_list:
            prof.weights, prof.weight_problem = _read_weights(stream, doc.weight_counts)
        elif key == "weights":
            prof.weights = None
            prof.weight_problem = _skip(stream, "whose weights are not a list")
        elif key in ("type", "name", "unit"):
            setattr(prof, key, stream.value())
        else:
            stream.value()
    return prof


def _skip(stream: JsonStream, problem: str | None = None) -> str | None:
    """Read past a value that is not the array it should be; `problem` unless it is null."""
    return None if stream.value() is None else problem


def _read_samples(stream: JsonStream, stacks: _Ids) -> array:
    """Each sample's stack id. The hot loop of a big file: runs of plain samples are
    split and looked up at C speed; the rest (and each run's last one) one at a time."""
    ids = array("l")
    stream.take("[", "Expecting value")
    if stream.peek() == "]":
        stream.pos += 1
        return ids
    wait = 0  # after a run that was not plain, go item by item for a while
    while True:
        stream.peek()  # past whitespace (json.dumps's ", ")
        ended = None if wait else _samples_run(stream, stacks, ids)
        wait = wait - 1 if wait else (64 if ended is None else 0)
        if ended:
            stream.pos += 1  # the array's own "]"
            return ids
        found = stream.match(_SAMPLE)
        if found is not None:
            text, after = found.groups()
            ids.append(stacks[_canonical(text)[1:-1]])
        else:
            ids.append(_stack_id(stream.value(), stacks))
            after = stream.peek()
            stream.pos += 1
        if after == "]":
            return ids
        if after != ",":
            raise stream.error("Expecting ',' delimiter", stream.pos - 1)


def _samples_run(stream: JsonStream, stacks: _Ids, ids: array) -> bool | None:
    """Read the plain samples in the buffer up to the array's end (`]]`: True) or past
    the last complete one and its comma (False); None when they are not plain (then
    nothing is read)."""
    buf, pos = stream.buf, stream.pos
    close = buf.find("]]", pos)
    cut = close + 1 if close >= 0 else buf.rfind("],", pos) + 2
    if cut <= pos + 1:
        return False
    text = _plain(buf[pos:cut])
    body = text[1:-2] if close < 0 else text[1:-1]
    if text[0] != "[" or text.translate(_SAMPLE_CHARS):
        return None
    separated = body.replace("],[", "")
    if "[" in separated or "]" in separated:
        return None
    done = len(ids)
    try:
        ids.extend(map(stacks.__getitem__, body.split("],[")))
    except _NotCanonical:
        del ids[done:]
        return None
    stream.pos = cut
    return close >= 0


def _plain(text: str) -> str:
    """A run without json.dumps's ", " separators; other whitespace (`1 2`) is left for
    the translate check to refuse."""
    return text.replace(", ", ",") if ", " in text else text


def _canonical(text: str) -> str:
    text = text.replace(" ", "") if " " in text else text
    return _SPACE.sub("", text) if _SPACE.search(text) else text


def _stack_id(sample: object, stacks: _Ids) -> int:
    if type(sample) is not list or not all(type(i) is int and i >= 0 for i in sample):
        return BAD_SAMPLE  # a frame index is a whole number (not true, not 1.0)
    return stacks[",".join(map(str, sample))]


def _read_weights(stream: JsonStream, seen: _Counts) -> tuple[array, str | None]:
    """Counts per weight, and the first reason a weight is no weight at all."""
    counts, problem = array("q"), None
    stream.take("[", "Expecting value")
    if stream.peek() == "]":
        stream.pos += 1
        return counts, problem
    wait = 0
    while True:
        done = len(counts)
        stream.peek()
        ended = None if wait else _weights_run(stream, seen, counts)
        wait = wait - 1 if wait else (64 if ended is None else 0)
        if problem is None and _NO_WEIGHT in counts[done:]:
            problem = seen.problems[seen.texts[counts.index(_NO_WEIGHT, done) - done]]
        if ended:
            stream.pos += 1
            return counts, problem
        found = stream.match(_NUMBER)
        if found is not None:
            text, after = found.groups()
            count = seen[text]
            problem = problem or seen.problems.get(text)
        else:
            count = _weight_count(stream.value())
            after = stream.peek()
            stream.pos += 1
            if isinstance(count, str):
                problem, count = problem or count, _NO_WEIGHT
        counts.append(count)
        if after == "]":
            return counts, problem
        if after != ",":
            raise stream.error("Expecting ',' delimiter", stream.pos - 1)


def _weights_run(stream: JsonStream, seen: _Counts, counts: array) -> bool | None:
    """Read the plain numbers in the buffer up to the array's end (True) or its last
    comma (False); None when they are not plain (then nothing is read)."""
    buf, pos = stream.buf, stream.pos
    close = buf.find("]", pos)
    cut = close if close >= 0 else buf.rfind(",", pos) + 1
    if cut <= pos:
        return False
    text = _plain(buf[pos:cut])
    if text.translate(_NUMBER_CHARS) or (close >= 0) == text.endswith(","):
        return None  # other characters, or `1,]` / a last number cut by the buffer
    seen.texts = text.removesuffix(",").split(",")
    done = len(counts)
    try:
        counts.extend(map(seen.__getitem__, seen.texts))
    except _NotCanonical:
        del counts[done:]
        return None
    stream.pos = cut
    return close >= 0


def _weight_count(weight: object) -> int | str:
    """The weight as a sample count (BAD_SAMPLE when not whole); a reason when it is no weight."""
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        return "with a weight that is not a number"
    if not math.isfinite(weight) or weight < 0:
        return f"with a weight of {weight!r}: weights must be finite and not negative"
    if weight != int(weight) or weight >= 10**18:
        return BAD_SAMPLE
    return int(weight)


_ints = json.JSONDecoder().decode


def sample_indexes(text: str) -> list[int]:
    """A canonical sample text back to its frame indexes (json's C parser is the fastest)."""
    return _ints(f"[{text}]")


def thread_prefix(profile_name: str) -> list[str]:
    match = _NAME.match(profile_name)
    if match is None:
        return []
    pid, tid, tname = match.groups()
    prefix = [f'process {pid}:""'] if pid else []
    prefix.append(f"thread ({tid}): {tname}" if tname else f"thread ({tid})")
    return prefix


def _add_profile(
    builder: ProfileBuilder, prof: Sampled, names: list[str], stacks: list[str], label: str
) -> None:
    if prof.samples is None:
        builder.skipped_lines += 1
        return
    if prof.weight_problem is not None:
        raise ProfileError(f"{label} is speedscope JSON {prof.weight_problem}")
    prefix = thread_prefix(str(prof.name))
    weights = prof.weights if prof.unit == "none" else None
    merged, bad = _merged(prof.samples, weights)
    out_of_range = set()
    for sid, count in merged.items():
        try:
            stack = [names[i] for i in sample_indexes(stacks[sid])]
        except IndexError:  # a frame index past shared.frames
            out_of_range.add(sid)
            continue
        if any(name is TOO_LONG for name in stack):
            out_of_range.add(sid)
            continue
        if stack and is_synthetic(stack[0]):
            builder.add(stack, count)  # py-spy --threads already put them in
        elif stack or prefix:
            builder.add(prefix + stack, count)
    if out_of_range:
        bad += _occurrences(prof.samples, weights, out_of_range)
    builder.skipped_lines += bad
    prof.samples = prof.weights = None


def _merged(samples: array, weights: array | None) -> tuple[dict[int, int], int]:
    """Identical samples summed before they reach the trie (py-spy repeats them a lot),
    in the order of their first counted occurrence; and the number of samples that are
    no list of frame indexes or whose weight is no count."""
    merged: dict[int, int] = {}
    get, bad, size = merged.get, 0, len(weights) if weights is not None else 0
    for index, sid in enumerate(samples):
        count = 1 if weights is None else (weights[index] if index < size else BAD_SAMPLE)
        if sid == BAD_SAMPLE or count < 0:
            bad += 1
        else:
            merged[sid] = get(sid, 0) + count
    return merged, bad


def _occurrences(samples: array, weights: array | None, sids: set[int]) -> int:
    """How many counted samples have one of these stacks (rare: only broken files)."""
    size = len(weights) if weights is not None else 0
    return sum(
        1
        for index, sid in enumerate(samples)
        if sid in sids and (weights is None or (index < size and weights[index] >= 0))
    )
