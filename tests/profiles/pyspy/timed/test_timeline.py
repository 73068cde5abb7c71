"""Timelines: each thread's states bucket by bucket, on the host's clock, several ranks on one."""

import json
import math

import pytest

from profiles.pyspy import ProfileError
from profiles.pyspy.formats.split import split_speedscope
from profiles.pyspy.formats.time_track import load_track, track_json
from profiles.pyspy.rules.state_rules import STATES
from profiles.pyspy.timed.timed_capture import TimedCapture, with_states
from profiles.pyspy.timed.timeline import (
    DEFAULT_BUCKETS,
    MAX_BUCKETS,
    aligned_timelines,
    default_bucket,
    timeline,
)
from tests.profiles.pyspy.timeline_data import captured, recorded, speedscope

WORK = ["main (train.py:10)", "step (train.py:20)"]
WAIT = ["main (train.py:10)", "Queue.get (queue.py:180)"]


def _capture(samples, start=1000.0, seconds=None, extra=()):
    seconds = seconds or len(samples) / 100
    text = speedscope([(7, "main", samples), *extra])
    split = split_speedscope(text, start=start, end=start + seconds, rate=100, idle=True)
    return TimedCapture(split.raw_text, split.track)


def test_each_bucket_holds_the_shares_of_its_own_rounds():
    # 1 s of work then 1 s of waiting for data, at 100 Hz: 0.5 s buckets.
    capture = _capture([WORK] * 100 + [WAIT] * 100)
    line = timeline(capture, 0.5)
    (thread,) = line["threads"]
    assert line["start"] == 1000.0 and line["bucket_s"] == 0.5
    assert thread["dominant"] == ["compute", "compute", "data_wait", "data_wait"]
    assert thread["states"] == {"compute": [1, 1, 0, 0], "data_wait": [0, 0, 1, 1]}


def test_shares_add_up_to_one_in_every_bucket_with_samples_and_dominant_is_the_largest():
    _, capture = captured("periodic_checkpoint")
    line = timeline(capture)
    for thread in line["threads"]:
        for i, dominant in enumerate(thread["dominant"]):
            shares = {s: v[i] for s, v in thread["states"].items()}
            if dominant is None:
                assert not any(shares.values())
                continue
            assert sum(shares.values()) == pytest.approx(1, abs=0.01)
            assert shares[dominant] == max(shares.values())
        assert set(thread["states"]) <= set(STATES)


def test_the_default_bucket_gives_a_few_hundred_buckets_at_most():
    _, capture = captured("steady")
    line = timeline(capture)
    assert 0 < len(line["threads"][0]["dominant"]) <= DEFAULT_BUCKETS
    assert line["bucket_s"] * capture.track.rate >= 5
    assert default_bucket(600, 100) == 2 and default_bucket(14, 50) == 0.1
    assert all(
        math.ceil(d / default_bucket(d, r)) <= DEFAULT_BUCKETS
        for d in (0.5, 3, 14, 61, 600, 3600, 86400)
        for r in (1, 20, 100, 1000)
    )


@pytest.mark.parametrize("bucket", [0.0001, 0, -1, float("nan"), float("inf"), True, "1"])
def test_a_bucket_that_is_no_size_or_gives_too_many_buckets_is_refused(bucket):
    _, capture = captured("steady")
    with pytest.raises(ProfileError, match="bucket"):
        timeline(capture, bucket)


def test_the_refusal_says_the_smallest_bucket_that_works():
    _, capture = captured("steady")
    with pytest.raises(ProfileError, match=f"more than {MAX_BUCKETS}: ask for"):
        timeline(capture, capture.track.duration_s / (MAX_BUCKETS + 5))


def test_the_stalls_a_job_printed_are_where_its_timeline_shows_them():
    """The job printed when each save_checkpoint() began and ended (its own clock); the
    main thread's idle buckets are there, within the placement's uncertainty."""
    clock, capture = captured("periodic_checkpoint")
    line = timeline(capture, 0.1)
    main = next(t for t in line["threads"] if t["name"] == "MainThread")
    idle = main["states"]["idle"]
    track = capture.track
    for begin, end in clock["bursts"]:
        first, last = (begin - line["start"]) / 0.1, (end - line["start"]) / 0.1
        k = round((begin - track.start) / track.step_s)
        slack = max(2, 3 * track.placement_sd_s(k) / 0.1 + 1)
        found = [
            i for i in range(len(idle)) if idle[i] >= 0.5 and first - slack <= i <= last + slack
        ]
        assert found, (begin, end)
        middle = (found[0] + found[-1]) / 2
        assert abs(middle - (first + last) / 2) <= slack
        assert len(found) * 0.1 == pytest.approx(end - begin, abs=0.35)


def test_outside_the_stalls_the_main_thread_computes():
    clock, capture = captured("periodic_checkpoint")
    line = timeline(capture, 0.1)
    main = next(t for t in line["threads"] if t["name"] == "MainThread")
    edges = [((b - line["start"]) / 0.1, (e - line["start"]) / 0.1) for b, e in clock["bursts"]]
    # Up to the last stall the job printed (it was stopped during the next one).
    far = [i for i in range(int(edges[-1][1])) if all(i < b - 8 or i > e + 8 for b, e in edges)]
    assert far and sum(main["dominant"][i] == "compute" for i in far) >= 0.95 * len(far)


def test_a_thread_sampled_in_fewer_rounds_is_listed_apart_with_why():
    late = (8, "late", [WAIT] * 40)
    capture = _capture([WORK] * 100, extra=[late])
    line = timeline(capture, 0.25)
    assert [t["name"] for t in line["threads"]] == ["main"]
    (untimed,) = line["untimed"]
    assert (untimed["name"], untimed["samples"]) == ("late", 40)
    assert "40 of 100 rounds" in untimed["reason"]


def test_ranks_on_one_clock_share_buckets_and_each_moves_by_its_offset():
    # Both ranks switch from work to waiting at the same instant of the reference
    # clock; rank b's host clock runs 3 s behind and it started 1 s later.
    a = _capture([WORK] * 300 + [WAIT] * 300, start=1000.0)
    b = _capture([WORK] * 200 + [WAIT] * 300, start=998.0)
    job = aligned_timelines([("a", a, 0.0), ("b", b, 3.0)], bucket_s=0.5)
    assert job["start"] == 1000.0 and job["bucket_s"] == 0.5
    rows = {r["name"]: r["threads"][0]["dominant"] for r in job["ranks"]}
    assert len(rows["a"]) == len(rows["b"]) == 12
    assert rows["a"][:6] == ["compute"] * 6 and rows["a"][6:] == ["data_wait"] * 6
    assert rows["b"][:2] == [None, None]
    assert rows["b"][2:6] == ["compute"] * 4 and rows["b"][6:] == ["data_wait"] * 6
    assert [r["offset_s"] for r in job["ranks"]] == [0.0, 3.0]


def test_a_page_of_a_jobs_ranks_gets_the_jobs_buckets_whatever_ranks_it_holds():
    # The job runs 1000-1012 s on the reference clock at 50 Hz; this page holds one rank
    # of 6 s from 1002 s (its host 1 s behind), another none.
    a = _capture([WORK] * 300, start=1001.0)
    span = (1000.0, 1012.0, 50.0)
    page = aligned_timelines([("a", a, 1.0)], bucket_s=0.5, span=span)
    assert page["start"] == 1000.0 and len(page["ranks"][0]["threads"][0]["dominant"]) == 24
    assert page["ranks"][0]["threads"][0]["dominant"][:4] == [None] * 4
    empty = aligned_timelines([], bucket_s=0.5, span=span)
    assert (empty["start"], empty["bucket_s"], empty["ranks"]) == (1000.0, 0.5, [])


def test_aligned_timelines_refuse_what_is_not_a_job():
    a = _capture([WORK] * 100)
    with pytest.raises(ProfileError, match="no rank"):
        aligned_timelines([])
    with pytest.raises(ProfileError, match="offset"):
        aligned_timelines([("a", a, float("nan"))])


def test_a_track_that_belongs_to_another_raw_text_is_refused():
    _, capture = captured("steady")
    other = _capture([WORK] * 100)
    with pytest.raises(ProfileError, match="does not belong"):
        TimedCapture("thread (1): x;a (m.py:1) 4\n", capture.track)
    assert other.track.records == 1


def test_the_timeline_is_json_without_nan_or_infinity():
    _, capture = captured("periodic_eval")
    text = json.dumps(timeline(capture), allow_nan=False)
    assert json.loads(text)["threads"]


def test_a_timeline_read_from_stored_states_equals_one_classified_on_the_spot():
    _, split = recorded("periodic_checkpoint")
    classified = timeline(TimedCapture(split.raw_text, split.track), 0.25)
    stored = load_track(track_json(with_states(split.track, split.raw_text)))
    assert stored.record_states is not None and len(stored.record_states) == stored.records
    reader = TimedCapture(split.raw_text, stored)
    assert timeline(reader, 0.25) == classified
    assert reader._profile is None  # read, not recomputed: no samples were classified


def test_state_flags_mark_the_samples_in_those_states():
    capture = _capture([WORK] * 30 + [WAIT] * 20 + [WORK] * 10)
    (thread,) = capture.timed()
    flags = capture.state_flags(thread, ["data_wait"])
    assert list(flags) == [0] * 30 + [1] * 20 + [0] * 10
