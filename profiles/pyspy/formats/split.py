"""Splitting py-spy's speedscope output into what a capture stores: raw text and a track.

`split_speedscope` turns a `--format speedscope` file into
- the collapsed raw text (`py-spy record --format raw --threads`'s format: one
  `frames COUNT` line per distinct stack, with the synthetic `thread (TID): NAME` /
  `process PID:""` roots speedscope.py gives), whose every aggregate equals analysing
  the speedscope file itself: same stacks, counts and `skipped_lines` (each malformed
  sample is one `#` line at the end, which raw.py counts as skipped). The file is read
  by speedscope.py's own streaming reader and checked by its parser. Raw text cannot
  hold a `;` or a line break inside a frame, so such a frame is written as `export --to
  folded` writes it (`;` -> `:`, breaks -> spaces; py-spy never writes one), and a
  sample raw.py would read otherwise (a first frame `#...` or an unclosed `process N:"`,
  a line past MAX_LINE_CHARS) counts as malformed;
- its time track (formats/time_track.py): each thread's samples in order as record indexes, and
  the sampling clock the caller read on the host (`start`, `end`) with the rate, and
  each round's own time where py-spy stamped it (a chrometrace, read by chrometrace.py). Without
  `--idle`, or when samples carry counts, the track is `exact: false` with the reason.
"""

from __future__ import annotations

import math
import re
import zlib
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import compress
from typing import NamedTuple

from ..core.frames import is_synthetic, parse_process, parse_thread
from ..errors import ProfileError
from ..limits import MAX_LINE_CHARS, MAX_STACK_DEPTH
from .json_stream import JsonError, JsonStream, text_pieces
from .raw import folded_record
from .reading import PIECE, decoded_pieces
from .speedscope import (
    BAD_SAMPLE,
    TOO_LONG,
    parse_speedscope,
    read_speedscope,
    sample_indexes,
    thread_prefix,
)
from .time_track import MAX_NAME_CHARS, NO_LINE, ThreadTrack, Track

_UNSAFE = -2  # while splitting: a stack raw.py would not read back as it is
_SURROGATE = re.compile("[\ud800-\udfff]")
NOT_IDLE = (
    "recorded without --idle: py-spy dropped the samples of blocked threads, so a "
    "thread's samples are not its sampling rounds and carry no time"
)
COUNTED = (
    "the samples carry counts (an export that merged them), not py-spy's samples in the "
    "order they were taken"
)


class Split(NamedTuple):
    raw_text: str
    """Collapsed stacks, one record per line, `#` lines (malformed samples) last."""
    track: Track


def split_speedscope(
    data: bytes | str,
    *,
    start: float,
    end: float,
    rate: float,
    idle: bool,
    label: str = "input",
    window_from: float | None = None,
    times: Sequence[float] | None = None,
) -> Split:
    """py-spy speedscope output (bytes, maybe gzip, or text) -> raw text and time track.

    `start`/`end`: host epoch seconds read right before py-spy started and right after it
    stopped; `rate`: the requested rate; `idle`: whether py-spy ran with --idle.
    `window_from`: host epoch seconds of a scheduled window's start (a whole-job
    capture starts py-spy early so that its attach is over by then): the rounds placed
    before it are cut from every thread that lived through the capture, and the track
    starts at the first round kept. A thread with fewer samples than the rounds (born
    or ended within the capture) cannot be placed, and keeps all of its samples.
    `times`: each round's time in seconds since `start`, ascending from 0, where py-spy
    stamped them (profiles.pyspy.formats.chrometrace): rounds are placed there, and cut there.
    """
    _check_clock(start, end, rate)
    doc = _read(data, label)
    names = doc.names or []
    sampled = [p for p in doc.profiles or [] if p.type == "sampled"]
    stacks = list(doc.stacks)
    kept = [(str(p.name), p.samples, p.weights if p.unit == "none" else None) for p in sampled]
    if idle and window_from is not None:
        kept, start, times = _from_window(kept, start, end, window_from, times)
    profile = parse_speedscope(doc, label)  # the same checks and skipped_lines as `analyze`
    writer = _Records(names, stacks)
    threads = [writer.thread(name, samples, weights) for name, samples, weights in kept]
    if not writer.counts:
        raise ProfileError(f"{label} is empty: py-spy wrote no samples")
    lines = [f"{key} {count}" for key, count in zip(writer.keys, writer.counts, strict=True)]
    lines += ["# flamedeck: a malformed sample"] * (profile.skipped_lines + writer.unsafe)
    exact, reason = _exactness(idle, writer.counted)
    rounds = max((t.samples for t in threads), default=0)
    placed = array("d", times) if exact and times is not None and len(times) == rounds else None
    track = Track(
        start=float(start),
        end=float(end),
        rate=float(rate),
        rounds=rounds,
        records=len(writer.keys),
        threads=threads if exact else [],
        exact=exact,
        reason=reason,
        times=placed,
    )
    return Split("\n".join(lines) + "\n", track)


def _from_window(
    kept: list, start: float, end: float, window_from: float, times: Sequence[float] | None
) -> tuple[list, float, Sequence[float] | None]:
    """`kept` without the rounds placed before `window_from`, the new start and times."""
    rounds = max((len(samples) for _, samples, _ in kept if samples is not None), default=0)
    if not rounds or not start < window_from < end:
        return kept, start, times
    if times is not None and len(times) == rounds:
        cut = min(rounds - 1, bisect_left(times, window_from - start))
        at = times[cut]
        if cut > 0:
            times = [t - at for t in times[cut:]]
    else:
        step = (end - start) / rounds
        cut = min(rounds - 1, math.ceil((window_from - start) / step))
        at = cut * step
    if cut <= 0:
        return kept, start, times
    stamped = times is not None and len(times) + cut == rounds
    whole = []
    for name, samples, weights in kept:
        if samples is not None and len(samples) == rounds:
            samples, weights = samples[cut:], None if weights is None else weights[cut:]
        elif samples is not None and stamped:
            # py-spy's times (a chrometrace): a thread first seen later than the first
            # round holds the last rounds, so it loses only what it had before the cut.
            drop = max(0, cut - (rounds - len(samples)))
            samples, weights = samples[drop:], None if weights is None else weights[drop:]
        whole.append((name, samples, weights))
    return whole, start + at, times


def _check_clock(start: float, end: float, rate: float) -> None:
    for name, value in (("start", start), ("end", end), ("rate", rate)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ProfileError(f"the sampling clock's {name} is not a number: {value!r}")
        if not math.isfinite(value) or value < 0:
            raise ProfileError(f"the sampling clock's {name} is {value!r}")
    if end <= start or rate <= 0:
        raise ProfileError(f"the sampling clock is impossible: start {start}, end {end}")


def _exactness(idle: bool, counted: bool) -> tuple[bool, str | None]:
    if not idle:
        return False, NOT_IDLE
    if counted:
        return False, COUNTED
    return True, None


def _read(data: bytes | str, label: str):  # -> Speedscope
    if isinstance(data, str):
        pieces: Iterator[str] = text_pieces(data.removeprefix("\ufeff"), PIECE)
        if "\x00" in data:
            raise ProfileError(f"{label} is binary data, not py-spy output")
    else:
        import io

        raw = io.BytesIO(data)
        if data[:2] == b"\x1f\x8b":
            import gzip

            raw = gzip.GzipFile(fileobj=raw)  # type: ignore[assignment]
        pieces = decoded_pieces(raw, label)
    stream = JsonStream(pieces)
    try:
        if stream.peek() != "{":
            raise ProfileError(f"{label} is not speedscope JSON (a time track needs speedscope)")
        doc = read_speedscope(stream)
        stream.end()
    except (JsonError, EOFError, OSError, zlib.error) as exc:
        raise ProfileError(f"{label} looks like JSON but is truncated or invalid ({exc})") from None
    except RecursionError:
        raise ProfileError(f"{label} is JSON nested too deeply to be a profile") from None
    if not doc.is_speedscope:
        raise ProfileError(f"{label} is JSON but not a speedscope profile (no profiles/shared)")
    return doc


def _folded(name: str) -> str:
    """A frame as `export --to folded` writes it: raw text splits on `;` and line breaks."""
    if ";" in name or "\n" in name or "\r" in name:
        name = name.replace(";", ":").replace("\n", " ").replace("\r", " ")
    return name if name.isascii() else _SURROGATE.sub("\ufffd", name)


class _Records:
    """The raw text's records, first seen first, and each speedscope stack's record."""

    def __init__(self, names: list[str], stacks: list[str]) -> None:
        self.names, self.stacks = names, stacks
        self.folded = [_folded(n) if n is not TOO_LONG else n for n in names]
        self.index: dict[str, int] = {}
        self.keys: list[str] = []
        self.counts: list[int] = []
        self.unsafe = 0  # samples raw.py would read otherwise: counted as malformed
        self.counted = False  # some sample weighs more than one

    def thread(self, name: str, samples: array | None, weights: array | None) -> ThreadTrack:
        prefix = thread_prefix(name)
        lines = array("i")
        if samples is not None:
            record_of: dict[int, int] = {}
            for sid in set(samples):
                record_of[sid] = self._record(sid, prefix)
            lines = array("i", map(record_of.__getitem__, samples))
            self._count(lines, samples, weights)
        tid, tname, pid = _identity(prefix, name)
        return ThreadTrack(tid, tname, pid, lines=lines)

    def _record(self, sid: int, prefix: list[str]) -> int:
        if sid == BAD_SAMPLE:
            return NO_LINE
        try:
            ids = sample_indexes(self.stacks[sid])
            stack = [self.folded[i] for i in ids]
        except IndexError:  # a frame index past shared.frames: malformed
            return NO_LINE
        if any(f is TOO_LONG for f in stack):
            return NO_LINE
        if not (stack and is_synthetic(self.names[ids[0]])):
            stack = [*map(_folded, prefix), *stack]
        if not stack:
            return NO_LINE  # speedscope.py counts an empty stack nowhere
        key = ";".join(stack)
        found = self.index.get(key)
        if found is None:
            if not _reads_back(key, stack):
                self.index[key] = found = _UNSAFE
            else:
                found = self.index[key] = len(self.keys)
                self.keys.append(key)
                self.counts.append(0)
        return found

    def _count(self, lines: array, samples: array, weights: array | None) -> None:
        counts = self.counts
        if weights is None:
            for record, n in Counter(lines).items():
                if record >= 0:
                    counts[record] += n
                elif record == _UNSAFE:
                    self.unsafe += n
        else:
            size = len(weights)
            for index, record in enumerate(lines):
                weight = weights[index] if index < size else BAD_SAMPLE
                if weight < 0:
                    lines[index] = NO_LINE  # speedscope.py counts it as malformed
                elif record >= 0:
                    counts[record] += weight
                    self.counted = self.counted or weight != 1
                elif record == _UNSAFE:
                    self.unsafe += 1  # one malformed line per sample, whatever its weight
        if _UNSAFE in lines:
            for index in compress(range(len(lines)), map(_UNSAFE.__eq__, lines)):
                lines[index] = NO_LINE


def _reads_back(key: str, stack: list[str]) -> bool:
    """Whether raw.py reads `key COUNT` as exactly these frames, within its limits."""
    if len(key) + 20 > MAX_LINE_CHARS or len(stack) > MAX_STACK_DEPTH:
        return False
    if not key.startswith(("#", "p")):
        return True
    if key.startswith("#"):
        return False
    record = folded_record(f"{key} 1")
    return record is not None and record[0] == stack


def _identity(prefix: list[str], name: str) -> tuple[int | str, str, int | None]:
    """(tid, name, pid) from the profile's name (`Process 10 Thread 11 "x"`)."""
    thread = parse_thread(prefix[-1]) if prefix else None
    if thread is None:
        return "", name[:MAX_NAME_CHARS], None
    process = parse_process(prefix[0]) if len(prefix) > 1 else None
    return thread[0], thread[1][:MAX_NAME_CHARS], process[0] if process else None
