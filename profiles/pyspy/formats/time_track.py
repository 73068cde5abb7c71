"""Time tracks: when each sample was taken, kept beside the raw text that is analysed.

py-spy's `--format speedscope` keeps each thread's samples in order, and with `--idle
--threads` every live thread gives one sample per sampling round, so sample k of a
thread that lived through the capture is round k. A Track holds, per thread (tid, name,
pid), the sequence of its samples as indexes of the raw text's records (its non-blank,
non-`#` lines, in order; NO_LINE for a sample that counts nowhere), and the sampling
clock: `start`/`end` (host epoch seconds read right before py-spy starts and right after
it stops), `rate` (requested) and `rounds` (the most samples a thread has). split.py
makes one from a speedscope file. Round k is placed at start + k * (end - start) /
rounds: py-spy's own pace, a lag or a slow start spread evenly over the rounds. A thread
with fewer samples than `rounds` (born or ended mid-capture) cannot be placed: it is
"untimed" and left out of time features. A track may also hold `times`: each round's
own time in seconds since the first (py-spy's `--format chrometrace` stamps each change
of stack, profiles.pyspy.formats.chrometrace): rounds are then placed there, not linearly.

Why linear, and how exact: py-spy sleeps an exponentially distributed interval between
rounds (src/timer.rs, against aliasing: py-spy#94), so its rounds are a Poisson process;
given n of them between start and end, their times are n sorted uniform draws, whose
k-th lies on average at k/n of the span, within span * sqrt(p (1 - p) / n) (one
standard deviation, p = k/n): 0.27 s in the middle of 13 s at 50 Hz, 1.2 s in the middle
of 10 minutes at 100 Hz (`placement_sd_s`). Order is exact; place is this good.

Without `--idle` py-spy drops the samples of blocked threads, so a thread's order says
nothing of time: the track is `exact: false` with a `reason` and holds no sequences.
A file whose samples carry counts (an export, not py-spy's order) is the same.

Serialised (`track_json`, gzip it to store; `load_track` reads plain or gzip):
{"format": "flamedeck-time-track", "version": 1, "start", "end", "rate", "rounds",
 "records", "exact", "reason", "threads": [{"tid", "name", "pid", "samples",
 "lines": "3,5,3", "runs": "1,40,2"}], "states": ["compute", "idle"], "record_states":
 "01-0", "times": "0,20113,19870"} - the thread's samples run-length encoded: record 3
once, 5 forty times, 3 twice; `times` (optional: a track without it is placed
linearly) each round's time as microseconds after the round before (the first 0);
and, once the analysis has classified them (timed.with_states), each record's state as
one base-36 index into `states` (`-`: none), so a timeline is read, not recomputed.
`load_track` is strict and bounded (MAX_TRACK_*): anything else is a ProfileError
naming what is wrong.
"""

from __future__ import annotations

import json
import math
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Iterable
from itertools import accumulate, chain, compress, pairwise, repeat
from operator import ne
from typing import Any

from ..errors import ProfileError

TRACK_FORMAT = "flamedeck-time-track"
TRACK_VERSION = 1
NO_LINE = -1
"""A sample that counts in no record (malformed, or an empty stack)."""
MAX_TRACK_BYTES = 1 << 27
"""A serialised track (decompressed) longer than this is refused: 10 minutes at 100 Hz
on 8 threads takes about 3 MB."""
MAX_TRACK_SAMPLES = 1 << 25
"""Samples of all threads together (4 bytes each once read): an hour at 100 Hz on 90
threads."""
MAX_TRACK_THREADS = 4096
MAX_NAME_CHARS = 4096
_DIGITS = str.maketrans("", "", "0123456789,-")
_SLICE = 1 << 16
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


class ThreadTrack:
    """One thread's samples in order, as record indexes: kept as runs (value, length), the
    way the track stores them; `lines` expands them once, when asked."""

    __slots__ = ("_ends", "_lines", "_runs", "name", "pid", "samples", "tid")

    def __init__(
        self,
        tid: int | str,
        name: str,
        pid: int | None,
        lines: array | None = None,
        runs: tuple[array, array] | None = None,
    ) -> None:
        self.tid, self.name, self.pid = tid, name, pid
        self._lines, self._runs, self._ends = lines, runs, None
        if lines is not None:
            self.samples = len(lines)
        else:
            self.samples = sum(runs[1]) if runs is not None else 0

    @property
    def lines(self) -> array:
        """Each sample's record index (int32), in order."""
        if self._lines is None:
            values, runs = self.runs()
            self._lines = expand(values, runs, self.samples)
        return self._lines

    def runs(self) -> tuple[array, array]:
        """(record index, run length) pairs as two arrays."""
        if self._runs is None:
            values, runs = run_lengths(self.lines)
            self._runs = array("i", values), array("i", runs)
        return self._runs

    def run_ends(self) -> array:
        """Per run, one past its last sample (cumulative lengths; cached)."""
        if self._ends is None:
            self._ends = array("q", accumulate(self.runs()[1]))
        return self._ends


class Track:
    """The sampling clock and every thread's samples in order (see the module doc)."""

    __slots__ = (
        "end", "exact", "rate", "reason", "record_states", "records", "rounds", "start",
        "threads", "times",
    )  # fmt: skip

    def __init__(
        self,
        *,
        start: float,
        end: float,
        rate: float,
        rounds: int,
        records: int,
        threads: list[ThreadTrack],
        exact: bool = True,
        reason: str | None = None,
        record_states: list[str | None] | None = None,
        times: array | None = None,
    ) -> None:
        self.start, self.end, self.rate, self.rounds = start, end, rate, rounds
        # Each round's time in seconds since `start` (ascending, the first 0), when
        # py-spy stamped them; None: rounds are placed linearly (module doc).
        self.times = times
        self.records, self.threads, self.exact, self.reason = records, threads, exact, reason
        # Each record's thread state, decided at analysis time (timed.with_states), so
        # reading a timeline classifies nothing; None until then.
        self.record_states = record_states

    @property
    def step_s(self) -> float:
        """Seconds between two rounds on the host's clock."""
        return (self.end - self.start) / self.rounds if self.rounds else 0.0

    @property
    def duration_s(self) -> float:
        return self.end - self.start

    def at(self, k: int) -> float:
        """Round k's time in seconds since `start` (k == rounds: the end)."""
        if self.times is None or k >= self.rounds:
            return k * self.step_s if k < self.rounds else self.duration_s
        return self.times[max(0, k)]

    def round_at(self, seconds: float) -> int:
        """The first round placed at or after `seconds` since `start` (rounds if none)."""
        if self.times is None:
            step = self.step_s
            return min(self.rounds, max(0, math.ceil(seconds / step - 1e-9))) if step else 0
        return bisect_left(self.times, seconds - 1e-9)

    def placement_sd_s(self, k: int) -> float:
        """How far round k's true time may lie from its place (one standard deviation, s)."""
        if not self.rounds or self.times is not None:
            return 0.0
        p = min(1.0, max(0.0, k / self.rounds))
        return self.duration_s * math.sqrt(p * (1 - p) / self.rounds)

    def timed(self) -> list[ThreadTrack]:
        """The threads sampled in every round: those whose samples have times."""
        return [t for t in self.threads if t.samples == self.rounds] if self.exact else []

    def untimed(self) -> list[ThreadTrack]:
        return [t for t in self.threads if t.samples != self.rounds] if self.exact else []


class TimeUnavailable(ProfileError):
    """The capture has no time (no track, or a track that is not exact): the reason."""


def require_time(track: Track | None) -> Track:
    """The track when its samples have times; TimeUnavailable with the reason otherwise."""
    if track is None:
        raise TimeUnavailable(
            "this capture keeps no time (an imported file, or one recorded before "
            "captures kept it): only whole-capture figures are available"
        )
    if not track.exact:
        raise TimeUnavailable(f"this capture has no times: {track.reason}")
    if not track.rounds or not track.timed():
        raise TimeUnavailable("this capture has no thread sampled in every round")
    return track


def track_json(track: Track) -> str:
    """The track as compact JSON (module doc); gzip it to store it."""
    doc: dict[str, Any] = {
        "format": TRACK_FORMAT,
        "version": TRACK_VERSION,
        "start": track.start,
        "end": track.end,
        "rate": track.rate,
        "rounds": track.rounds,
        "records": track.records,
        "exact": track.exact,
        "reason": track.reason,
        "threads": [_thread_json(t) for t in track.threads],
    }
    if track.record_states is not None:
        doc["states"], doc["record_states"] = _states_json(track.record_states)
    if track.times is not None:
        micros = [round(t * 1e6) for t in track.times]
        doc["times"] = ",".join(map(str, (b - a for a, b in pairwise([0, *micros]))))
    return json.dumps(doc, separators=(",", ":"))


def _states_json(states: list[str | None]) -> tuple[list[str], str]:
    """The distinct state names, and one character per record: its name's index in
    base 36, or `-` for none."""
    names = sorted({s for s in states if s is not None})
    index = {name: _BASE36[i] for i, name in enumerate(names)}
    return names, "".join(index[s] if s is not None else "-" for s in states)


def _thread_json(thread: ThreadTrack) -> dict[str, Any]:
    lines, runs = thread.runs()
    return {
        "tid": thread.tid,
        "name": thread.name,
        "pid": thread.pid,
        "samples": thread.samples,
        "lines": ",".join(map(str, lines)),
        "runs": ",".join(map(str, runs)),
    }


def run_lengths(values: array) -> tuple[list[int], list[int]]:
    """(value, run length) pairs of a sequence, as two lists."""
    n = len(values)
    if not n:
        return [], []
    starts = [0, *compress(range(1, n), map(ne, values[1:], values[: n - 1])), n]
    return [values[i] for i in starts[:-1]], [b - a for a, b in pairwise(starts)]


def load_track(data: bytes | str, label: str = "track") -> Track:
    """A serialised track (plain or gzip); ProfileError naming what is wrong otherwise."""
    text = _track_text(data, label)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ProfileError(f"{label} is not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != TRACK_FORMAT:
        raise ProfileError(f"{label} is not a flamedeck time track")
    if doc.get("version") != TRACK_VERSION:
        raise ProfileError(f"{label} is a time track of version {doc.get('version')!r}, not 1")
    return _track_of(doc, label)


def _track_text(data: bytes | str, label: str) -> str:
    if isinstance(data, str):
        if len(data) > MAX_TRACK_BYTES:
            raise ProfileError(f"{label} is longer than {MAX_TRACK_BYTES} characters")
        return data
    if data[:2] == b"\x1f\x8b":
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            data = inflate.decompress(data, MAX_TRACK_BYTES + 1)
        except zlib.error as exc:
            raise ProfileError(f"{label} is truncated or corrupt gzip ({exc})") from None
        if not inflate.eof and len(data) <= MAX_TRACK_BYTES:
            raise ProfileError(f"{label} is truncated gzip")
    if len(data) > MAX_TRACK_BYTES:
        raise ProfileError(f"{label} is longer than {MAX_TRACK_BYTES} bytes once decompressed")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{label} is not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _number(doc: dict, key: str, label: str, *, whole: bool = False) -> Any:
    value = doc.get(key)
    kinds = int if whole else int | float
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ProfileError(f"{label}: `{key}` is not a {'whole ' if whole else ''}number")
    if not math.isfinite(value) or value < 0:
        raise ProfileError(f"{label}: `{key}` is {value!r}")
    return value


def _track_of(doc: dict, label: str) -> Track:
    start, end = _number(doc, "start", label), _number(doc, "end", label)
    rate = _number(doc, "rate", label)
    rounds = _number(doc, "rounds", label, whole=True)
    records = _number(doc, "records", label, whole=True)
    if end <= start or rate <= 0:
        raise ProfileError(f"{label}: the sampling clock is impossible (start {start}, end {end})")
    exact, reason, threads = doc.get("exact"), doc.get("reason"), doc.get("threads")
    if not isinstance(exact, bool) or not (reason is None or isinstance(reason, str)):
        raise ProfileError(f"{label}: `exact` must be true or false and `reason` text or null")
    if not exact and not reason:
        raise ProfileError(f"{label}: a track that is not exact must say why (`reason`)")
    if not isinstance(threads, list) or len(threads) > MAX_TRACK_THREADS:
        raise ProfileError(f"{label}: `threads` must be a list of at most {MAX_TRACK_THREADS}")
    if rounds > MAX_TRACK_SAMPLES:
        raise ProfileError(f"{label}: {rounds} rounds is more than {MAX_TRACK_SAMPLES}")
    budget = [MAX_TRACK_SAMPLES]
    read = [_thread_of(t, i, rounds, records, budget, label) for i, t in enumerate(threads)]
    record_states = _record_states(doc, records, label)
    times = _times(doc, rounds, end - start, label)
    return Track(
        start=float(start),
        end=float(end),
        rate=float(rate),
        rounds=rounds,
        records=records,
        threads=read,
        exact=exact,
        reason=reason,
        record_states=record_states,
        times=times,
    )


def _times(doc: dict, rounds: int, span: float, label: str) -> array | None:
    """Each round's time (seconds since the start) from `times`, or None without it."""
    text = doc.get("times")
    if text is None:
        return None
    deltas = _ints(text, label, "times", max(rounds, 1))
    if len(deltas) != rounds or (deltas and deltas[0] != 0):
        raise ProfileError(f"{label}: `times` must hold one time per round, the first 0")
    times = array("d", (t / 1e6 for t in accumulate(deltas)))
    if times and times[-1] > span + 1e-6:
        raise ProfileError(f"{label}: `times` runs past the track's end")
    return times


def _record_states(doc: dict, records: int, label: str) -> list[str | None] | None:
    names, text = doc.get("states"), doc.get("record_states")
    if names is None and text is None:
        return None
    if (
        not isinstance(names, list)
        or len(names) > len(_BASE36)
        or not all(isinstance(n, str) and 0 < len(n) <= 64 for n in names)
    ):
        raise ProfileError(f"{label}: `states` must be a list of at most 36 state names")
    if not isinstance(text, str) or len(text) != records:
        raise ProfileError(f"{label}: `record_states` must hold one character per record")
    by_char: dict[str, str | None] = dict(zip(_BASE36, names, strict=False))
    by_char["-"] = None
    try:
        return [by_char[c] for c in text]
    except KeyError as exc:
        raise ProfileError(f"{label}: `record_states` names no state with {exc}") from None


def _thread_of(
    item: object, index: int, rounds: int, records: int, budget: list[int], label: str
) -> ThreadTrack:
    where = f"{label}: thread {index}"
    if not isinstance(item, dict):
        raise ProfileError(f"{where} is not an object")
    tid, name, pid = item.get("tid"), item.get("name"), item.get("pid")
    if isinstance(tid, bool) or not isinstance(tid, int | str) or not isinstance(name, str):
        raise ProfileError(f"{where}: `tid` must be a number or text and `name` text")
    if len(name) > MAX_NAME_CHARS or (isinstance(tid, str) and len(tid) > MAX_NAME_CHARS):
        raise ProfileError(f"{where}: its name is longer than {MAX_NAME_CHARS} characters")
    if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int)):
        raise ProfileError(f"{where}: `pid` must be a number or null")
    samples = _number(item, "samples", where, whole=True)
    if samples > rounds or samples > budget[0]:
        raise ProfileError(f"{where} has {samples} samples, more than the track allows")
    budget[0] -= samples
    values = _ints(item.get("lines"), where, "lines", max(samples, 1))
    runs = _ints(item.get("runs"), where, "runs", max(samples, 1))
    if len(values) != len(runs):
        raise ProfileError(f"{where}: `lines` and `runs` differ in length")
    if runs and (min(runs) < 1 or sum(runs) != samples):
        raise ProfileError(f"{where}: its runs do not add up to its {samples} samples")
    if not runs and samples:
        raise ProfileError(f"{where}: its runs do not add up to its {samples} samples")
    if values and (min(values) < NO_LINE or max(values) >= records):
        raise ProfileError(f"{where} names a record the raw text does not have")
    return ThreadTrack(tid, name, pid, runs=(values, runs))


def _ints(text: object, where: str, key: str, most: int) -> array:
    """Comma-separated whole numbers, at most `most` of them, read a slice at a time so
    a long list never exists as a list of strings."""
    if not isinstance(text, str) or not text.isascii() or text.translate(_DIGITS):
        raise ProfileError(f"{where}: `{key}` must be comma-separated whole numbers")
    out = array("i")
    if not text:
        return out
    if text.count(",") >= most:
        raise ProfileError(f"{where}: `{key}` holds more numbers than its samples")
    begin = 0
    try:
        while begin < len(text):
            cut = text.find(",", begin + _SLICE)
            cut = len(text) if cut < 0 else cut
            out.extend(map(int, text[begin:cut].split(",")))
            begin = cut + 1
    except (ValueError, OverflowError):
        raise ProfileError(f"{where}: `{key}` holds something that is no number") from None
    return out


def expand(values: Iterable[int], runs: array, total: int) -> array:
    """Run-length pairs back to the sequence (C speed: no Python loop per sample)."""
    if len(runs) == total:
        return array("i", values)
    return array("i", chain.from_iterable(map(repeat, values, runs)))
