"""The rank's device beside its stacks: nvidia-smi's series on the stacks' clock.

Input: a capture with time (timed/timed_capture.py: round k at `track.start + k * step_s`, host
epoch
seconds) and its device, as runs/gpu.py stores it (`gpu_samples`): `start` (host epoch
of t = 0), `gpus` [{`index`, `points` [{`t`, `util`, `mem_used_mib`, ...}]}] and
`mapping.source` ("compute-apps" | "CUDA_VISIBLE_DEVICES": the rank's own GPUs;
"host": every GPU of the host, read by no rule). A reading of `utilization.gpu` is the
percent of the driver's last sample period (1/6 s to 1 s) in which a kernel ran, ending
at its timestamp; a round takes the first reading at or after it, within
READING_GAP_S, the mean over the rank's GPUs. A field reported "[N/A]" is None: it is
left out, never read as 0.

- `device_buckets`: the device per timeline bucket (mean utilisation, memory in use, power).
- `device_window`: a window's mean utilisation.
- `device_findings`: on the step threads (rules.step_threads), per round, `busy` =
  util / 100 and `idle` = 1 - busy. Each series is judged over time blocks (stats/batch_means.py's
  batch means, the share's 95% interval):
  * `device_starved`: idle weighted by the step thread being in a host state
    (HOST_STATES: data, the GIL, host code, launches, the allocator, a collective)
    reaches DEVICE_STARVED_SHARE percent of the rounds, whole interval; it names the host
    state that holds most of that idle time and the user frame that held the host there.
  * `device_bound`: the device busy DEVICE_BUSY_SHARE percent or more, whole interval,
    while busy time weighted by the step thread waiting in a device sync (SYNC_STATES)
    reaches DEVICE_BOUND_SYNC_SHARE percent: the host waits for a busy device, so the fix
    is in the kernels, not in Python.
  The summary (`stats["device"]`) says what was read, or why nothing was.
- `with_device`: a whole-job report with the straggler's device against the others'
  and the device findings of the ranks, one per rule naming the ranks.
Standard library only.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean
from typing import Any

from ..core.rank_names import natural
from ..rules.findings import call_site, severity, top_frames
from ..rules.state_rules import STATES
from ..rules.states import NO_USER_FRAME
from ..stats.batch_means import batch_means_interval, block_size
from ..thresholds import (
    DEVICE_BOUND_SYNC_SHARE,
    DEVICE_BUSY_SHARE,
    DEVICE_MIN_READINGS,
    DEVICE_STARVED_SHARE,
    DEVICE_STRAGGLER_GAP,
    READING_GAP_S,
)
from .design_effects import step_tids
from .timed_capture import NO_STATE, TimedCapture

HOST_STATES = ("data_wait", "gil", "compute", "gpu_launch", "allocator", "collective")
"""Where a step thread holds the host while its device has nothing to do."""
SYNC_STATES = ("gpu_sync", "host_sync")
"""Where a step thread waits for its device."""
OWN_SOURCES = ("compute-apps", "CUDA_VISIBLE_DEVICES")
DEVICE_RULES = ("device_starved", "device_bound")


def readings(device: Mapping[str, Any] | None) -> list[tuple[float, list[float]]]:
    """Epoch seconds of each reading time and the utilisations read there, sorted; the
    GPUs' lines of one tick (a few ms apart) are one reading. Empty without a clock."""
    if not isinstance(device, Mapping) or not _number(device.get("start")):
        return []
    start = float(device["start"])
    step = max(0.05, float(device.get("interval_ms") or 250) / 1000)
    ticks: dict[int, list[float]] = {}
    times: dict[int, float] = {}
    for gpu in device.get("gpus") or []:
        for point in gpu.get("points") or []:
            t, util = point.get("t"), point.get("util")
            if not _number(t):
                continue
            tick = round(float(t) / step)
            times.setdefault(tick, start + float(t))
            if _number(util):
                ticks.setdefault(tick, []).append(float(util))
            else:
                ticks.setdefault(tick, [])
    return [(times[k], ticks[k]) for k in sorted(ticks)]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_own(device: Mapping[str, Any] | None) -> bool:
    """The series are the rank's own GPUs (not every GPU of an unmapped host)."""
    mapping = (device or {}).get("mapping") or {}
    return mapping.get("source") in OWN_SOURCES


def device_buckets(
    device: Mapping[str, Any] | None, origin: float, bucket_s: float, count: int
) -> dict[str, Any] | None:
    """Per GPU, its mean utilisation, memory in use (percent of total) and power per
    bucket [origin + i * bucket_s, ...) (None where it gave no reading); None without
    a clock. Values are rounded to whole units: a strip cannot show more."""
    if not isinstance(device, Mapping) or not _number(device.get("start")) or count <= 0:
        return None
    start = float(device["start"])
    gpus = []
    for gpu in device.get("gpus") or []:
        keys = ("util", "mem", "power")
        sums: dict[str, list[list[float]]] = {k: [[] for _ in range(count)] for k in keys}
        for point in gpu.get("points") or []:
            if not _number(point.get("t")):
                continue
            i = math.floor((start + float(point["t"]) - origin) / bucket_s)
            if not 0 <= i < count:
                continue
            for key, value in _values(point).items():
                if value is not None:
                    sums[key][i].append(value)
        gpus.append({
            "index": gpu.get("index"),
            "uuid": gpu.get("uuid"),
            "util": [round(fmean(v)) if v else None for v in sums["util"]],
            "mem_percent": [round(fmean(v)) if v else None for v in sums["mem"]],
            "power_w": [round(fmean(v)) if v else None for v in sums["power"]],
        })  # fmt: skip
    return {**_about(device), "gpus": gpus}


def _values(point: Mapping[str, Any]) -> dict[str, float | None]:
    used, total = point.get("mem_used_mib"), point.get("mem_total_mib")
    mem = 100 * used / total if _number(used) and _number(total) and total else None
    return {
        "util": float(point["util"]) if _number(point.get("util")) else None,
        "mem": mem,
        "power": float(point["power_w"]) if _number(point.get("power_w")) else None,
    }


def _about(device: Mapping[str, Any]) -> dict[str, Any]:
    mapping = device.get("mapping") or {}
    return {
        "source": mapping.get("source"),
        "note": mapping.get("note"),
        "reason": device.get("reason"),
        "interval_ms": device.get("interval_ms"),
    }


def device_window(
    device: Mapping[str, Any] | None, from_epoch: float, to_epoch: float
) -> dict[str, Any] | None:
    """The device's mean utilisation over [from, to) (host epoch seconds) and how many
    readings gave it (`util` None when none did); None without a clock."""
    points = readings(device)
    if not points:
        return None
    inside = [sum(u) / len(u) for t, u in points if from_epoch <= t < to_epoch and u]
    return {
        **_about(device),  # type: ignore[arg-type]
        "util": round(fmean(inside), 1) if inside else None,
        "readings": len(inside),
    }


def util_per_round(capture: TimedCapture, device: Mapping[str, Any]) -> list[float | None]:
    """Each round's device utilisation (module doc), None where no reading covers it."""
    points = [(t, sum(u) / len(u)) for t, u in readings(device) if u]
    times = [t for t, _ in points]
    track = capture.track
    out: list[float | None] = []
    for k in range(track.rounds):
        at = track.start + k * track.step_s
        i = bisect_left(times, at)
        out.append(points[i][1] if i < len(points) and times[i] - at <= READING_GAP_S else None)
    return out


def device_findings(
    capture: TimedCapture, device: Mapping[str, Any] | None, step_thread_names: Iterable[str] = ()
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(summary for stats["device"], findings) of the step threads against their device."""
    if not isinstance(device, Mapping):
        return {"available": False, "reason": "no device series (GPU sampling off, or no GPU)"}, []
    if not is_own(device):
        why = (device.get("mapping") or {}).get("note") or device.get("reason")
        return {**_about(device), "available": False, "reason": why or "no GPU of this rank"}, []
    util = util_per_round(capture, device)
    timed = capture.timed()
    chosen = step_tids(capture, timed, tuple(step_thread_names))
    step = [t for t in timed if str(t.tid) in chosen]
    rows = _rows(capture, step, util)
    summary = _summary(device, rows, len(readings(device)))
    if len(readings(device)) < DEVICE_MIN_READINGS or not rows:
        return summary, []
    block = block_size(len(rows), capture.track.step_s)
    found = [f for f in (_starved(capture, rows, block), _bound(rows, block)) if f]
    return summary, found


def _rows(capture: TimedCapture, step: Sequence[Any], util: list[float | None]) -> list[tuple]:
    """(busy 0-1, state index, record) per step-thread sample with a reading, in time order."""
    rows = []
    for k, u in enumerate(util):
        if u is None:
            continue
        for thread in step:
            states = capture.sample_states(thread)
            if k < len(states) and states[k] != NO_STATE:
                rows.append((min(1.0, max(0.0, u / 100)), states[k], thread.lines[k]))
    return rows


def _summary(device: Mapping[str, Any], rows: list[tuple], count: int) -> dict[str, Any]:
    if not rows:
        why = "no reading of utilisation overlaps the step threads' samples"
        return {**_about(device), "available": False, "readings": count, "reason": why}
    idle = Counter[str]()
    for busy, state, _ in rows:
        idle[STATES[state]] += 1 - busy
    mapping = device.get("mapping") or {}
    return {
        **_about(device),
        "available": True,
        "gpus": mapping.get("gpus") or [g.get("index") for g in device.get("gpus") or []],
        "readings": count,
        "samples": len(rows),
        "util_percent": round(100 * fmean(b for b, _, _ in rows), 1),
        "idle_by_state": {s: round(100 * n / len(rows), 1) for s, n in idle.most_common() if n},
    }


def _interval(values: list[float], block: int) -> tuple[float, float, float]:
    got = batch_means_interval(values, block)  # type: ignore[arg-type]
    return round(100 * got.share, 1), round(100 * got.low, 1), round(100 * got.high, 1)


def _starved(capture: TimedCapture, rows: list[tuple], block: int) -> dict[str, Any] | None:
    host = {STATES.index(s) for s in HOST_STATES}
    series = [(1 - b) if s in host else 0.0 for b, s, _ in rows]
    value, low, high = _interval(series, block)
    if low < DEVICE_STARVED_SHARE:
        return None
    by_state: Counter[int] = Counter()
    for (_, state, _), weight in zip(rows, series, strict=True):
        by_state[state] += weight
    state = by_state.most_common(1)[0][0]
    held = (r for r, w in zip(rows, series, strict=True) if r[1] == state and w)
    callers = _callers(capture, held)
    util = round(100 * fmean(b for b, _, _ in rows), 1)
    name = STATES[state]
    return {
        "rule": "device_starved",
        "severity": severity(low, DEVICE_STARVED_SHARE),
        "title": f"The device idles while the step thread is in {name}",
        "value": value,
        "interval": [low, high],
        "threshold": DEVICE_STARVED_SHARE,
        "frames": [c["frame"] for c in callers if c["frame"] != NO_USER_FRAME],
        "user_callers": callers,
        "advice": (
            f"The GPU had nothing to run for {value:.0f}% of the time while the step thread "
            f"was in {name}, held by {call_site(callers)} (the device was busy {util:.0f}% "
            f"overall): the host starves it; {_starved_fix(name)}"
        ),
        "state": name,
        "device_util": util,
    }


def _starved_fix(state: str) -> str:
    return {
        "data_wait": "feed it faster (more loader workers, pinned memory, prefetching).",
        "gil": "free the GIL for the step (move other Python threads' work into processes).",
        "collective": "the rank waits for its peers: find the slow rank (the straggler).",
        "gpu_launch": "launch fewer, larger kernels (torch.compile, CUDA graphs).",
    }.get(state, "move that host work off the step or overlap it with the device's.")


def _bound(rows: list[tuple], block: int) -> dict[str, Any] | None:
    sync = {STATES.index(s) for s in SYNC_STATES}
    busy_value, busy_low, busy_high = _interval([b for b, _, _ in rows], block)
    if busy_low < DEVICE_BUSY_SHARE:
        return None
    value, low, high = _interval([b if s in sync else 0.0 for b, s, _ in rows], block)
    if low < DEVICE_BOUND_SYNC_SHARE:
        return None
    return {
        "rule": "device_bound",
        "severity": severity(low, DEVICE_BOUND_SYNC_SHARE),
        "title": "The device is the bottleneck: the host waits for a busy GPU",
        "value": busy_value,
        "interval": [busy_low, busy_high],
        "threshold": DEVICE_BUSY_SHARE,
        "frames": [],
        "user_callers": [],
        "advice": (
            f"The GPU is busy {busy_value:.0f}% of the time and the step thread waits for it "
            f"in syncs {value:.0f}% of the time ({low:.0f}–{high:.0f}%): the fix is on the device "
            "side; look at the kernels (torch.profiler, Nsight Systems), not at Python: "
            "removing a sync alone will not make the step faster."
        ),
        "sync_percent": value,
        "sync_interval": [low, high],
    }


def _callers(capture: TimedCapture, rows: Iterable[tuple]) -> list[dict[str, Any]]:
    """The user frames that held the host in those step-thread samples, most first."""
    (_, leaves), classified = capture.profile(), capture.classified()
    frames = capture.profile()[0].frames
    counts: Counter[str] = Counter()
    for _, _, record in rows:
        leaf = leaves[record] if record >= 0 else -1
        caller = classified.user_caller[leaf] if leaf >= 0 else -1
        counts[frames[caller] if caller >= 0 else NO_USER_FRAME] += 1
    return [dict(f) for f in top_frames(counts, sum(counts.values()))]


def with_device(
    report: dict[str, Any], ranks: Mapping[str, tuple[Mapping[str, Any] | None, Sequence[Any]]]
) -> dict[str, Any]:
    """The job report with `straggler.device` (its device against the others') and one
    finding per device rule that held on some ranks, naming them. `ranks`: rank name ->
    (its stats["device"], its capture's findings)."""
    devices = {n: d for n, (d, _) in ranks.items() if isinstance(d, Mapping) and d.get("available")}
    straggler = report.get("straggler")
    if straggler and devices:
        straggler["device"] = straggler_device(straggler["name"], devices)
    extra = [f for rule in DEVICE_RULES if (f := _job_rule(rule, ranks))]
    if extra:
        report["findings"] = [*extra, *report.get("findings", [])]
    return report


def straggler_device(name: str, devices: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The straggler's device utilisation against the other ranks' mean, and what it says."""
    mine = devices.get(name)
    others = [d["util_percent"] for n, d in devices.items() if n != name]
    if mine is None or not others:
        return None
    util, rest = mine["util_percent"], round(fmean(others), 1)
    says, text = None, None
    if rest - util >= DEVICE_STRAGGLER_GAP:
        says = "idles"
        state = next(iter(mine.get("idle_by_state") or {}), "host code")
        text = (
            f"its device is the one that idles ({util:.0f}% busy against the others' "
            f"{rest:.0f}%), while its step thread is mostly in {state}: the host holds it"
        )
    elif util - rest >= DEVICE_STRAGGLER_GAP:
        says = "busy"
        text = (
            f"its device is the busy one ({util:.0f}% against the others' {rest:.0f}%): "
            "it has more device work, or a slower GPU; look at its kernels and the GPU"
        )
    return {"util_percent": util, "others_util_percent": rest, "says": says, "explanation": text}


def _job_rule(rule: str, ranks: Mapping[str, tuple[Any, Sequence[Any]]]) -> dict[str, Any] | None:
    hits = {
        name: f
        for name, (_, found) in ranks.items()
        for f in found or []
        if isinstance(f, Mapping) and f.get("rule") == rule
    }
    if not hits:
        return None
    strongest = max(hits.values(), key=lambda f: f["interval"][0])
    names = sorted(hits, key=natural)
    finding = {**strongest, "ranks": names}
    finding["title"] = f"{strongest['title']} ({len(names)} of {len(ranks)} ranks)"
    return finding


def _bucket_total(line: Mapping[str, Any]) -> int:
    rows = [*line.get("threads", []), *(t for r in line.get("ranks", []) for t in r["threads"])]
    return max((len(t.get("dominant") or []) for t in rows), default=0)


def timeline_device(
    device: Mapping[str, Any] | None, line: Mapping[str, Any], offset_s: float = 0.0
) -> dict[str, Any] | None:
    """The device on a timeline's buckets (`line`: timeline.timeline's or
    aligned_timelines'); `offset_s`: seconds added to this host's clock to read the
    timeline's. None without a device; `gpus` empty, with the reason, when it has no
    clock or no reading."""
    if not isinstance(device, Mapping):
        return None
    count = _bucket_total(line)
    origin = float(line["start"]) - offset_s
    got = device_buckets(device, origin, float(line["bucket_s"]), count) if count else None
    if got is not None:
        return got
    why = (
        device.get("reason") or "its GPU series has no host clock (taken before flamedeck kept one)"
    )
    return {**_about(device), "gpus": [], "reason": why}


def rank_strip(
    device: Mapping[str, Any] | None, line: Mapping[str, Any], offset_s: float
) -> dict[str, Any] | None:
    """A whole-job timeline rank's device in one series: per bucket the mean utilisation
    of its GPUs (whole percent, None without a reading), and whose GPUs they are."""
    got = timeline_device(device, line, offset_s)
    if got is None:
        return None
    series = [g["util"] for g in got["gpus"]]
    util = [
        round(fmean(v)) if (v := [s[i] for s in series if s[i] is not None]) else None
        for i in range(len(series[0]) if series else 0)
    ]
    return {"source": got["source"], "gpus": [g["index"] for g in got["gpus"]],
            "util": util, "reason": got.get("reason") or got.get("note")}  # fmt: skip
