"""Object builders for tests: one place that knows how to make a run, a process, a
done capture with stats, a notification target, a watch, a whole-job run and capture, and
a stored flamegraph tree."""

from __future__ import annotations

import gzip
import json
import re
from datetime import datetime, timedelta

from django.core.files.base import ContentFile
from django.utils import timezone

from profiles.models import Capture, CaptureGroup
from profiles.watches.models import NotifyTarget, Watch
from runs.models import Host, Run, RunProcess

STATES = ("compute", "data_wait", "host_sync", "collective", "idle")


def run(name: str = "llama-70b") -> Run:
    return Run.objects.create(name=name)


def host(name: str = "gpu-node-1") -> Host:
    return Host.objects.get_or_create(name=name, defaults={"address": f"{name}.example"})[0]


def process(run_: Run, role: str = "rank-0", pid: int = 4242) -> RunProcess:
    return RunProcess.objects.create(run=run_, host=host(), pid=pid, role=role)


def state_stats(total: int, **shares: float) -> dict:
    """Stats whose `states` hold `shares` (percent of `total`), the rest `compute`;
    one category per state so both kinds of rows exist."""
    counts = {state: round(total * shares.get(state, 0) / 100) for state in STATES[1:]}
    counts["compute"] = total - sum(counts.values())
    return {
        "format": "raw",
        "total_samples": total,
        "states": [
            {"state": s, "samples": n, "percent": 100 * n / total} for s, n in counts.items()
        ],
        "categories": [{"category": "sync", "samples": counts["host_sync"]}],
        "top_self": [],
        "top_total": [],
        "keywords": [],
    }


def capture(
    process_: RunProcess | None,
    stats: dict | None,
    *,
    minutes_ago: float = 0,
    status: str = Capture.Status.DONE,
    run_: Run | None = None,
    kind: str = Capture.Kind.RECORD,
    **fields,
) -> Capture:
    at = timezone.now() - timedelta(minutes=minutes_ago)
    made = Capture.objects.create(
        run=run_ or (process_.run if process_ else None),
        process=process_,
        host=process_.host if process_ else None,
        pid=process_.pid if process_ else None,
        kind=kind,
        status=status,
        stats=stats,
        **fields,
    )
    Capture.objects.filter(pk=made.pk).update(queued_at=at, finished_at=at)
    made.refresh_from_db()
    return made


def target(
    name: str = "team-hook", url: str = "json://127.0.0.1:9/hook/s3cr3t-path"
) -> NotifyTarget:
    return NotifyTarget.objects.create(name=name, url=url)


def watch(baseline: Capture, *, targets=(), role: str | None = None, **fields) -> Watch:
    made = Watch.objects.create(
        run=baseline.run,
        role=baseline.process.role if role is None else role,
        baseline=baseline,
        **fields,
    )
    made.targets.set(targets)
    return made


FIRST_PID = 4000
"""Processes of `job_run` have pids FIRST_PID + rank."""


def local_host() -> Host:
    return Host.objects.get_or_create(name="local", defaults={"transport": "local"})[0]


def job_run(*, ranks: int, name: str = "gloo-job", host_: Host | None = None) -> Run:
    """A run with `ranks` processes on one host (the local one), roles rank-0, rank-1, ..."""
    made = Run.objects.create(name=name)
    ranked_processes(made, ranks, host_=host_, first_pid=FIRST_PID)
    return made


# --- share series (profiles/compare/series.py) and downloads -------------------------------------


def share_stats(
    shares: dict[str, float],
    *,
    total: int = 1000,
    verdict: str | None = None,
    callers: int = 0,
    step: dict[str, float] | None = None,
) -> dict:
    """Stored stats whose categories have these percentages of `total` samples (with
    `callers` python_callers each, as heavy as the engine's); with `step`, also its
    states (of one thread, the step thread), the rest of the samples `compute`."""
    return {
        **(step_state_stats(step, total) if step is not None else {}),
        "format": "raw",
        "total_samples": total,
        "categories": [
            {
                "category": name,
                "samples": round(total * pct / 100),
                "percent": pct,
                "python_callers": [
                    {"frame": f"step_{i} (train.py:{i})", "samples": 1, "percent": 0.1}
                    for i in range(callers)
                ],
            }
            for name, pct in shares.items()
        ],
        "keywords": [],
        "lag": {"verdict": verdict} if verdict else None,
    }


def step_state_stats(step: dict[str, float], total: int) -> dict:
    """`states` and `step_threads` as the analysis stores them: one thread, the step
    thread, in these states (percent of `total`) and `compute` for the rest; states
    without samples left out, as stored."""
    counts = {state: round(total * pct / 100) for state, pct in step.items()}
    counts["compute"] = counts.get("compute", total - sum(counts.values()))
    states = [
        {"state": state, "samples": n, "percent": round(100 * n / total, 2)}
        for state, n in counts.items()
        if n
    ]
    step_threads = {"tids": ["1"], "names": ["MainThread"], "detected_by": "busiest"}
    return {"states": states, "step_threads": {**step_threads, "samples": total, "states": states}}


def ranked_processes(
    run: Run,
    count: int,
    *,
    host_: Host | None = None,
    role: str = "rank-{}",
    first_pid: int = 1000,
) -> list[RunProcess]:
    """`count` processes of `run` on one host (the local one), roles rank-0, rank-1, …
    (or `role` for all when it has no `{}`), pids first_pid + i."""
    on = host_ or local_host()
    return RunProcess.objects.bulk_create(
        RunProcess(run=run, host=on, pid=first_pid + i, role=role.format(i)) for i in range(count)
    )


def done_capture(
    *,
    run: Run | None = None,
    process: RunProcess | None = None,
    shares: dict[str, float],
    at: datetime | None = None,
    step: dict[str, float] | None = None,
    **fields,
) -> Capture:
    """A done capture whose categories have these shares (and, with `step`, its step
    thread these states), finished at `at` (now by default); with no process, an import
    (give `original_name`)."""
    ago = (timezone.now() - at).total_seconds() / 60 if at else 0
    kind = Capture.Kind.RECORD if process else Capture.Kind.IMPORT
    stats = share_stats(shares, step=step)
    return capture(process, stats, minutes_ago=ago, run_=run, kind=kind, **fields)


def whole_job_capture(
    run: Run,
    processes: list[RunProcess],
    shares: list[dict[str, float]],
    *,
    at: datetime,
    callers: int = 0,
    step: list[dict[str, float]] | None = None,
) -> CaptureGroup:
    """A whole-job capture: one done capture per process, `shares[i]` (and step-thread
    states `step[i]`) for process i."""
    steps = step or [None] * len(processes)
    group = CaptureGroup.objects.create(run=run)
    CaptureGroup.objects.filter(pk=group.pk).update(created_at=at)
    Capture.objects.bulk_create(
        Capture(
            run=run,
            process=p,
            host=p.host,
            pid=p.pid,
            group=group,
            status=Capture.Status.DONE,
            stats=share_stats(s, callers=callers, step=st),
            queued_at=at,
            finished_at=at + timedelta(seconds=30),
        )
        for p, s, st in zip(processes, shares, steps, strict=True)
    )
    # auto_now_add ignores the given queued_at: set it afterwards.
    Capture.objects.filter(group=group).update(queued_at=at)
    return group


def minutes_ago(minutes: float) -> datetime:
    return timezone.now() - timedelta(minutes=minutes)


def store_tree(capture: Capture, tree: dict) -> Capture:
    """Give a capture a stored flamegraph tree (as the analysis writes it)."""
    capture.flamegraph_file.save(
        "flamegraph.json.gz", ContentFile(gzip.compress(json.dumps(tree).encode()))
    )
    return capture


def thread_tree(threads: dict[str, dict[str, int]]) -> dict:
    """A flamegraph tree: `{"thread (1): main": {"leaf (a.py:1)": 5}}` → root, thread
    nodes, one leaf per count under a shared `step (train.py:9)` frame."""
    children = []
    for thread, leaves in threads.items():
        step = [{"name": name, "value": n, "children": []} for name, n in leaves.items()]
        total = sum(leaves.values())
        body = [{"name": "step (train.py:9)", "value": total, "children": step}]
        children.append({"name": thread, "value": total, "children": body})
    return {"name": "all", "value": sum(c["value"] for c in children), "children": children}


# --- whole-job dumps ----------------------------------------------------------------------


def dump_thread(frames: list[str], *, name: str = "MainThread", tid: int = 1, active=False):
    """One thread of a parsed `py-spy dump` (profiles.pyspy.formats.dump): `frames` innermost
    first, each `name (file:line)`."""
    parsed = []
    for text in frames:
        function, _, rest = text.partition(" (")
        parsed.append({"name": function, "location": rest.rstrip(")"), "native": False})
    return {"pid": None, "tid": tid, "name": name, "status": "active" if active else "idle",
            "active": active, "idle": not active, "gil": False, "frames": parsed}  # fmt: skip


def whole_job_dump(run: Run, series: dict[str, list[list[dict]]]) -> CaptureGroup:
    """A whole-job dump whose ranks (roles of `series`, on the local host) ended with
    these successive dumps (each a list of dump_thread), and its stored `stacks`."""
    from profiles.jobs import report as group_report

    group = CaptureGroup.objects.create(run=run, kind="dump", dump_repeat=3)
    for i, (role, dumps) in enumerate(series.items()):
        process = RunProcess.objects.create(run=run, host=local_host(), pid=FIRST_PID + i,
                                            role=role)  # fmt: skip
        stats = {"format": "dump", "total_samples": 0, "dump_threads": dumps[-1],
                 "dump_series": [{"at": None, "threads": d} for d in dumps]}  # fmt: skip
        Capture.objects.create(run=run, process=process, host=process.host, pid=process.pid,
                               group=group, kind="dump", status=Capture.Status.DONE,
                               stats=stats)  # fmt: skip
    group_report.group_report_update(group_id=group.pk)
    group.refresh_from_db()
    return group


# --- captures with time (tests/data/timeline: real recordings with their host clock) ---------


def timed_capture(
    case: str = "periodic_eval",
    *,
    process_: RunProcess | None = None,
    group: CaptureGroup | None = None,
    names: dict[str, str] | None = None,
    functions: dict[str, str] | None = None,
    shift_s: float = 0.0,
    offset_s: float | None = None,
    idle: bool = True,
) -> Capture:
    """A done capture of a real recording with time, stored and analysed as the worker
    does it: py-spy's speedscope split into raw text and time track, then the analysis
    (which stores the track with each record's state, stats["time"] and any periodic
    stall). `names` renames threads and `functions` frames' functions (old → new);
    `shift_s` moves the host's clock; `offset_s` is the host's clock offset a whole-job
    timeline aligns ranks with; without `idle` the samples carry no time (py-spy would
    have dropped blocked threads')."""
    from profiles.captures.analysis import capture_analyze
    from profiles.pyspy.formats.split import split_speedscope
    from profiles.pyspy.formats.time_track import track_json
    from profiles.storage.files import capture_store_outputs
    from tests.profiles.pyspy.timeline_data import TIMELINE

    clock = json.loads((TIMELINE / f"{case}.clock.json").read_text())
    doc = json.loads((TIMELINE / f"{case}.speedscope.json").read_text())
    for profile in doc["profiles"]:  # py-spy names them `Thread 28564 "MainThread"`
        tid, name = re.fullmatch(r'Thread (\d+) "(.*)"', profile["name"]).groups()
        profile["name"] = f'Thread {tid} "{(names or {}).get(name, name)}"'
    for frame in doc["shared"]["frames"]:
        frame["name"] = (functions or {}).get(frame["name"], frame["name"])
    start, end = clock["start"] + shift_s, clock["end"] + shift_s
    split = split_speedscope(json.dumps(doc), start=start, end=end, rate=clock["rate"], idle=idle)
    made = Capture.objects.create(
        run=process_.run if process_ else None,
        process=process_,
        host=process_.host if process_ else local_host(),
        pid=process_.pid if process_ else 4242,
        group=group,
        kind=Capture.Kind.RECORD,
        status=Capture.Status.PARSING,
        rate=clock["rate"],
        duration=round(end - start),
        idle=idle,
        progress={} if offset_s is None else {"clock_offset_s": offset_s},
    )
    track = track_json(split.track)
    capture_store_outputs(capture=made, raw=split.raw_text.encode(), log=None, track=track)
    assert capture_analyze(capture=made) == Capture.Status.DONE
    made.refresh_from_db()
    return made


# --- a large whole-job capture (issue 47: its answers stay bounded as ranks grow) ------------


def large_whole_job(
    run_: Run,
    ranks: int,
    stats_of,  # noqa: ANN001 - rank number -> its stats
    *,
    like: Capture,
    at: datetime | None = None,
) -> CaptureGroup:
    """A whole-job capture of `ranks` done ranks (rank-0 …, one process each on the local
    host), rank r with stats `stats_of(r)` and `like`'s stored tree and time track (the
    copies of one real rank), its job report stored as the worker stores it."""
    from profiles.jobs import report as group_report

    group = CaptureGroup.objects.create(run=run_)
    if at is not None:
        CaptureGroup.objects.filter(pk=group.pk).update(created_at=at)
    first = FIRST_PID + 1000 * run_.capture_groups.count()
    processes = ranked_processes(run_, ranks, first_pid=first)
    Capture.objects.bulk_create(
        Capture(
            run=run_,
            group=group,
            process=p,
            host=p.host,
            pid=p.pid,
            status=Capture.Status.DONE,
            stats={**stats_of(n), "time": like.stats["time"]},
            progress={"clock_offset_s": 0.001 * (n % 7)},
            flamegraph_file=like.flamegraph_file.name,
            time_file=like.time_file.name,
            raw_file=like.raw_file.name,
        )
        for n, p in enumerate(processes)
    )
    assert group_report.group_report_update(group_id=group.pk) is not None
    group.refresh_from_db()
    return group
