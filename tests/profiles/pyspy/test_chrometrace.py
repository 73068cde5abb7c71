"""py-spy's chrometrace read as samples with times (profiles.pyspy.chrometrace), and a
time track that places its rounds there (timetrack `times`). The files are written here
the way py-spy's src/chrometrace.rs writes them: per sample, `E` for each frame that
left the thread's stack and `B` for each that came, nothing when it did not change,
and at the write every thread's last stack closed."""

import json

import pytest

from profiles.pyspy.chrometrace import chrometrace_samples, is_chrometrace
from profiles.pyspy.errors import ProfileError
from profiles.pyspy.split import split_speedscope
from profiles.pyspy.timed import TimedCapture
from profiles.pyspy.timeline import timeline
from profiles.pyspy.timetrack import load_track, track_json

MAIN = ("thread (11): MainThread", "")
MAIN_PTHREAD = 1400
WORK = [MAIN, ("<module>", "/job/train.py", 9), ("train", "/job/train.py", 20)]
EVAL = [MAIN, ("<module>", "/job/train.py", 9), ("evaluate", "/job/train.py", 40)]
WAIT = [*WORK, ("wait", "/usr/lib/python3.11/threading.py", 320)]


def _event(frame: tuple, ph: str, ts: int, tid: int = MAIN_PTHREAD) -> dict:
    name, file, *line = frame
    return {"args": {"filename": file, "line": line[0] if line else 0}, "cat": "py-spy",
            "name": name, "ph": ph, "pid": 10, "tid": tid, "ts": ts}  # fmt: skip


def chrometrace(samples: list[tuple[int, list]], write_us: int) -> bytes:
    """(ts µs, stack root first) per round of one thread, as py-spy writes them."""
    events, previous = [], []
    for ts, stack in samples:
        same = 0
        while same < min(len(previous), len(stack)) and previous[same] == stack[same]:
            same += 1
        events += [_event(f, "E", ts) for f in reversed(previous[same:])]
        events += [_event(f, "B", ts) for f in stack[same:]]
        previous = stack
    events += [_event(f, "E", write_us) for f in previous]
    return json.dumps(events).encode()


def _job() -> tuple[bytes, list[int]]:
    """20 ms rounds: work that changes line every round, a 1 s wait whose stack never
    changes (its rounds are not in the file), then an evaluation."""
    rounds, times = [], []
    for k in range(150):
        ts = 500_000 + 20_000 * k
        if k < 50:
            stack = [*WORK[:-1], ("train", "/job/train.py", 20 + k % 2)]
        elif k < 100:
            stack = WAIT
        else:
            stack = [*EVAL[:-1], ("evaluate", "/job/train.py", 40 + k % 2)]
        rounds.append((ts, stack))
        times.append(ts)
    return chrometrace(rounds, write_us=times[-1] + 20_000), times


def test_a_speedscope_record_is_not_taken_for_a_chrometrace():
    assert is_chrometrace(b' [{"ph": "B"}]') and not is_chrometrace(b'{"profiles": []}')


def test_the_rounds_no_stack_changed_in_are_counted_from_py_spys_total():
    data, truth = _job()
    samples = chrometrace_samples(data, rate=50, samples_reported=150)
    assert samples.shown == 101  # the wait shows once, when it began
    assert len(samples.times) == 150
    # Every round shown is where py-spy took it; the hidden ones fill the wait evenly.
    assert samples.times[:51] == [t / 1e6 for t in truth[:51]]
    assert samples.times[100:] == [t / 1e6 for t in truth[100:]]
    assert max(abs(a - b / 1e6) for a, b in zip(samples.times, truth, strict=True)) < 0.001
    doc = json.loads(samples.speedscope)
    (profile,) = doc["profiles"]
    assert profile["name"] == 'Thread 11 "MainThread"' and len(profile["samples"]) == 150


def test_without_py_spys_count_the_hidden_rounds_come_from_the_rate():
    data, _ = _job()
    assert len(chrometrace_samples(data, rate=50).times) == 150


def test_its_track_places_the_evaluation_where_py_spy_took_it():
    data, truth = _job()
    samples = chrometrace_samples(data, rate=50, samples_reported=150)
    first = samples.times[0]
    split = split_speedscope(
        samples.speedscope, start=1000.0 + first, end=1000.0 + samples.end_s, rate=50,
        idle=True, times=[t - first for t in samples.times],
    )  # fmt: skip
    track = load_track(track_json(split.track))
    assert track.times is not None and track.rounds == 150
    # The wait (rounds 50-99) lies in [1, 2) s, the evaluation from 2 s on.
    assert track.round_at(1.0) == 50 and track.round_at(2.0) == 100
    assert track.at(100) == pytest.approx(2.0)
    line = timeline(TimedCapture(split.raw_text, track), 1.0)
    (main,) = line["threads"]
    assert len(main["dominant"]) == 3 and None not in main["dominant"]
    assert split.raw_text.count("wait (/usr/lib/python3.11/threading.py:320) 50") == 1


def test_a_whole_job_window_cuts_at_py_spys_times():
    data, _ = _job()
    samples = chrometrace_samples(data, rate=50, samples_reported=150)
    first = samples.times[0]
    split = split_speedscope(
        samples.speedscope, start=1000.0, end=1000.0 + samples.end_s - first, rate=50,
        idle=True, times=[t - first for t in samples.times], window_from=1002.0,
    )  # fmt: skip
    assert split.track.rounds == 50 and split.track.start == pytest.approx(1002.0)
    assert split.track.times[0] == 0 and split.track.at(49) == pytest.approx(0.98)


def test_a_thread_first_seen_after_the_first_round_is_cut_where_its_rounds_lie():
    """A thread that starts mid-capture holds the last rounds: the window's cut takes
    only its rounds before the instant, and every round keeps its time (it once stayed
    whole, came out longer than the cut main thread, and the track lost its times)."""
    data, _ = _job()
    helper = [("thread (12): helper", ""), ("run", "/job/helper.py", 5)]
    events = json.loads(data)
    for k in range(75, 150):  # from round 75 (2.0 s) on, its line changes each round
        ts = 500_000 + 20_000 * k
        if k > 75:
            events.append(_event((*helper[1][:2], 5 + (k - 1) % 2), "E", ts, tid=1401))
        events.append(_event((*helper[1][:2], 5 + k % 2), "B", ts, tid=1401) if k > 75 else
                      _event(helper[0], "B", ts, tid=1401))  # fmt: skip
        if k == 75:
            events.append(_event((*helper[1][:2], 5), "B", ts, tid=1401))
    events.sort(key=lambda e: e["ts"])
    samples = chrometrace_samples(json.dumps(events), rate=50, samples_reported=225)
    first = samples.times[0]
    split = split_speedscope(
        samples.speedscope, start=1000.0, end=1000.0 + samples.end_s - first, rate=50,
        idle=True, times=[t - first for t in samples.times], window_from=1002.0,
    )  # fmt: skip
    track = split.track
    assert track.rounds == 50 and track.times is not None and len(track.times) == 50
    by_name = {t.name: t.samples for t in track.threads}
    assert by_name == {"MainThread": 50, "helper": 50}  # the rounds from 2.0 s on, each


@pytest.mark.parametrize(
    "data",
    [b"[1, 2]", b'[{"ph": "X", "ts": 1, "pid": 1, "tid": 1, "name": "a"}]', b"[", b"{}"],
)
def test_input_that_is_not_py_spys_chrometrace_is_a_clear_error(data):
    with pytest.raises(ProfileError):
        chrometrace_samples(data, rate=50)


def test_a_track_whose_times_do_not_fit_its_rounds_is_refused():
    data, _ = _job()
    samples = chrometrace_samples(data, rate=50, samples_reported=150)
    first = samples.times[0]
    split = split_speedscope(
        samples.speedscope, start=1.0, end=1.0 + samples.end_s, rate=50, idle=True,
        times=[t - first for t in samples.times],
    )  # fmt: skip
    doc = json.loads(track_json(split.track))
    doc["times"] = ",".join(doc["times"].split(",")[:-1])
    with pytest.raises(ProfileError, match="one time per round"):
        load_track(json.dumps(doc))
    doc["times"] = "5" + ",1" * 149
    with pytest.raises(ProfileError, match="the first 0"):
        load_track(json.dumps(doc))


def test_rounds_no_stack_changed_in_end_where_py_spy_was_told_to_stop_not_at_its_write():
    """A loaded host writes seconds after the stop: no round is placed in between."""
    data, truth = _job()
    late = json.loads(data)
    for event in late[-len(EVAL) :]:
        event["ts"] += 8_000_000
    stop_s = (truth[-1] + 20_000) / 1e6
    samples = chrometrace_samples(json.dumps(late), rate=50, stopped_s=stop_s)
    assert samples.end_s == pytest.approx(stop_s) and samples.times[-1] < stop_s
    assert len(samples.times) == 150
