"""Findings: what a capture says to change, one documented rule each, with its threshold.

Input is a capture's stats (contract 2: `threads` with their `states`, `idle_included`,
`lag`); nothing re-reads samples. Most rules measure one state's share of the *step
threads'* samples (`step_threads`: the threads named on the run, else those that make
collective calls, else those that touch the GPU, else the busiest one). A rule reports
only when the whole 95% Wilson interval of that share lies past its threshold, so a
finding is never an artefact of few samples; with fewer than MIN_SAMPLES step-thread
samples the only finding is `too_few_samples`. The intervals treat samples as
independent (compare/captures.py): py-spy's samples are autocorrelated, so read them as
optimistic; the thresholds leave room for that.

| rule | state on the step threads | threshold (thresholds.py) |
| --- | --- | --- |
| host_sync | host_sync (`.item()`, `.cpu()`, `.tolist()` wait for the device) | HOST_SYNC_SHARE |
| launch_bound | gpu_launch (the host enqueues kernels one by one) | LAUNCH_BOUND_SHARE |
| gpu_sync | gpu_sync (explicit synchronize, blocking copies and frees) | GPU_SYNC_SHARE |
| allocator_churn | allocator (caching allocator, malloc/free) | ALLOCATOR_SHARE |
| input_bound | data_wait (waiting for the next batch) | INPUT_BOUND_SHARE |
| backpressure | backpressure (blocked putting into a full queue) | BACKPRESSURE_SHARE |
| gil | gil (waiting to take the GIL back) | GIL_SHARE |
An input_bound (or gil) finding also names the thread beside the step that is saturated:
busy (in no wait state) more than SATURATED percent of the time, whole interval, with its
top user function ("a loader saturated in one frame", or the thread holding the GIL).
Wait rules (input_bound, backpressure, gil) need idle samples (py-spy `--idle`); without
them py-spy dropped the blocked samples, so those rules say `waits_hidden` instead.
`sampler_unreliable` reports when py-spy's log says it took under half its rounds (lag
verdict "unreliable"). The job-level rules (`straggler`, `stuck`, `peer_or_device`) are in
job/report.py.
Severity: "high" when the interval's low end is at least HIGH_SEVERITY times the threshold, else
"medium"; notes about the evidence itself ("too_few_samples", "waits_hidden") are "info",
"sampler_unreliable" is "high". Findings come most severe first, then largest low end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..core.frames import split_location
from ..core.types import Finding, FrameStat, FunctionStat
from ..stats.intervals import wilson_interval
from ..thresholds import (
    ALLOCATOR_SHARE,
    BACKPRESSURE_SHARE,
    GIL_SHARE,
    GPU_SYNC_SHARE,
    HIGH_SEVERITY,
    HOST_SYNC_SHARE,
    INPUT_BOUND_SHARE,
    LAUNCH_BOUND_SHARE,
    MIN_SAMPLES,
    SAMPLER_UNRELIABLE,
    SATURATED,
)
from .framework import framework_text, top_for, top_framework_callers
from .states import NO_USER_FRAME
from .step_threads import Pooled, capture_threads, pool, samples_in, step_threads

WAIT_STATES = ("collective", "data_wait", "backpressure", "gil", "idle", "unknown")
SEVERITY_ORDER = {"high": 0, "medium": 1, "info": 2}


class Rule(NamedTuple):
    """A share rule: `state` on the step threads past `threshold` percent."""

    name: str
    state: str
    threshold: float
    title: str
    advice: str
    """One sentence; {site} is the top user call site, {share} the measured share."""
    needs_idle: bool = False


RULES: tuple[Rule, ...] = (
    Rule("host_sync", "host_sync", HOST_SYNC_SHARE,
         "The step thread waits for the device to read values",
         "{site} syncs the host with the device on every pass ({share} of the step thread): "
         "read the value every N steps, or keep it on the device."),
    Rule("launch_bound", "gpu_launch", LAUNCH_BOUND_SHARE, "The step is bound by kernel launches",
         "{site} spends {share} of the step thread launching kernels: fuse small ops "
         "(torch.compile), capture the step in a CUDA graph, or use larger batches."),
    Rule("gpu_sync", "gpu_sync", GPU_SYNC_SHARE, "The step thread waits in GPU syncs",
         "{site} blocks on the GPU ({share} of the step thread): drop the synchronize "
         "(or the blocking copy, or the free such as `torch.cuda.empty_cache()`) from the "
         "step, or move it off the critical path."),
    Rule("allocator_churn", "allocator", ALLOCATOR_SHARE,
         "Memory allocation churn on the step thread",
         "{site} spends {share} of the step thread allocating and freeing memory: reuse "
         "buffers, keep shapes static, or pre-allocate."),
    Rule("input_bound", "data_wait", INPUT_BOUND_SHARE, "The step waits for input data",
         "{site} waits {share} of the time for the next batch: make the input pipeline "
         "faster (more loader workers, prefetching, cheaper decoding).", True),
    Rule("backpressure", "backpressure", BACKPRESSURE_SHARE, "The step blocks on a full queue",
         "{site} blocks {share} of the time putting into a full queue: the consumer is "
         "slower than the step; speed it up, or make the hand-off non-blocking.", True),
    Rule("gil", "gil", GIL_SHARE, "The step thread waits for the GIL",
         "{site} waits {share} of the time to take the GIL back: move the Python work of "
         "other threads into processes, or out of the training process.", True),
)  # fmt: skip
RULES_BY_NAME = {rule.name: rule for rule in RULES}


def findings_for_capture(stats: Mapping[str, Any], names: Iterable[str] = ()) -> list[Finding]:
    """The findings of one capture, most important first (see the module doc)."""
    chosen = step_threads(capture_threads(stats), names)
    return rank_findings(findings_for_threads(stats, chosen.threads))


def findings_for_threads(
    stats: Mapping[str, Any], threads: Sequence[Mapping[str, Any]]
) -> list[Finding]:
    """Rule findings for these step threads of one capture (unsorted)."""
    found = [f for f in (sampler_finding(stats.get("lag")),) if f]
    pooled = pool(threads)
    if pooled.samples < MIN_SAMPLES:
        return [*found, too_few(pooled.samples)]
    hidden = stats.get("idle_included") is False
    for rule in RULES:
        if not (rule.needs_idle and hidden):
            found += [f for f in (share_finding(rule, pooled),) if f]
    if hidden:
        found.append(waits_hidden())
    return [with_busy_thread(f, stats, threads) for f in found]


BUSY_THREAD_ROLE = {
    "input_bound": "that is the work to speed up or spread out",
    "gil": "its Python holds the GIL the step waits for",
}
"""Rules whose finding names the saturated thread outside the step, and what it does."""


def with_busy_thread(
    finding: Finding, stats: Mapping[str, Any], step: Sequence[Mapping[str, Any]], on: str = ""
) -> Finding:
    """Name the saturated thread beside the step (the loader that feeds it, the thread
    that holds the GIL), when the rule is about one and there is one; `on` names the
    rank it is on, in a job."""
    role = BUSY_THREAD_ROLE.get(finding["rule"])
    busy = saturated_thread(stats, {str(t["tid"]) for t in step}) if role else None
    if busy is None:
        return finding
    thread, share, top = busy
    where = f", {top['samples'] * 100 // thread['samples']}% in `{top['function']}`" if top else ""
    name = f"`{thread['name'] or thread['tid']}` thread"
    return {
        **finding,
        "frames": list(dict.fromkeys([*finding["frames"], *([top["frame"]] if top else [])])),
        "advice": f"{finding['advice']} {f'On {on}, the' if on else 'The'} {name} is "
        f"busy {share:g}% of the time{where}: {role}.",
    }


def saturated_thread(
    stats: Mapping[str, Any], step_tids: set[str]
) -> tuple[Mapping[str, Any], float, FunctionStat | None] | None:
    """The busiest thread outside the step threads, when its whole interval of busy
    samples (no wait state) is past SATURATED, with its top user function."""
    best = None
    for thread in stats.get("threads") or []:
        if str(thread["tid"]) in step_tids or not thread.get("samples"):
            continue
        busy = thread["samples"] - sum(samples_in(thread, s) for s in WAIT_STATES)
        if percent_interval(busy, thread["samples"])[0] >= SATURATED:
            share = round(100 * busy / thread["samples"], 1)
            if best is None or share > best[1]:
                best = (thread, share)
    if best is None:
        return None
    rows = [r for r in stats.get("thread_functions") or [] if str(r["tid"]) == str(best[0]["tid"])]
    functions = rows[0]["functions"] if rows else []
    # The thread's outermost functions cover all of it: the top one under 100% says where.
    inner = [f for f in functions if f["samples"] < best[0]["samples"]]
    return best[0], best[1], inner[0] if inner else None


def share_finding(rule: Rule, pooled: Pooled) -> Finding | None:
    """The rule's finding when the whole interval of its share is past the threshold."""
    samples = pooled.states.get(rule.state, 0)
    low, high = percent_interval(samples, pooled.samples)
    if low <= rule.threshold:
        return None
    callers = top_frames(pooled.callers.get(rule.state, {}), pooled.samples)
    value = round(100 * samples / pooled.samples, 1)
    under = pooled.frameworks.get(rule.state, {})
    found: Finding = {
        "rule": rule.name,
        "severity": severity(low, rule.threshold),
        "title": rule.title,
        "value": value,
        "interval": [low, high],
        "threshold": rule.threshold,
        "frames": [c["frame"] for c in callers if c["frame"] != NO_USER_FRAME],
        "user_callers": callers,
        "advice": rule.advice.format(site=call_site(callers, under), share=f"{value:g}%"),
    }
    if under:  # framework.py: the framework frames the rule's samples stand in
        found["framework_callers"] = top_framework_callers(under, pooled.samples, 5)
    return found


def percent_interval(samples: int, total: int) -> tuple[float, float]:
    """The 95% Wilson interval of samples/total, in percent, one decimal."""
    low, high = wilson_interval(samples, total)
    return round(100 * low, 1), round(100 * high, 1)


def severity(low: float, threshold: float) -> str:
    return "high" if low >= HIGH_SEVERITY * threshold else "medium"


def top_frames(by_frame: Mapping[str, int], whole: int, top: int = 5) -> list[FrameStat]:
    """The `top` frames with most samples (ties by name), percent of `whole`."""
    rows = sorted(((c, f) for f, c in by_frame.items() if c), key=lambda r: (-r[0], r[1]))[:top]
    return [{"frame": f, "samples": c, "percent": round(100 * c / whole, 2)} for c, f in rows]


def call_site(callers: Sequence[FrameStat], frameworks: Mapping[tuple, int] | None = None) -> str:
    """`train.py:75 (in train_step)` for the top user caller; a fallback when none.
    With `frameworks` (Pooled.frameworks of the state), the framework frame it stands in
    too: `Trainer.training_step` (DDP backward), called from `train.py:106` (in `main`)."""
    for caller in callers:
        if caller["frame"] != NO_USER_FRAME:
            name, location = split_location(caller["frame"])
            site = f"`{location}` (in `{name}`)" if location else f"`{name}`"
            return _in_framework(site, top_for(frameworks or {}, caller["frame"]))
    found = top_for(frameworks or {})
    if found:
        return f"{framework_text(found)} (no frame of your code is on these stacks)"
    return "The step thread (no frame of your code is on these stacks)"


def _in_framework(site: str, found: Mapping[str, Any] | None) -> str:
    if not found:
        return site
    if found["user_inside"]:
        return f"{site}, called from {framework_text(found)}"
    return f"{framework_text(found)}, called from {site}"


def sampler_finding(lag: Mapping[str, Any] | None) -> Finding | None:
    """py-spy took under half the sampling rounds it was asked for: every share is suspect."""
    if not lag or lag.get("verdict") != "unreliable":
        return None
    fraction = lag.get("achieved_fraction")
    value = round(100 * fraction, 1) if fraction is not None else 0.0
    rate = lag.get("recommended_rate")
    advice = (
        f"py-spy took {value:g}% of the samples it was asked for "
        f"({lag.get('max_behind_s')} s behind): record again at --rate {rate or 'lower'}."
    )
    title = "py-spy fell behind: these numbers are unreliable"
    return note("sampler_unreliable", "high", title, value, SAMPLER_UNRELIABLE, advice)


def too_few(samples: int) -> Finding:
    low, high = percent_interval(samples // 2, samples)
    advice = (
        f"The step threads have {samples} samples (a share near half is known only "
        f"within {high - low:.0f} points): record longer, or at a higher rate."
    )
    title = "Too few samples to judge"
    return note("too_few_samples", "info", title, float(samples), float(MIN_SAMPLES), advice)


def waits_hidden() -> Finding:
    advice = (
        "py-spy recorded without --idle, so it dropped the samples of blocked threads: "
        "record with --idle to see data, queue and GIL waits."
    )
    return note("waits_hidden", "info", "Waits are not visible in this capture", 0.0, 0.0, advice)


def note(
    rule: str, severity: str, title: str, value: float, threshold: float, advice: str
) -> Finding:
    """A finding about the evidence itself: one measured value, no frames."""
    return {
        "rule": rule,
        "severity": severity,  # type: ignore[typeddict-item]
        "title": title,
        "value": value,
        "interval": [value, value],
        "threshold": threshold,
        "frames": [],
        "user_callers": [],
        "advice": advice,
    }


def rank_findings(found: Iterable[Finding]) -> list[Finding]:
    """Most severe first, then the largest low end of the interval, then by rule."""
    return sorted(
        found, key=lambda f: (SEVERITY_ORDER[f["severity"]], -f["interval"][0], f["rule"])
    )
