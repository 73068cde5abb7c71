"""Inputs for the time tests: py-spy-style speedscope documents built from stacks, and the
real recordings of tests/data/timeline (README there) split as a capture splits them."""

from __future__ import annotations

import json
from pathlib import Path

from profiles.pyspy.formats.split import Split, split_speedscope
from profiles.pyspy.timed.timed_capture import TimedCapture
from tests.support.speedscope_doc import frame_object, speedscope  # noqa: F401 - the tests' inputs

TIMELINE = Path(__file__).resolve().parents[2] / "data" / "timeline"


def recorded(case: str) -> tuple[dict, Split]:
    """A real recording's clock (the job's printout included) and its split."""
    clock = json.loads((TIMELINE / f"{case}.clock.json").read_text())
    data = (TIMELINE / f"{case}.speedscope.json").read_bytes()
    split = split_speedscope(
        data, start=clock["start"], end=clock["end"], rate=clock["rate"], idle=True
    )
    return clock, split


def captured(case: str) -> tuple[dict, TimedCapture]:
    clock, split = recorded(case)
    return clock, TimedCapture(split.raw_text, split.track)
