"""Every evidence threshold of the engine, in one place, each with its reason.

A threshold decides what the evidence may claim: when a share is judged at all, how
far past a limit its interval must lie, when two ranks count as alike. The modules that
apply them (findings, straggler, job, stuck, activity, regression, compare) import
them from here. docs/findings.md lists each one with its value and reason, and
tests/profiles/pyspy/test_thresholds.py fails when the two disagree.

Units are in the names' docstrings: "percent" is a share of the step threads' samples
(0-100), "points" a difference of two such shares, "fraction" a share as 0-1.
Sizes of lists shown to the user (top N) are no thresholds and stay with their code.
"""

from __future__ import annotations

# --- how sure: every interval of the engine ---

Z_95 = 1.959963984540054
"""z of the 95% intervals (Wilson, Newcombe): the usual level; py-spy's samples are
autocorrelated, so the intervals are optimistic and the thresholds below leave room."""

# --- findings on one capture (rules/findings.py) ---

MIN_SAMPLES = 100
"""Step-thread samples below which no share is judged: with fewer, the 95% interval of
a share near half spans about 20 points, wider than most thresholds."""
HOST_SYNC_SHARE = 5.0
"""Percent in host_sync past which `.item()`-style syncs cost the step: each one stalls
the host until the device drains its queue, so a few percent is already a habit."""
LAUNCH_BOUND_SHARE = 20.0
"""Percent in gpu_launch past which the step is launch-bound: launching is part of every
step's work, so only a large share says the host, not the device, sets the pace."""
GPU_SYNC_SHARE = 5.0
"""Percent in gpu_sync (explicit syncs, blocking copies and frees) past which they cost
the step: like host syncs, each one idles the host until the device is done."""
ALLOCATOR_SHARE = 5.0
"""Percent in the allocator past which allocation churns: a warm caching allocator
serves a block in microseconds, so a visible share means it keeps missing."""
INPUT_BOUND_SHARE = 10.0
"""Percent in data_wait past which the step is input-bound: a short wait for the first
batch after each epoch is normal, a tenth of the time is not."""
BACKPRESSURE_SHARE = 10.0
"""Percent blocked on a full queue past which the consumer holds the step back (as
INPUT_BOUND_SHARE, from the other side of the queue)."""
GIL_SHARE = 5.0
"""Percent waiting for the GIL past which other threads' Python slows the step: torch
releases the GIL around every op, so a healthy step thread rarely waits for it."""
SATURATED = 80.0
"""Percent: a thread beside the step busy (in no wait state) past this over its whole
interval is saturated, the loader or GIL holder the finding names."""
SAMPLER_UNRELIABLE = 50.0
"""Percent of the requested sampling rounds under which py-spy's capture is unreliable
(formats/log.py's "unreliable" verdict, fraction < 0.5): half the rounds missing means the
missing ones are not a random half."""
SAMPLER_ERRORS = 10.0
"""Percent of py-spy's reads that failed (its `Errors: M` against `Samples: N`) past
which the capture is unreliable too: one read in ten lost is no longer a few torn
stacks at thread exits but a target py-spy cannot follow."""
HEADROOM = 0.8
"""Fraction of the rate py-spy kept up with that the lag advice recommends: a fifth below
what it managed, so the recommended rate is not itself at the edge of falling behind."""
HIGH_SEVERITY = 2.0
"""A finding is "high" when its interval's low end is at least this times its threshold."""

# --- step threads and the whole job ---
# (rules/step_threads.py, rules/findings.py, job/straggler.py, job/report.py, job/stuck.py)

COLLECTIVE_MIN = 0.01
"""Fraction of a thread's samples in collectives that makes it a step thread: a step
thread makes collective calls every step, a helper thread almost never does."""
COLLECTIVE_WAIT = 10.0
"""Percent: the other ranks' waiting share (collectives; with asynchronous collectives
also device syncs) past which a straggler, or a wait no rank can be blamed for, costs the
job: under a tenth of the step, removing a straggler's excess saves little. The peers of
the recorded jobs' straggler and starved rank wait 60-85%."""
STRAGGLER_GAP = 10.0
"""Points by which every other rank's waiting share must exceed the straggler's, over the
whole interval: the balanced recorded job shows gaps of 8-10 points with no cause planted."""
EXPLAIN_MIN = 2.0
"""Points by which an item explaining the straggler must exceed the others' share (and
beyond noise): smaller excesses do not make a rank the one the others wait for."""
CLASS_GAP = 10.0
"""Points beyond noise by which a state's (or a distinctive function's) share may differ
inside one class of ranks: the STRAGGLER_GAP of noise that ranks doing the same work show."""
DISTINCT_OTHERS = 5.0
"""Percent: a function that one side runs under this share "hardly runs" there, so a rank
running it heavily is apart from the others even when its states look the same."""
STUCK_WAIT = 90.0
"""Percent: a rank waits out the window when its waiting share is at least this over its
whole interval. Ranks blocked behind a hung peer wait 99-100% of the window (the recorded
`hung` job: tests/data/jobs/SOURCES.md); a healthy job, even a communication-bound one,
computes part of each step (the other recorded jobs' ranks wait 2-85%)."""
STUCK_ELSEWHERE = 50.0
"""Percent: a rank stands elsewhere when its waiting share stays below this over its whole
interval (the hung rank of the recorded job: 0%), far from the waiting ranks' STUCK_WAIT."""

# --- rounds and idle samples (activity.py) ---

FULL_ROUNDS = 0.95
"""Fraction of the sampling rounds in which a thread must give a sample to "fill" them:
with --idle every live thread gives one per round, less a few that py-spy failed."""
TRANSIENT = 0.1
"""Fraction of the busiest thread's samples under which a thread lived only briefly
(gloo and pybind11 start short-lived threads) and says nothing about idle samples."""
KEPT_BLOCKED = 0.2
"""Fraction of blocked samples that shows py-spy kept blocked stacks when a single thread
fills the rounds: without --idle it drops exactly those, leaving next to none."""

# --- regression between captures (regression.py) ---

MIN_EFFECT_POINTS = 2.0
"""Points a share must change by for a watch to call it moved: with thousands of samples
smaller changes are significant, yet rarely worth a message to a person."""
FALSE_DISCOVERY_RATE = 0.01
"""Benjamini-Yekutieli level across all rows of one comparison: a watch alerts a person,
so false alarms must be rare (in the watch simulation of docs/watches.md it raised none)."""
JUDGE_MIN_SAMPLES = 300
"""Step-thread samples either capture needs before a watch judges it: half of what a
default capture gives a step thread (30 s at 20 Hz: 600 rounds), so one that lost rounds
to py-spy's lag still judges. The test, not this floor, keeps false alarms rare: at 300
samples a side only a change of about 10 points can prove itself, at 600 about 7."""
RETURN_FRACTION = 0.5
"""A moved row is back when its change in that direction is under this fraction of
MIN_EFFECT_POINTS: hysteresis, so a change at the threshold does not open and close
alerts capture after capture."""

# --- periodic stalls (timed/periodic_stalls.py) ---

DETECT_BUCKET_S = 0.2
"""The resolution of burst detection: a stall of 0.2 s or more fills a bucket, and a
bucket holds 10 samples at 50 Hz. Below MIN_DETECT_SAMPLES rounds it grows."""
MIN_DETECT_SAMPLES = 5
"""A bucket of fewer samples gives a share too coarse to call a burst (1 of 3 is 33%)."""
BURST_SHARE = 0.5
"""A bucket is in a burst when the signal holds at least half its samples: the stall
occupies the thread, not a sample of it here and there."""
MERGE_GAP = 1
"""Bursts one bucket apart are one burst: a stall interrupted by one sample of something
else (a log line inside an evaluation) is still one stall."""
MIN_BURSTS = 3
"""Whole bursts needed: two intervals at least to judge regularity at all."""
MAX_CV = 0.25
"""Regular: the intervals between burst starts vary by at most 25% of their mean. py-spy
draws its sampling intervals from an exponential distribution (a Poisson process,
against aliasing: py-spy#94), so placed samples wander and an interval of T seconds at
R Hz varies by about 1/sqrt(T * R) from sampling alone (8% for 3 s at 50 Hz); work
every N steps adds the steps' jitter (a few %); bursts at random times have a CV near
1."""
MIN_PERIOD_S = 1.0
"""Shorter periods are the phases of the step itself (forward, backward) seen bucket by
bucket, not a stall between steps."""
MAX_DUTY = 0.5
"""A stall takes at most half its period; beyond, it is the thread's main work with gaps."""
QUIET_SHARE = 0.1
"""Between bursts the signal holds at most 10% of the samples: a stall comes and goes; a
function that is always there with bumps is load, not a stall."""
EDGE_SLACK = 0.5
"""Across the window: at most 1.5 periods before the first burst and after the last, so
bursts that stop half-way (a phase change, not a period) do not count."""
MIN_DUTY_PERCENT = 3.0
"""The threshold: stalls costing under 3% of the thread's time are below what the share
rules (5% and up) consider worth changing code for."""
COINCIDE_SHARE = 0.8
"""Two signals are one stall when this share of their bursts start within two buckets."""

# --- the rank's device beside its stacks (device.py) ---

DEVICE_STARVED_SHARE = 25.0
"""Percent of the step's time the device idles while the step thread holds the host
(data, GIL, host code, a collective): a quarter of a GPU's time lost to the host is as
large as the largest share rule's threshold (LAUNCH_BOUND_SHARE) and twice the input one."""
DEVICE_BUSY_SHARE = 85.0
"""Percent busy past which the device is the bottleneck: utilization.gpu counts any
kernel running, and training steps that are device-bound read 90-100%; 85 leaves room
for the gaps of the optimizer step and the data hand-off."""
DEVICE_BOUND_SYNC_SHARE = 20.0
"""Percent of the step's time the host waits in syncs for the busy device before that wait
is called the device's: a fifth of the step spent waiting on kernels is the device, not
the host, setting the pace; fewer is the usual loss/metric read."""
DEVICE_MIN_READINGS = 8
"""Device readings (2 s at nvidia-smi's 250 ms) below which no device rule is judged:
a driver sample period is up to 1 s, so fewer readings hold too few independent values."""
DEVICE_STRAGGLER_GAP = 15.0
"""Points between the straggler's device utilisation and the other ranks' mean before its
explanation says its device idles (or is the busy one): GPUs of one job doing the same
work read within a few points; half the noise gap of ranks' states (STRAGGLER_GAP) again."""
READING_GAP_S = 1.5
"""Seconds a sample may lie before the next device reading and still take it: 1 s, the
longest driver sample period of utilization.gpu, plus slack for a loaded host's nvidia-smi."""

# --- intervals over time blocks (stats/batch_means.py) ---

BLOCK_S = 1.0
"""Seconds a block lasts at least: five times a 200 ms wait, so blocks are nearly
independent; a 15 s capture still gives 15 blocks."""
MIN_BLOCKS = 2
"""Fewer blocks give no spread to measure: the interval is then all of [0, 1]."""
CONFIDENCE = 0.95
"""The level of the batch-means intervals and of Holm's family: the 95% every other
interval of the engine uses."""
DESIGN_FUNCTIONS = 40
"""User functions of the step threads whose design effect is measured (the most sampled
first): more than a watch (15) or a rank's lists compare; the rest use the largest
measured."""
FAMILY_ERROR = 0.01
"""A compare table (states, categories, keywords, frames) is one family: Holm's correction
at 1% over its rows, so two captures of an unchanged job show any "real change" in a
table at most 1% of the time (bench/engine/bench_intervals.py), as rare as a watch's alarm."""
