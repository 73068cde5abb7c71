"""Time tracks: the clock and every thread's samples, written compactly and read back
strictly."""

import gzip
import json
import random
import zlib
from array import array
from itertools import pairwise

import pytest

from profiles.pyspy import ProfileError
from profiles.pyspy.formats.split import split_speedscope
from profiles.pyspy.formats.time_track import (
    MAX_TRACK_BYTES,
    TimeUnavailable,
    load_track,
    require_time,
    run_lengths,
    track_json,
)
from profiles.pyspy.timed.timed_capture import with_states
from tests.profiles.pyspy.golden import DATA
from tests.profiles.pyspy.timeline_data import TIMELINE

CLOCK = {"start": 1_700_000_000.0, "end": 1_700_000_010.0, "rate": 100, "idle": True}


def test_the_track_of_a_real_capture_knows_its_clock_and_threads():
    clock = json.loads((TIMELINE / "periodic_eval.clock.json").read_text())
    data = (TIMELINE / "periodic_eval.speedscope.json").read_bytes()
    track = split_speedscope(data, start=clock["start"], end=clock["end"], rate=50, idle=True).track
    assert track.exact and track.start == clock["start"] and track.end == clock["end"]
    assert {t.name for t in track.threads} == {"MainThread", "loader"}
    assert track.rounds == max(len(t.lines) for t in track.threads)
    assert [t.name for t in track.timed()] == [t.name for t in track.threads]
    assert track.step_s == pytest.approx((clock["end"] - clock["start"]) / track.rounds)


def test_a_track_survives_json_and_gzip_unchanged():
    split = split_speedscope((TIMELINE / "steady.speedscope.json").read_bytes(), **CLOCK)
    text = track_json(split.track)
    for data in (text, text.encode(), gzip.compress(text.encode())):
        read = load_track(data)
        assert (read.start, read.end, read.rate, read.rounds, read.records) == (
            split.track.start,
            split.track.end,
            split.track.rate,
            split.track.rounds,
            split.track.records,
        )
        assert [(t.tid, t.name, t.pid, t.lines) for t in read.threads] == [
            (t.tid, t.name, t.pid, t.lines) for t in split.track.threads
        ]


def test_a_capture_without_idle_has_a_track_that_says_why_it_has_no_times():
    split = split_speedscope(
        (TIMELINE / "steady.speedscope.json").read_bytes(), **{**CLOCK, "idle": False}
    )
    assert not split.track.exact and "--idle" in split.track.reason
    assert split.track.threads == []
    with pytest.raises(TimeUnavailable, match="--idle"):
        require_time(load_track(track_json(split.track)))
    with pytest.raises(TimeUnavailable, match="imported"):
        require_time(None)


def test_run_lengths_give_back_the_sequence():
    rng = random.Random(7)

    values = array("i", [rng.choice([0, 0, 0, 1, 2, -1]) for _ in range(5000)])
    lines, runs = run_lengths(values)
    assert sum(runs) == len(values) and all(a != b for a, b in pairwise(lines))
    assert [v for v, n in zip(lines, runs, strict=True) for _ in range(n)] == list(values)


def _track_doc(**changes):
    split = split_speedscope((DATA / "speedscope.json").read_bytes(), **CLOCK)
    doc = json.loads(track_json(split.track))
    for key, value in changes.items():
        if key.startswith("thread_"):
            doc["threads"][0][key[7:]] = value
        else:
            doc[key] = value
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"format": "other"}, "not a flamedeck time track"),
        ({"version": 2}, "version 2"),
        ({"start": "soon"}, "`start` is not a number"),
        ({"end": 1.0}, "impossible"),
        ({"rate": -1}, "`rate` is -1"),
        ({"rounds": 1.5}, "`rounds` is not a whole number"),
        ({"exact": False, "reason": None}, "must say why"),
        ({"threads": {}}, "`threads` must be a list"),
        ({"thread_tid": None}, "`tid` must be"),
        ({"thread_samples": 10**9}, "more than the track allows"),
        ({"thread_lines": "1,x"}, "comma-separated whole numbers"),
        ({"thread_lines": "1,,2"}, "no number"),
        ({"thread_runs": "0"}, "differ in length|add up"),
        ({"thread_lines": "99999"}, "names a record|differ in length"),
        ({"thread_lines": "٣"}, "comma-separated whole numbers"),
    ],
)
def test_a_bad_track_is_refused_with_its_reason(changes, reason):
    with pytest.raises(ProfileError, match=reason):
        load_track(_track_doc(**changes))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x1f\x8b\x08\x00garbage", "gzip"),
        (b"{not json", "not JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        ("[]", "not a flamedeck time track"),
    ],
)
def test_input_that_is_no_track_at_all_is_refused(data, reason):
    with pytest.raises(ProfileError, match=reason):
        load_track(data)


def test_a_gzip_bomb_is_refused_once_it_inflates_past_the_bound():
    deflate = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b" " * (1 << 20)
    bomb = b"".join(deflate.compress(chunk) for _ in range(MAX_TRACK_BYTES // len(chunk) + 1))
    with pytest.raises(ProfileError, match="longer than"):
        load_track(bomb + deflate.flush())


def test_stored_record_states_survive_and_a_bad_list_of_them_is_refused():
    split = split_speedscope((TIMELINE / "steady.speedscope.json").read_bytes(), **CLOCK)
    track = with_states(split.track, split.raw_text)
    doc = json.loads(track_json(track))
    assert load_track(json.dumps(doc)).record_states == track.record_states
    for names, text, reason in [
        (["compute"], doc["record_states"][:-1], "one character per record"),
        (["x" * 65], doc["record_states"], "state names"),
        (doc["states"], "z" * len(doc["record_states"]), "names no state"),
    ]:
        with pytest.raises(ProfileError, match=reason):
            load_track(json.dumps({**doc, "states": names, "record_states": text}))
