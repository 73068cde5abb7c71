"""timed: a capture with time. Raw text and its time track in (formats/time_track.py);
timelines, windows, bursts and honest sample sizes out.

- `timed_capture`: the raw text and track read once, every sample with its state.
- `timeline`: each thread's states bucket by bucket; aligned over a job's ranks.
- `window`: the samples of one window, as a capture of its own.
- `periodic_stalls`: a state or function that comes back in bursts.
- `design_effects`: how many samples count as one independent draw (batch means).
- `device`: the rank's GPU series (nvidia-smi) on the stacks' clock, and its findings.
"""

from .design_effects import design_effects
from .device import (
    DEVICE_RULES,
    device_findings,
    device_window,
    rank_strip,
    timeline_device,
    with_device,
)
from .periodic_stalls import periodic_stalls
from .timed_capture import TimedCapture, with_states
from .timeline import aligned_timelines, default_bucket, timeline
from .window import window_flamegraph, window_states, window_text

__all__ = [
    "DEVICE_RULES",
    "TimedCapture",
    "aligned_timelines",
    "default_bucket",
    "design_effects",
    "device_findings",
    "device_window",
    "periodic_stalls",
    "rank_strip",
    "timeline",
    "timeline_device",
    "window_flamegraph",
    "window_states",
    "window_text",
    "with_device",
    "with_states",
]
