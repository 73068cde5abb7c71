"""A rank's child processes (DataLoader workers) in a `--subprocesses` record, kept apart
from the rank, and the whole-job report told what they do.

py-spy `record --subprocesses` writes every stack under `process PID:"CMD"` frames:
the rank's own under the rank's frame, a child's under the rank's frame then its own
(a grandchild under three); its speedscope output, once split into raw text
(split.py), reads the same. A command line may hold `;` or newlines (raw.py glues
them back).

- `split_processes(lines, pid)`: the rank's own lines with its process frame removed
  (what a record without `--subprocesses` writes, so the rank's stats, states,
  straggler rule and Processes table count the rank's own samples and nothing else),
  the children's lines as they were, the rank's rounds (its busiest thread's samples:
  one a round with `--idle`), and where each record went; `own_track` cuts the
  record's time track (formats/time_track.py) the same way.
- `worker_summary(lines, rounds=...)`: what the children did. A process counts by the
  samples of its main thread (tid == pid; else its busiest thread): with `--idle` one
  a round for as long as it lived, so a share of them is a share of its time, as a
  clock in the worker would measure it. Each sample is in the innermost function of
  the user's own code (rules/user_code.py) *below* where the process began: a forked worker's
  stack starts with its parent's frames at the fork (`train (train.py)` → ... →
  `BaseProcess._bootstrap (multiprocessing/process.py)`), which the worker never runs.
  Comprehension frames (`<listcomp>` of Python 3.11) count as the function that holds
  them. A sample with no user frame there (a worker waiting for indices in torch's
  `_worker_loop`) is outside the user's code. Frames are named as py-spy names them
  by default (frames.renamed), whether the record kept full paths or not.
- `with_workers(report, workers)`: the job report (job.analyze_job) with each rank's
  `workers`, and an `input_bound` finding, or a straggler explained by data_wait, that
  names its ranks' workers' hottest user function and share ("rank-1's 2 DataLoader
  workers spend 91% in `tokenize (data.py:33)`").

Standard library only; frame and command texts are untrusted (the page escapes them).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypedDict

from ..core.frames import (
    installed_packages,
    parse_process,
    parse_thread,
    renamed,
    split_location,
)
from ..count.functions import function_name
from ..formats.raw import PROCESS_OPEN, folded_record
from ..formats.time_track import NO_LINE, ThreadTrack, Track
from ..rules.user_code import UserCode

TOP_FUNCTIONS = 10
MAX_PROCESSES = 16  # processes listed with their command (most samples first)
MAX_PIDS = 256  # pids kept (a job respawning workers every epoch for hours has thousands)
MAX_COMMAND = 200
_MAX_HELD = 64  # physical lines one record may span (as raw.py)
_COMPREHENSIONS = ("<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>")
_LOADER_LOOP = "torch/utils/data/_utils/worker.py"
OUTSIDE = "(outside your code)"


class WorkerFunction(TypedDict):
    """A function of the user's code the workers were in (innermost on their stacks)."""

    function: str
    """`name (file.py)`: the function, any line."""
    frame: str
    """Its line seen in most samples."""
    samples: int
    """The workers' samples in it."""
    percent: float
    """Their share of the workers' samples, 0-100 (of their time, with --idle)."""


class WorkerProcess(TypedDict):
    """One child process of the rank."""

    pid: int
    """Its PID."""
    command: str
    """Its command line (hidden from viewers of the server's own processes)."""
    samples: int
    """Its main thread's samples."""


class WorkerStats(TypedDict):
    """A rank's child processes (DataLoader workers) over one whole-job capture: never
    ranks, and never counted in the rank's own states."""

    count: int
    """How many ran at once: the most the host saw at the start or end of the window,
    else their samples over the rank's rounds."""
    pids: list[int]
    """Every one sampled (workers respawned every epoch each have their own)."""
    processes_seen: int
    """How many were sampled."""
    dataloader: bool
    """Every one ran torch's DataLoader worker loop."""
    samples: int
    """Their main threads' samples, of which the shares are."""
    rounds: int | None
    """The rank's sampling rounds (its busiest thread's samples)."""
    sampled_percent: float | None
    """Their samples over `count` x `rounds`, at most 100: how much of their time the
    shares cover (py-spy attaches to a new worker within about a second, so workers
    respawned often are seen less); None when the rounds are not known."""
    functions: list[WorkerFunction]
    """The functions of the user's code they were in, most samples first (top 10)."""
    outside_percent: float
    """Share of their samples in no function of the user's code (waiting for work)."""
    processes: list[WorkerProcess]
    """The processes with most samples (top 16)."""


class WorkersFact(TypedDict):
    """What a rank's workers do most, as an input_bound finding or a straggler explained
    by data_wait carries it."""

    rank: str
    """The rank."""
    count: int
    """Its workers at once."""
    dataloader: bool
    """They are DataLoader workers."""
    function: str
    """Their hottest function of the user's code."""
    frame: str
    """Its line seen in most samples."""
    percent: float
    """Its share of the workers' samples, 0-100."""
    text: str
    """The sentence the advice carries."""


class Split(NamedTuple):
    own: list[str]
    """The rank's own lines, its process frame removed."""
    children: list[str]
    """Its children's lines, process frames kept."""
    rounds: int
    """Samples of the rank's busiest thread (its rounds when recorded with --idle)."""
    kept: list[int]
    """Per record of the input (non-blank, non-`#` line), its index among the rank's own
    records, or NO_LINE when it went to a child: a time track's samples follow it."""


def _records(lines: Iterable[str]) -> Iterable[tuple[str, tuple[list[str], int] | None]]:
    """(text, (frames, count)) per record; (text, None) for a line that is none."""
    held: list[str] = []
    for line in lines:
        text = line.rstrip("\r\n")
        if held:
            joined = "\n".join([*held, text])
            record = folded_record(joined)
            if record is not None:
                held = []
                yield joined, record
                continue
            if len(held) < _MAX_HELD and not text.startswith(("process ", "thread (")):
                held.append(text)
                continue
            yield from ((h, None) for h in held)
            held = []
        record = folded_record(text) if text else None
        if record is None and PROCESS_OPEN.match(text):
            held = [text]
            continue
        yield text, record
    yield from ((h, None) for h in held)


def _process_depth(frames: Sequence[str]) -> int:
    depth = 0
    while depth < len(frames) and parse_process(frames[depth]) is not None:
        depth += 1
    return depth


def split_processes(lines: Iterable[str], pid: int | None = None) -> Split:
    """A rank's own lines and its children's (see the module doc). A record is the
    rank's when its innermost process frame is `pid` (py-spy's `--pid`, so in py-spy's
    PID namespace); without `pid`, or when no record is under it, when it is under one
    process frame only (py-spy's root: the nested frames of `--format raw`). Lines that
    are no record (comments, garbage) stay with the rank, whose analysis counts them."""
    read = list(_records(lines))
    seen = pid is not None and any(r is not None and _innermost(r[0]) == pid for _, r in read)
    own: list[str] = []
    children: list[str] = []
    kept: list[int] = []
    threads: Counter[str] = Counter()
    records = 0  # the rank's own so far
    for text, record in read:
        counted = bool(text.strip()) and not text.startswith("#")  # a time track's record
        if record is None or not (depth := _process_depth(record[0])):
            own.append(text)
            kept += [records] * counted
            records += counted
            continue
        frames, count = record
        if not (_innermost(frames) == pid if seen else depth == 1):
            children.append(text)
        elif depth < len(frames):
            own.append(f"{';'.join(frames[depth:])} {count}")
            kept.append(records)
            records += 1
            if parse_thread(frames[depth]) is not None:
                threads[frames[depth]] += count
            continue
        kept.append(NO_LINE)
    return Split(own, children, max(threads.values(), default=0), kept)


def _innermost(frames: Sequence[str]) -> int | None:
    depth = _process_depth(frames)
    parsed = parse_process(frames[depth - 1]) if depth else None
    return parsed[0] if parsed else None


def own_track(track: Track, kept: Sequence[int], pid: int | None) -> Track:
    """A time track (formats/time_track.py) of a `--subprocesses` record, cut to the rank's own
    records as `split_processes` kept them: its threads only (those of `pid`, or of no
    process), each sample's record renumbered (`kept[i]`: record i's new index, or
    NO_LINE when it went to a child)."""
    remap = array("i", kept)
    last = len(remap)
    threads = []
    for thread in track.threads:
        if thread.pid not in (pid, None):
            continue
        lines = array("i", (remap[i] if 0 <= i < last else NO_LINE for i in thread.lines))
        threads.append(ThreadTrack(thread.tid, thread.name, None, lines=lines))
    rounds = max((t.samples for t in threads), default=0)
    start, times = track.start, track.times
    if times is not None and 0 < rounds < track.rounds:
        # py-spy's times (a chrometrace): the rank's threads hold the last rounds.
        first = times[track.rounds - rounds]
        start, times = start + first, array("d", (t - first for t in times[-rounds:]))
    return Track(
        start=start,
        end=track.end,
        rate=track.rate,
        rounds=rounds,
        records=sum(1 for k in kept if k != NO_LINE),
        threads=threads,
        exact=track.exact,
        reason=track.reason,
        times=times if rounds else None,
    )


class _Process:
    __slots__ = ("command", "stacks", "threads")

    def __init__(self, command: str) -> None:
        self.command = command
        self.threads: Counter[int | str] = Counter()
        self.stacks: list[tuple[int | str, list[str], int]] = []


def _processes(lines: Iterable[str]) -> dict[int, _Process]:
    found: dict[int, _Process] = {}
    for _, record in _records(lines):
        if record is None:
            continue
        frames, count = record
        depth = _process_depth(frames)
        if depth < 1:
            continue
        pid, command = parse_process(frames[depth - 1]) or (0, "")
        process = found.setdefault(pid, _Process(command))
        thread = parse_thread(frames[depth]) if depth < len(frames) else None
        tid = thread[0] if thread else ""
        process.threads[tid] += count
        process.stacks.append((tid, frames[depth + (thread is not None) :], count))
    return found


def _names(processes: Mapping[int, _Process]) -> tuple[dict[str, str], frozenset[str]]:
    """The children's frames as py-spy names them by default (frames.renamed: a
    speedscope recording's full paths made short, as the rank's own), and the packages
    those full paths show installed (library code once named short)."""
    seen = dict.fromkeys(f for p in processes.values() for _, stack, _ in p.stacks for f in stack)
    return renamed(seen), installed_packages(seen)


def _main_thread(pid: int, process: _Process) -> int | str:
    if pid in process.threads:
        return pid
    return max(process.threads.items(), key=lambda kv: (kv[1], str(kv[0])))[0]


def _own_part(stack: list[str]) -> list[str]:
    """The frames below where the process began (a fork's parent frames cut off)."""
    for at in range(len(stack) - 1, -1, -1):
        name, location = split_location(stack[at])
        file = location.rpartition(":")[0] or location
        if name.endswith("_bootstrap") and file.endswith("multiprocessing/process.py"):
            return stack[at + 1 :]
    return stack


def _user_function(stack: list[str], user: UserCode) -> str | None:
    for frame in reversed(stack):
        name = split_location(frame)[0]
        if not name.endswith(_COMPREHENSIONS) and user.is_user(frame):
            return frame
    return None


def worker_summary(
    lines: Iterable[str],
    *,
    rounds: int | None = None,
    alive: Sequence[Iterable[int]] = (),
    library: Iterable[str] = (),
) -> WorkerStats | None:
    """What the child processes in `lines` did (module doc); None when there are none.

    `rounds`: the rank's sampling rounds (Split.rounds); `alive`: the child PIDs the host
    saw at moments of the window (the start, the end), which give how many ran at once.
    """
    processes = _processes(lines)
    if not processes:
        return None
    names, installed = _names(processes)
    user = UserCode((*library, *installed))
    by_function: Counter[str] = Counter()
    lines_of: dict[str, Counter[str]] = {}
    loaders, samples, per_pid = 0, 0, {}
    for pid, process in processes.items():
        main, mine, loader = _main_thread(pid, process), 0, False
        for tid, full, count in process.stacks:
            if tid != main:
                continue
            stack = [names.get(f, f) for f in full] if names else full
            mine += count
            loader = loader or any(_LOADER_LOOP in frame for frame in stack)
            frame = _user_function(_own_part(stack), user)
            key = function_name(frame) if frame else OUTSIDE
            by_function[key] += count
            if frame:
                lines_of.setdefault(key, Counter())[frame] += count
        per_pid[pid], samples, loaders = mine, samples + mine, loaders + loader
    count = _count(per_pid, samples, rounds, alive)
    return {
        "count": count,
        "pids": sorted(per_pid)[:MAX_PIDS],
        "processes_seen": len(per_pid),
        "dataloader": loaders == len(per_pid),
        "samples": samples,
        "rounds": rounds or None,
        "sampled_percent": min(100.0, _percent(samples, count * rounds)) if rounds else None,
        "functions": _functions(by_function, lines_of, samples),
        "outside_percent": _percent(by_function.get(OUTSIDE, 0), samples),
        "processes": [
            {"pid": pid, "command": processes[pid].command[:MAX_COMMAND], "samples": n}
            for pid, n in sorted(per_pid.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_PROCESSES]
        ],
    }


def _count(
    per_pid: Mapping[int, int], samples: int, rounds: int | None, alive: Sequence[Iterable[int]]
) -> int:
    """Children at once: the most the host saw among the sampled ones, else samples per
    round (at least one, at most as many as were sampled)."""
    seen = max((len(set(pids) & per_pid.keys()) for pids in alive), default=0)
    if seen:
        return seen
    estimate = round(samples / rounds) if rounds else len(per_pid)
    return min(len(per_pid), max(1, estimate))


def _functions(
    by_function: Counter[str], lines_of: Mapping[str, Counter[str]], samples: int
) -> list[WorkerFunction]:
    ranked = sorted(
        ((n, f) for f, n in by_function.items() if f != OUTSIDE), key=lambda nf: (-nf[0], nf[1])
    )
    return [
        {"function": function, "frame": _hottest_line(lines_of[function]), "samples": n,
         "percent": _percent(n, samples)}
        for n, function in ranked[:TOP_FUNCTIONS]
    ]  # fmt: skip


def _hottest_line(lines: Counter[str]) -> str:
    return min(lines.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def _percent(part: int, whole: int) -> float:
    return round(100 * part / whole, 1) if whole else 0.0


# --- the job report, told ---------------------------------------------------------------


def workers_sentence(rank: str, stats: Mapping[str, Any]) -> str | None:
    """`rank-1's 2 DataLoader workers spend 91% in `tokenize (data.py:33)``, or None
    when its workers ran none of the user's code."""
    functions = stats.get("functions") or []
    if not functions:
        return None
    top, count = functions[0], stats.get("count") or 0
    kind = "DataLoader worker" if stats.get("dataloader") else "child process"
    plural = "es" if kind.endswith("s") else "s"
    who = f"{count} {kind}{plural if count != 1 else ''}"
    return f"{rank}'s {who} spend {top['percent']:g}% in `{top['frame']}`"


def workers_fact(rank: str, stats: Mapping[str, Any]) -> WorkersFact | None:
    """The hottest user function of a rank's workers, as findings carry it."""
    sentence = workers_sentence(rank, stats)
    if sentence is None:
        return None
    top = stats["functions"][0]
    return {
        "rank": rank,
        "count": stats["count"],
        "dataloader": bool(stats.get("dataloader")),
        "function": top["function"],
        "frame": top["frame"],
        "percent": top["percent"],
        "text": sentence,
    }


def with_workers(report: Mapping[str, Any], workers: Mapping[str, Any]) -> dict[str, Any]:
    """`report` (job.analyze_job's) with each rank's `workers` (left out when it has none),
    and the `input_bound` finding and a straggler explained by data_wait naming the
    workers' hottest user function (`workers`: [workers_fact], and a sentence more in
    the advice). `workers`: rank name -> WorkerStats (a stored one: anything else there
    reads as none). The input is not changed."""
    stats = {name: w for name, w in workers.items() if well_formed_workers(w)}
    out = dict(report)
    out["ranks"] = [
        {**r, "workers": stats[r.get("name")]} if r.get("name") in stats else dict(r)
        for r in report.get("ranks") or []
    ]
    straggler = report.get("straggler")
    told = _straggler_told(straggler, stats)
    if told is not None:
        out["straggler"] = told
    out["findings"] = [_finding_told(f, stats, told) for f in report.get("findings") or []]
    return out


def _straggler_told(
    straggler: Mapping[str, Any] | None, stats: Mapping[str, Any]
) -> dict[str, Any] | None:
    if not straggler or straggler.get("name") not in stats:
        return None
    explanation = straggler.get("explanation") or []
    if not any(item.get("state") == "data_wait" for item in explanation):
        return None
    fact = workers_fact(straggler["name"], stats[straggler["name"]])
    if fact is None:
        return None
    items = [{**i, "workers": fact} if i.get("state") == "data_wait" else i for i in explanation]
    return {**straggler, "explanation": items, "workers": fact}


def _finding_told(
    finding: Mapping[str, Any], stats: Mapping[str, Any], straggler: Mapping[str, Any] | None
) -> dict[str, Any]:
    if finding.get("rule") == "input_bound":
        names = finding.get("ranks") or list(stats)
        facts = [f for f in (workers_fact(n, stats[n]) for n in names if n in stats) if f]
    elif finding.get("rule") == "straggler" and straggler is not None:
        facts = [straggler["workers"]]
    else:
        return dict(finding)
    if not facts:
        return dict(finding)
    said = "; ".join(f["text"] for f in facts)
    advice = str(finding.get("advice") or "").rstrip()
    return {**finding, "advice": f"{advice} What the workers do: {said}.", "workers": facts}


def well_formed_workers(stats: object) -> bool:
    """Whether a stored `workers` value has the shape the report reads."""
    if not isinstance(stats, Mapping) or not isinstance(stats.get("functions"), list):
        return False
    return all(
        isinstance(f, Mapping)
        and isinstance(f.get("frame"), str)
        and isinstance(f.get("function"), str)
        and isinstance(f.get("percent"), int | float)
        for f in stats["functions"]
    ) and isinstance(stats.get("count"), int)
