"""py-spy's `--format chrometrace` read as samples with times: the clock of a timeline.

py-spy's speedscope keeps each thread's samples in order but no time: py-spy sleeps an
exponentially distributed interval between rounds (src/timer.rs), so placing round k
linearly between the start and the end is off by up to half a second in the middle of
a 40 s capture at 50 Hz. Its chrometrace stamps time instead: for each thread, `B`
(begin) and `E` (end) events, one per frame that changed since the thread's previous
sample, with `ts` in microseconds since py-spy created its recorder (before it
attaches), the same `ts` for every event of one sample; at the end, `E` events at the
write time close every thread's last stack. A sample whose stack did not change writes
nothing, and there is no round counter.

`chrometrace_samples` rebuilds the rounds: the samples of every thread that changed,
grouped by time (a round samples every thread within microseconds; rounds are
milliseconds apart), are the rounds py-spy shows. The rounds in which no thread changed
are not shown: their number is py-spy's own count (`Samples: N` in its log, every
thread's samples together) less those shown, or the span at the requested rate without
a log, spread over the gaps between shown rounds by how much longer than one round's
interval each gap is, at even steps, each repeating the stacks before it. Their count,
not their time, is estimated: every change of stack is placed where py-spy took it.
The result is py-spy's speedscope of the same samples (so splitting and every analysis
read it as they read a speedscope record) and each round's time.

What the format cannot say: when a thread ended (its last stack lasts to the end), and
which samples failed (py-spy's `Errors`). Without `--idle` a blocked thread gives no
sample and its last stack would seem to last: only `--idle` records are read here.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from itertools import takewhile
from typing import NamedTuple

from .errors import ProfileError
from .frames import is_synthetic, parse_process, parse_thread
from .jsonstream import JsonError, JsonStream, text_pieces
from .reading import PIECE, decoded_pieces

ROUND_GAP_US = 1000
"""Samples of one round are stamped within microseconds: more than this apart (or a
thread seen twice) starts another round."""


class Samples(NamedTuple):
    speedscope: str
    """py-spy's speedscope JSON of the same samples (root-first stacks, weights 1/rate)."""
    times: list[float]
    """Each round's time in seconds since py-spy's clock started (ascending)."""
    end_s: float
    """When py-spy stopped sampling (wrote the file, or `stopped_s`), on the same clock."""
    shown: int
    """Rounds in which some thread's stack changed (the rest are estimated)."""


def is_chrometrace(data: bytes | str) -> bool:
    """Whether `data` looks like a chrometrace (a JSON list), not speedscope (an object)."""
    head = data[:64].lstrip()
    return head[:1] in ("[", b"[")


def chrometrace_samples(
    data: bytes | str,
    *,
    rate: float,
    samples_reported: int | None = None,
    stopped_s: float | None = None,
    label: str = "input",
) -> Samples:
    """py-spy's chrometrace -> its samples as speedscope and each round's time (module doc).
    `samples_reported`: py-spy's `Samples: N`; `stopped_s`: when py-spy was told to stop,
    on its clock, if known (its write can come seconds later on a loaded host: the
    unshown rounds after the last shown one end there); ProfileError on input it
    cannot use."""
    if not rate > 0:
        raise ProfileError(f"{label}: the sampling rate must be positive, not {rate!r}")
    events = _events(data, label)
    frames: dict[tuple, int] = {}
    changes, end_us = _changes(events, frames, label)
    if not changes:
        raise ProfileError(f"{label} is empty: py-spy wrote no samples")
    rounds = _rounds(changes, rate)
    if stopped_s is not None and math.isfinite(stopped_s):
        end_us = max(rounds[-1][0], min(end_us, round(stopped_s * 1e6)))
    hidden = _hidden(rounds, end_us, rate, samples_reported)
    times, samples = _profiles(rounds, hidden, end_us, rate)
    names = list(frames)
    profiles = ",".join(_profile(t, texts, names, rate) for t, texts in samples.items())
    shared = json.dumps(
        {"frames": [{"name": n, "file": f, "line": ln, "col": None} for n, f, ln in names]}
    )
    doc = (
        '{"$schema":"https://www.speedscope.app/file-format-schema.json",'
        f'"profiles":[{profiles}],"shared":{shared},'
        '"exporter":"flamedeck (from py-spy chrometrace)"}'
    )
    return Samples(doc, times, end_us / 1e6, len(rounds))


def _events(data: bytes | str, label: str) -> Iterator[object]:
    """The events one batch at a time: a long capture's chrometrace is hundreds of MB,
    and decoded whole its events took ten times that (the capture worker holds every
    host's session). Only what the rounds need is kept (`_changes`)."""
    if isinstance(data, str):
        pieces = text_pieces(data.removeprefix("\ufeff"), PIECE)
    else:
        pieces = decoded_pieces(io.BytesIO(data), label)
    stream = JsonStream(pieces)
    try:
        if stream.peek() != "[":
            raise ProfileError(f"{label} is not a chrometrace (a list of events)")
        yield from stream.values()
        stream.end()
    except (JsonError, EOFError, RecursionError) as exc:
        raise ProfileError(f"{label} is not chrometrace JSON ({exc})") from None


def _event(event: object, label: str) -> tuple[tuple, str, int, tuple]:
    """((pid, tid), phase, ts, frame key) of one event; ProfileError otherwise."""
    if not isinstance(event, dict):
        raise ProfileError(f"{label}: an event is not an object")
    ph, ts, pid, tid = event.get("ph"), event.get("ts"), event.get("pid"), event.get("tid")
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    name, file, line = event.get("name"), args.get("filename", ""), args.get("line") or 0
    ints = (ts, pid, tid, line)
    if ph not in ("B", "E") or not all(isinstance(v, int) and v >= 0 for v in ints):
        raise ProfileError(f"{label}: an event is not py-spy's (ph B/E, ts, pid, tid)")
    if not isinstance(name, str) or not isinstance(file, str):
        raise ProfileError(f"{label}: an event's name or file is not text")
    return (pid, tid), ph, ts, (name, file, line)


def _changes(events: Iterable[object], frames: dict[tuple, int], label: str) -> tuple[list, int]:
    """Each thread's samples that changed, as (ts, order, thread, stack root-first), and
    the write time (the last `ts`). A change that empties a stack is the write's close."""
    stacks: dict[tuple, list[int]] = {}
    changes: list[tuple[int, int, tuple, tuple[int, ...]]] = []
    current: tuple | None = None
    end_us = 0
    for event in events:
        thread, ph, ts, key = _event(event, label)
        if current is not None and current != (thread, ts):
            _close(changes, stacks, current)
        current, end_us = (thread, ts), max(end_us, ts)
        stack = stacks.setdefault(thread, [])
        if ph == "B":
            stack.append(frames.setdefault(key, len(frames)))
        elif stack:
            stack.pop()
    if current is not None:
        _close(changes, stacks, current)
    return changes, end_us


def _close(changes: list, stacks: dict, current: tuple) -> None:
    thread, ts = current
    if stacks[thread]:
        changes.append((ts, len(changes), thread, tuple(stacks[thread])))


def _rounds(changes: list, rate: float) -> list[tuple[int, dict]]:
    """(time in µs, {thread: stack}) per shown round, in order."""
    gap = min(ROUND_GAP_US, 0.05e6 / rate)
    rounds: list[tuple[int, dict]] = []
    for ts, _, thread, stack in sorted(changes):
        if not rounds or ts - rounds[-1][0] > gap or thread in rounds[-1][1]:
            rounds.append((ts, {}))
        rounds[-1][1][thread] = stack
    return rounds


def _hidden(
    rounds: list[tuple[int, dict]], end_us: int, rate: float, reported: int | None
) -> list[int]:
    """How many unshown rounds follow each shown one (module doc)."""
    first = rounds[0][0]
    span = max(end_us - first, 1)
    born: dict[tuple, int] = {}
    for ts, changed in rounds:
        for thread in changed:
            born.setdefault(thread, ts)
    lived = sum(end_us - ts for ts in born.values()) / span  # threads, averaged over the span
    total = reported / lived if reported and lived > 0 else span / 1e6 * rate
    missing = max(0, round(total) - len(rounds))
    interval = span / max(total, len(rounds))
    ends = [ts for ts, _ in rounds[1:]] + [end_us]
    extra = [max(0.0, b - a - interval) for (a, _), b in zip(rounds, ends, strict=True)]
    weight = sum(extra)
    if not missing or weight <= 0:
        return [0] * len(rounds)
    share = [missing * e / weight for e in extra]
    counts = [math.floor(s) for s in share]
    by_rest = sorted(range(len(share)), key=lambda i: counts[i] - share[i])
    for i in by_rest[: missing - sum(counts)]:
        counts[i] += 1
    return counts


def _profiles(
    rounds: list[tuple[int, dict]], hidden: Sequence[int], end_us: int, rate: float
) -> tuple[list[float], dict[tuple, list[str]]]:
    """Each round's time (s), and each thread's samples from its first round on (a stack
    as JSON text, root first): an unshown round repeats every thread's last stack."""
    times: list[float] = []
    samples: dict[tuple, list[str]] = {}
    last: dict[tuple, str] = {}
    ends = [ts for ts, _ in rounds[1:]] + [end_us]
    for (ts, changed), after, until in zip(rounds, hidden, ends, strict=True):
        for thread, stack in changed.items():
            last[thread] = "[" + ",".join(map(str, stack)) + "]"
            samples.setdefault(thread, [])
        step = (until - ts) / (after + 1)
        for m in range(after + 1):
            times.append((ts + m * step) / 1e6)
            for thread, text in last.items():
                samples[thread].append(text)
    return times, samples


def _profile(thread: tuple, texts: list[str], names: list[tuple], rate: float) -> str:
    """One thread's speedscope profile, named as py-spy names it (`Process P Thread T
    "name"`) from the synthetic frames at the root of its stacks."""
    head = texts[0][1 : texts[0].find("]")].split(",")
    roots = list(takewhile(is_synthetic, (names[int(i)][0] for i in head if i)))
    found = [parse_thread(f) for f in roots if f.startswith("thread (")]
    process = [parse_process(f) for f in roots if f.startswith("process ")]
    tid, name = found[0] if found and found[0] else (thread[1], "")
    title = f'Thread {tid} "{name}"' if name else f"Thread {tid}"
    if process and process[-1]:  # the innermost: the process the thread runs in
        title = f"Process {process[-1][0]} {title}"
    weight = 1 / rate
    return (
        f'{{"type":"sampled","name":{json.dumps(title)},"unit":"seconds","startValue":0.0,'
        f'"endValue":{len(texts) * weight},"samples":[{",".join(texts)}],'
        f'"weights":[{",".join([repr(weight)] * len(texts))}]}}'
    )


__all__ = ["Samples", "chrometrace_samples", "is_chrometrace"]
