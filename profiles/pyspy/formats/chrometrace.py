"""py-spy's `--format chrometrace` read as samples with times: the clock of a timeline.

py-spy's speedscope keeps each thread's samples in order but no time: py-spy sleeps an
exponentially distributed interval between rounds (src/timer.rs), so placing round k
linearly between the start and the end is off by up to half a second in the middle of
a 40 s capture at 50 Hz. Its chrometrace stamps time instead: `B` (begin) and `E` (end)
events, one per frame that changed since the previous sample written under the same
`tid`, with `ts` in microseconds since py-spy created its recorder (before it
attaches), the same `ts` for every event of one sample; at the end, `E` events at the
write time close the last stack of every `tid`. A sample whose stack did not change
writes nothing, and there is no round counter. With `--subprocesses` one timer samples
every process in each round (src/sampler.rs), so rounds are the same for all of them.

What `tid` is (py-spy 0.4.3, measured): the thread's pthread handle, not its OS id, and
py-spy keys its previous stacks by it alone, whatever the process. A forked child's
threads have their parent's handles (the thread that forked it: a DataLoader worker's
MainThread shares the rank's), so parent and child take turns under one `tid`: each
sample of either differs from the one before and is written, and `E` events close the
other's frames under the `pid` of the sample being written. A thread's own OS id and
its process are in the `thread (TID): NAME` and innermost `process PID:"CMD"` frames
at the root of its stacks, which is how a thread is told apart here.

`chrometrace_samples` rebuilds the rounds: the samples of every thread that changed,
grouped as py-spy writes them (one process after another, each process's threads
together, within microseconds; rounds are milliseconds apart: a thread or a process
seen again starts the next round), are the rounds py-spy shows. py-spy stamps a sample
as it writes it, so on a loaded host a round can be cut by a pause of milliseconds: it
stays one round while it lacks a thread written in every round. A thread is sampled in
every round from its first until it ended, and when it ended is known when another
thread's sample is next written under its `tid` (a child sampled turn about with its
parent, a thread whose handle a new thread got): had it been sampled after that, its
stack would have been written again. It ended by that round; a process whose
MainThread (TID == PID) ended ended with all its threads. A thread never followed
under its `tid` lasts to the end. The rounds in which no thread changed are not shown
(while two threads take turns under a `tid`, every round is): their number comes from
py-spy's own count (`Samples: N` in its log, every thread's samples together) less the
samples shown, or the span at the requested rate without a log, spread over the gaps
between shown rounds by how much longer than one round's interval each gap is, at even
steps, each repeating the stacks before it of the threads alive then. Their count, not
their time, is estimated: every change of stack is placed where py-spy took it. The
result is py-spy's speedscope of the same samples, one profile per thread (so
splitting and every analysis read it as they read a speedscope record), and each
round's time.

What the format cannot say: when a thread that no other thread followed under its
`tid` ended (a spawned, not forked, child; the last thread of its handle) - its last
stack lasts to the end - and which samples failed (py-spy's `Errors`). Without `--idle`
a blocked thread gives no sample and its last stack would seem to last: only `--idle`
records are read here.
"""

from __future__ import annotations

import io
import json
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from itertools import pairwise
from typing import NamedTuple

from ..core.frames import is_synthetic, parse_process, parse_thread
from ..errors import ProfileError
from .json_stream import JsonError, JsonStream, text_pieces
from .reading import PIECE, decoded_pieces

AFTER_INTERVALS = 5
"""py-spy sampled on after a round when it stopped more than this many mean intervals
later (none in between by chance: e^-5, under 1%)."""
ROUND_GAP_US = 1000
"""Samples of one round are stamped within microseconds: more than this apart (or a
thread seen twice, or a process seen again after another's) starts another round,
unless the round lacks a thread written in every round (`_group`)."""


class Samples(NamedTuple):
    speedscope: str
    """py-spy's speedscope JSON of the same samples (root-first stacks, weights 1/rate)."""
    times: list[float]
    """Each round's time in seconds since py-spy's clock started (ascending)."""
    end_s: float
    """When py-spy stopped sampling (wrote the file, or `stopped_s`), on the same clock."""
    shown: int
    """Rounds in which some thread's stack changed (the rest are estimated)."""
    firsts: dict[str, int]
    """Per profile (by name), the index in `times` of its first sample: its samples are
    one a round from there on."""


class _Life(NamedTuple):
    first: int
    """The first shown round it is in."""
    last: int
    """The last shown round it is in."""
    open: bool
    """Nothing says it ended: it is in the rounds after `last` too, to the end."""


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
    window_s: float | None = None,
    label: str = "input",
) -> Samples:
    """py-spy's chrometrace -> its samples as speedscope and each round's time (module doc).
    `samples_reported`: py-spy's `Samples: N`; `stopped_s`: when py-spy was told to stop,
    on its clock, if known (its write can come seconds later on a loaded host: the
    unshown rounds after the last shown one end there); `window_s`: where a scheduled
    window starts on its clock, if any: the rounds before it are cut from every thread
    (from a thread that ended before it, all of them), and so are those before py-spy
    first sampled the process it was pointed at; ProfileError on input it cannot use."""
    if not rate > 0:
        raise ProfileError(f"{label}: the sampling rate must be positive, not {rate!r}")
    events = _events(data, label)
    frames: dict[tuple, int] = {}
    writes, end_us = _writes(events, frames, label)
    if not writes:
        raise ProfileError(f"{label} is empty: py-spy wrote no samples")
    names = list(frames)
    if stopped_s is not None and math.isfinite(stopped_s):
        end_us = max(max(w[0] for w in writes), min(end_us, round(stopped_s * 1e6)))
    rounds, lives, titles, shared, roots = _rounds(writes, names, end_us, rate)
    hidden = _hidden(rounds, lives, shared, end_us, rate, samples_reported)
    times, samples = _profiles(rounds, lives, hidden, end_us)
    if window_s is not None and math.isfinite(window_s):
        cut = min(len(times) - 1, bisect_left(times, window_s))
        times, samples = _from_round(times, samples, cut)
    # py-spy attaches to each process on its own: its first rounds can miss the process
    # it was pointed at (the rank), whose threads then would not hold every round.
    # Those rounds are cut too, as the window's are.
    if len(roots) == 1:
        (root,) = roots
        own = [first for who, (first, texts) in samples.items() if who[0] == root and texts]
        times, samples = _from_round(times, samples, min(own, default=0))
    kept = [(titles[who], first, texts) for who, (first, texts) in samples.items() if texts]
    profiles = ",".join(_profile(title, texts, rate) for title, _, texts in kept)
    table = json.dumps(
        {"frames": [{"name": n, "file": f, "line": ln, "col": None} for n, f, ln in names]}
    )
    doc = (
        '{"$schema":"https://www.speedscope.app/file-format-schema.json",'
        f'"profiles":[{profiles}],"shared":{table},'
        '"exporter":"flamedeck (from py-spy chrometrace)"}'
    )
    firsts = {title: first for title, first, _ in kept}
    return Samples(doc, times, end_us / 1e6, len(rounds), firsts)


def _events(data: bytes | str, label: str) -> Iterator[object]:
    """The events one batch at a time: a long capture's chrometrace is hundreds of MB,
    and decoded whole its events took ten times that (the capture worker holds every
    host's session). Only what the rounds need is kept (`_writes`)."""
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


def _event(event: object, label: str) -> tuple[int, str, int, tuple]:
    """(tid, phase, ts, frame key) of one event; ProfileError otherwise."""
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
    return tid, ph, ts, (name, file, line)


def _writes(events: Iterable[object], frames: dict[tuple, int], label: str) -> tuple[list, int]:
    """Each sample py-spy wrote, as (ts, order, tid, stack root-first), replayed as py-spy
    keeps them (by `tid` alone: module doc), and the write time (the last `ts`). One
    sample's events share a `ts` and run `E`s then `B`s, so a `B` then an `E` under the
    same `ts` starts the next sample (another process's, under a shared `tid`). A
    change that empties a stack is the write's close."""
    stacks: dict[int, list[int]] = {}
    writes: list[tuple[int, int, int, tuple[int, ...]]] = []
    current: tuple[int, int] | None = None
    began = False  # the current sample has pushed a frame
    end_us = 0
    for event in events:
        tid, ph, ts, key = _event(event, label)
        if current is not None and (current != (tid, ts) or (began and ph == "E")):
            _close(writes, stacks, current)
            began = False
        current, end_us = (tid, ts), max(end_us, ts)
        stack = stacks.setdefault(tid, [])
        if ph == "B":
            stack.append(frames.setdefault(key, len(frames)))
            began = True
        elif stack:
            stack.pop()
    if current is not None:
        _close(writes, stacks, current)
    return writes, end_us


def _close(writes: list, stacks: dict, current: tuple) -> None:
    tid, ts = current
    if stacks[tid]:
        writes.append((ts, len(writes), tid, tuple(stacks[tid])))


class _Threads:
    """Who a stack is: (pid of its innermost `process` frame or None, the TID of its
    `thread (TID)` frame or else py-spy's `tid`), and each one's speedscope title."""

    def __init__(self, names: list[tuple]) -> None:
        self.names = names
        self.kinds: dict[int, tuple[str, object] | None] = {}
        self.titles: dict[tuple, str] = {}
        self.roots: set = set()  # the outermost process of each stack: py-spy's target

    def who(self, tid: int, stack: tuple[int, ...]) -> tuple:
        pid = thread = None
        name = ""
        for index in stack:
            kind = self.kinds.get(index, False)
            if kind is False:
                kind = self.kinds[index] = self._kind(index)
            if kind is None:
                break
            if kind[0] == "process":
                if pid is None:
                    self.roots.add(kind[1])
                pid = kind[1]
            elif thread is None:
                thread, name = kind[1]
        if pid is None:
            self.roots.add(None)
        who = (pid, thread if thread is not None else ("tid", tid))
        if name or who not in self.titles:
            shown = thread if thread is not None else tid
            title = f'Thread {shown} "{name}"' if name else f"Thread {shown}"
            self.titles[who] = f"Process {pid} {title}" if pid is not None else title
        return who

    def _kind(self, index: int) -> tuple[str, object] | None:
        name = self.names[index][0]
        if not is_synthetic(name):
            return None
        if name.startswith("thread ("):
            return "thread", parse_thread(name)
        return "process", parse_process(name)[0]


def _rounds(
    writes: list, names: list[tuple], stop_us: int, rate: float
) -> tuple[list, dict, dict, list]:
    """(time in µs, {thread: stack}) per shown round in order; each thread's life in
    them (module doc: when another thread is next written under its `tid`); each
    thread's speedscope title; the sets of threads written under one `tid`.
    `stop_us`: when py-spy stopped sampling."""
    gap = min(ROUND_GAP_US, 0.05e6 / rate)
    threads = _Threads(names)
    stream = [(ts, tid, threads.who(tid, stack), stack) for ts, _, tid, stack in sorted(writes)]
    rounds, under = _group(stream, gap)
    lives = _lives(rounds, under, stop_us, rate)
    shared = [whose for whose in ({w for _, w in u} for u in under.values()) if len(whose) > 1]
    turns = _takers(lives, shared, len(rounds))
    if any(turns):
        starts = [ts for ts, _ in rounds]
        rounds, under = _group(stream, gap, lambda ts: turns[bisect_right(starts, ts) - 1])
        lives = _lives(rounds, under, stop_us, rate)
    return rounds, lives, threads.titles, shared, threads.roots


def _group(stream: list, gap: float, takers=None) -> tuple[list, dict]:  # noqa: ANN001
    """The writes as rounds, and (round, thread) per `tid` as written. py-spy writes a
    round's samples one process after another, each process's threads together, within
    microseconds: a thread seen twice, or a process seen again after another's, starts
    the next round. So does a gap longer than `gap` after the round's first sample,
    unless `takers(ts)` (the threads taking turns under a `tid`: each is written in every
    round, `_takers`) names one the round lacks: py-spy was held up amid the round
    (a loaded host; its stamps are taken as it writes), and the rest of it follows."""
    rounds: list[tuple[int, dict]] = []
    under: dict[int, list[tuple[int, tuple]]] = {}
    processes: set = set()
    last_pid: object = None
    for ts, tid, who, stack in stream:
        pid = who[0]
        new = not rounds or who in rounds[-1][1] or (pid != last_pid and pid in processes)
        if not new and ts - rounds[-1][0] > gap:
            lacking = takers(rounds[-1][0]) if takers else None
            new = not lacking or lacking <= rounds[-1][1].keys()
        if new:
            rounds.append((ts, {}))
            processes = set()
        rounds[-1][1][who] = stack
        processes.add(pid)
        last_pid = pid
        under.setdefault(tid, []).append((len(rounds) - 1, who))
    return rounds, under


def _lives(
    rounds: list[tuple[int, dict]], under: dict, stop_us: int, rate: float
) -> dict[tuple, _Life]:
    """Each thread's life in the shown rounds (module doc); `stop_us`: when py-spy
    stopped sampling."""
    first: dict[tuple, int] = {}
    final: dict[tuple, int] = {}  # the last round each thread was written in
    for k, (_, changed) in enumerate(rounds):
        for who in changed:
            first.setdefault(who, k)
            final[who] = k
    last = len(rounds) - 1
    lives = {who: _Life(k, last, True) for who, k in first.items()}
    for written in under.values():
        seen = {written[0][1]}  # the threads written under this `tid` so far
        for (k, who), (after, other) in pairwise(written):
            # Written no more though py-spy's next round would have written it: it ended
            # by `after` (in `after` itself, one sample more, if py-spy samples it before
            # `other` and it was hidden). That needs a round after `after`: a shown one,
            # or, when the two were written in turn before, py-spy sampling on for a few
            # intervals more. A newcomer in py-spy's last shown round says nothing of a
            # thread sampled before it there, unchanged (a late write would end it).
            sampled_on = after < last or (
                other in seen and stop_us - rounds[after][0] > AFTER_INTERVALS * 1e6 / rate
            )
            if other != who and k == final[who] and sampled_on:
                lives[who] = _Life(first[who], max(k, after - 1), False)
            seen.add(other)
    for (pid, tid), life in list(lives.items()):
        if pid is not None and tid == pid and not life.open:  # its process ended
            for who, other in lives.items():
                if who[0] == pid and other.last > life.last:
                    lives[who] = _Life(other.first, max(final[who], life.last), False)
    return lives


def _takers(lives: dict, shared: list[set], n: int) -> list[frozenset]:
    """Per shown round, the threads alive then that take turns under a `tid`: one that
    shares it with a thread alive in this round and the one before is written in this
    round, whichever of the two py-spy samples first."""
    changes: dict[int, list[tuple[tuple, int]]] = {}
    for whose in shared:
        both = [0] * (n + 1)  # members alive in the round before and this one
        for who in whose:
            life = lives[who]
            both[life.first + 1] += 1
            both[life.last + 1] -= 1
        both = _running(both)
        for who in whose:
            life, taking = lives[who], False
            for k in range(life.first, life.last + 2):
                now = k <= life.last and both[k] - (k > life.first) > 0
                if now != taking:
                    changes.setdefault(k, []).append((who, 1 if now else -1))
                    taking = now
    turns, current = [], frozenset()
    for k in range(n):
        if k in changes:
            found = set(current)
            for who, step in changes[k]:
                (found.add if step > 0 else found.discard)(who)
            current = frozenset(found)
        turns.append(current)
    return turns


def _alive(lives: Iterable[_Life], n: int) -> tuple[list[int], list[int]]:
    """How many of these threads each shown round has, and each gap after one (the
    hidden rounds there)."""
    shown, gaps = [0] * (n + 1), [0] * (n + 1)
    for life in lives:
        shown[life.first] += 1
        shown[life.last + 1] -= 1
        gaps[life.first] += 1
        gaps[n if life.open else life.last] -= 1
    return _running(shown)[:n], _running(gaps)[:n]


def _turns(lives: dict, shared: list[set], n: int) -> list[bool]:
    """Per gap after a shown round: whether two threads alive then share a `tid`. Then
    every round writes a sample (each differs from the other's before it under the
    `tid`): none is hidden there."""
    turns = [False] * n
    for whose in shared:
        _, alive = _alive((lives[who] for who in whose), n)
        turns = [t or a > 1 for t, a in zip(turns, alive, strict=True)]
    return turns


def _running(deltas: list[int]) -> list[int]:
    total, out = 0, []
    for d in deltas:
        total += d
        out.append(total)
    return out


def _hidden(
    rounds: list[tuple[int, dict]],
    lives: dict,
    shared: list[set],
    end_us: int,
    rate: float,
    reported: int | None,
) -> list[int]:
    """How many unshown rounds follow each shown one (module doc)."""
    n = len(rounds)
    first = rounds[0][0]
    span = max(end_us - first, 1)
    in_round, in_gap = _alive(lives.values(), n)
    turns = _turns(lives, shared, n)
    ends = [ts for ts, _ in rounds[1:]] + [end_us]
    if reported:
        # The threads sampled in an average round, over the span: py-spy's count is
        # theirs, every round of their lives.
        lived = sum(a * (b - ts) for a, (ts, _), b in zip(in_gap, rounds, ends, strict=True))
        total = reported / (lived / span) if lived > 0 else n
    else:
        total = span / 1e6 * rate
    interval = span / max(total, n)
    extra = [
        max(0.0, b - a - interval) if alive and not turn else 0.0
        for (a, _), b, alive, turn in zip(rounds, ends, in_gap, turns, strict=True)
    ]
    weight = sum(extra)
    if weight <= 0:
        return [0] * n
    if reported:
        # Hidden samples, shared by the threads alive in each gap.
        missing_samples = reported - sum(in_round)
        per_round = sum(e * a for e, a in zip(extra, in_gap, strict=True)) / weight
        missing = max(0, round(missing_samples / per_round))
    else:
        missing = max(0, round(total) - n)
    if not missing:
        return [0] * n
    share = [missing * e / weight for e in extra]
    counts = [math.floor(s) for s in share]
    by_rest = sorted(range(len(share)), key=lambda i: counts[i] - share[i])
    for i in by_rest[: missing - sum(counts)]:
        counts[i] += 1
    return counts


def _profiles(
    rounds: list[tuple[int, dict]], lives: dict, hidden: list[int], end_us: int
) -> tuple[list[float], dict[tuple, tuple[int, list[str]]]]:
    """Each round's time (s), and each thread's samples, (its first round's index, a stack
    as JSON text per round, root first), in the rounds of its life: an unshown round
    repeats the last stack of every thread alive then."""
    times: list[float] = []
    samples: dict[tuple, tuple[int, list[str]]] = {}
    last: dict[tuple, str] = {}
    alive: dict[tuple, list[str]] = {}
    ending: dict[int, list[tuple]] = {}
    for who, life in lives.items():
        if not life.open:
            ending.setdefault(life.last, []).append(who)
    ends = [ts for ts, _ in rounds[1:]] + [end_us]
    for k, ((ts, changed), after, until) in enumerate(zip(rounds, hidden, ends, strict=True)):
        for who, stack in changed.items():
            last[who] = "[" + ",".join(map(str, stack)) + "]"
            if who not in samples:
                samples[who] = (len(times), [])
                alive[who] = samples[who][1]
        step = (until - ts) / (after + 1)
        for m in range(after + 1):
            if m == 1:  # the threads that ended in this round are not in those after it
                for who in ending.get(k, ()):
                    alive.pop(who, None)
            times.append((ts + m * step) / 1e6)
            for who, texts in alive.items():
                texts.append(last[who])
        if not after:
            for who in ending.get(k, ()):
                alive.pop(who, None)
    return times, samples


def _from_round(
    times: list[float], samples: dict[tuple, tuple[int, list[str]]], cut: int
) -> tuple[list[float], dict[tuple, tuple[int, list[str]]]]:
    """The rounds from `cut` on, each thread's samples in them."""
    if cut <= 0:
        return times, samples
    kept = {}
    for who, (first, texts) in samples.items():
        drop = max(0, cut - first)
        kept[who] = (max(0, first - cut), texts[drop:])
    return times[cut:], kept


def _profile(title: str, texts: list[str], rate: float) -> str:
    """One thread's speedscope profile, named as py-spy names it (`Process P Thread T
    "name"`)."""
    weight = 1 / rate
    return (
        f'{{"type":"sampled","name":{json.dumps(title)},"unit":"seconds","startValue":0.0,'
        f'"endValue":{len(texts) * weight},"samples":[{",".join(texts)}],'
        f'"weights":[{",".join([repr(weight)] * len(texts))}]}}'
    )


__all__ = ["Samples", "chrometrace_samples", "is_chrometrace"]
