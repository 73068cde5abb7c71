"""Splitting a speedscope capture: raw text that analyses exactly like the speedscope
file, and a track that gives every sample its record, in order."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiles.pyspy import ProfileError, analyze, parse_profile_text, read_profile
from profiles.pyspy.formats.split import split_speedscope
from profiles.pyspy.formats.time_track import NO_LINE
from tests.profiles.pyspy.golden import DATA
from tests.profiles.pyspy.timeline_data import TIMELINE, speedscope

CLOCK = {"start": 1_700_000_000.0, "end": 1_700_000_010.0, "rate": 100, "idle": True}
SPEEDSCOPE_FILES = [
    TIMELINE / "periodic_eval.speedscope.json",
    TIMELINE / "steady.speedscope.json",
    TIMELINE / "periodic_checkpoint.speedscope.json",
    DATA / "speedscope.json",
    DATA / "corpus_deepdrr_speedscope.json",
    DATA / "corpus_pyspy_mcp_speedscope.json",
    DATA / "corpus_two_sampled_speedscope.json",
]


def _without_format(stats: dict) -> dict:
    return {k: v for k, v in stats.items() if k != "format"}


@pytest.mark.parametrize("path", SPEEDSCOPE_FILES, ids=lambda p: p.name)
def test_the_split_raw_text_analyses_exactly_like_the_speedscope_file(path):
    split = split_speedscope(path.read_bytes(), **CLOCK)
    direct = analyze(read_profile(path))
    assert _without_format(analyze(parse_profile_text(split.raw_text))) == _without_format(direct)


@pytest.mark.parametrize("path", SPEEDSCOPE_FILES[:4], ids=lambda p: p.name)
def test_each_thread_track_holds_its_samples_in_order_pointing_at_its_own_records(path):
    split = split_speedscope(path.read_bytes(), **CLOCK)
    doc = json.loads(path.read_text())
    records = [line for line in split.raw_text.splitlines() if not line.startswith("#")]
    names = [f["name"] for f in doc["shared"]["frames"]]
    for profile, thread in zip(doc["profiles"], split.track.threads, strict=True):
        assert len(thread.lines) == len(profile["samples"])
        for sample, record in zip(profile["samples"], thread.lines, strict=True):
            leaf = records[record].rpartition(" ")[0].rsplit(";", 1)[-1]
            assert leaf.startswith(names[sample[-1]])
            assert f"({thread.tid})" in records[record].split(";")[0]


def test_samples_that_carry_counts_are_no_order_in_time():
    text = speedscope([(1, "main", [["a (m.py:1)"], ["b (m.py:2)"]])], weights="none")
    doc = json.loads(text)
    doc["profiles"][0]["weights"] = [3, 1]
    split = split_speedscope(json.dumps(doc), **CLOCK)
    assert not split.track.exact and "counts" in split.track.reason
    assert analyze(parse_profile_text(split.raw_text))["total_samples"] == 4


def test_malformed_samples_keep_their_round_and_count_as_skipped_lines():
    text = speedscope([(1, "main", [["a (m.py:1)"], ["b (m.py:2)"], ["a (m.py:1)"]])])
    doc = json.loads(text)
    doc["profiles"][0]["samples"][1] = [0, 99]  # a frame index past shared.frames
    split = split_speedscope(json.dumps(doc), **CLOCK)
    assert list(split.track.threads[0].lines) == [0, NO_LINE, 0]
    stats = analyze(parse_profile_text(split.raw_text))
    assert (stats["total_samples"], stats["skipped_lines"]) == (2, 1)


def test_a_frame_raw_text_cannot_hold_is_written_as_folded_export_writes_it():
    stacks = [["run (m.py:1)", "odd;name\nhere (m.py:2)"], ["run (m.py:1)"]]
    split = split_speedscope(speedscope([(1, "main", stacks)]), **CLOCK)
    frames = {s["frame"] for s in analyze(parse_profile_text(split.raw_text))["top_self"]}
    assert "odd:name here (m.py:2)" in frames
    assert len(split.raw_text.strip().splitlines()) == 2


def test_a_first_frame_raw_text_would_read_otherwise_counts_as_malformed_not_as_a_comment():
    doc = json.loads(speedscope([(1, "main", [["a (m.py:1)"], ["a (m.py:1)"]])]))
    doc["profiles"][0]["name"] = "not a py-spy thread"
    doc["shared"]["frames"].append({"name": "# looks like a comment"})
    doc["profiles"][0]["samples"][1] = [1]
    split = split_speedscope(json.dumps(doc), **CLOCK)
    stats = analyze(parse_profile_text(split.raw_text))
    assert (stats["total_samples"], stats["skipped_lines"]) == (1, 1)
    assert list(split.track.threads[0].lines) == [0, NO_LINE]


_FRAMES = st.sampled_from(
    ["main (m.py:1)", "work (m.py:2)", "wait (threading.py:3)", "Queue.get (queue.py:180)",
     "cuLaunchKernel (libcuda.so.1)", "0x7f01 (libc.so.6)", "pthread_cond_wait (libc.so.6)"]
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.lists(_FRAMES, min_size=0, max_size=6), min_size=1, max_size=40),
        min_size=1,
        max_size=4,
    )
)
def test_any_capture_splits_into_raw_text_with_the_same_statistics(threads):
    text = speedscope([(100 + i, f"t{i}", samples) for i, samples in enumerate(threads)])
    split = split_speedscope(text, **CLOCK)
    direct = analyze(parse_profile_text(text))
    assert _without_format(analyze(parse_profile_text(split.raw_text))) == _without_format(direct)
    assert [len(t.lines) for t in split.track.threads] == [len(s) for s in threads]


@pytest.mark.parametrize(
    ("clock", "reason"),
    [
        ({"end": CLOCK["start"] - 1}, "impossible"),
        ({"start": float("nan")}, "start"),
        ({"rate": 0}, "impossible"),
    ],
)
def test_an_impossible_clock_is_refused(clock, reason):
    with pytest.raises(ProfileError, match=reason):
        split_speedscope((DATA / "speedscope.json").read_bytes(), **{**CLOCK, **clock})


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"thread (1): x;a 3\n", "not speedscope"),
        (b'{"profiles": [], "shared": {"frames": []}}', "no sampled profiles"),
        (b'{"profiles": [', "truncated or invalid"),
    ],
)
def test_input_that_is_no_speedscope_capture_cannot_be_split(data, reason):
    with pytest.raises(ProfileError, match=reason):
        split_speedscope(data, **CLOCK)


def test_a_scheduled_window_cuts_the_rounds_placed_before_it_from_whole_threads():
    """py-spy started early to attach: rounds placed before the window's start go, from
    every thread that lived through the capture; a shorter thread cannot be placed and
    keeps its samples; the track starts at the first round kept."""
    early, late = ["main (a.py:1)"], ["work (a.py:2)"]
    doc = speedscope([(1, "MainThread", [early] * 20 + [late] * 80), (2, "born", [late] * 30)])
    whole = split_speedscope(doc, start=100.0, end=110.0, rate=10, idle=True)
    cut = split_speedscope(doc, start=100.0, end=110.0, rate=10, idle=True, window_from=102.05)
    assert whole.track.rounds == 100 and cut.track.rounds == 79  # rounds 21..99 kept
    assert cut.track.start == pytest.approx(102.1) and cut.track.end == 110.0
    assert [t.samples for t in cut.track.threads] == [79, 30]
    stats = analyze(parse_profile_text(cut.raw_text))
    assert stats["total_samples"] == 79 + 30
    assert {row["frame"] for row in stats["top_self"]} == {"work (a.py:2)"}


def test_a_window_outside_the_sampling_or_without_idle_cuts_nothing():
    doc = speedscope([(1, "MainThread", [["main (a.py:1)"]] * 50)])
    for window_from, idle in ((99.0, True), (120.0, True), (102.0, False)):
        split = split_speedscope(
            doc, start=100.0, end=105.0, rate=10, idle=idle, window_from=window_from
        )
        assert split.track.start == 100.0
        assert analyze(parse_profile_text(split.raw_text))["total_samples"] == 50
