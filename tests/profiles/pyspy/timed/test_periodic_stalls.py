"""Periodic stalls: found on real jobs with a planted period, checked against the job's own
clock; none on a steady job or on bursts at random times."""

import importlib.util
import json
import random
import statistics

import pytest

from profiles.pyspy.formats.split import split_speedscope
from profiles.pyspy.timed.periodic_stalls import MAX_CV, RULE, periodic_stalls
from profiles.pyspy.timed.timed_capture import TimedCapture
from tests.profiles.pyspy.timeline_data import TIMELINE, captured, speedscope
from tests.support.requirements import require

TRAIN = ["<module> (train.py:90)", "main (train.py:80)", "train_step (train.py:40)"]
FORWARD = [*TRAIN, "forward (model.py:12)"]
BACKWARD = [*TRAIN, "backward (torch/_tensor.py:626)"]
EVAL = [
    "<module> (train.py:90)",
    "main (train.py:80)",
    "evaluate (train.py:71)",
    "forward (model.py:12)",
]
WAIT = ["<module> (train.py:90)", "main (train.py:80)", "Queue.get (queue.py:180)"]


def _printed(clock):
    """The job's own record of its stalls: period (mean interval) and mean duration."""
    starts = [b[0] for b in clock["bursts"]]
    period = (starts[-1] - starts[0]) / (len(starts) - 1)
    return period, statistics.fmean(b[1] - b[0] for b in clock["bursts"])


@pytest.mark.parametrize(
    ("case", "function", "state"),
    [("periodic_eval", "evaluate", "compute"), ("periodic_checkpoint", "save_checkpoint", "idle")],
)
def test_a_planted_stall_is_found_with_the_period_and_duration_the_job_printed(
    case, function, state
):
    clock, capture = captured(case)
    (stall,) = periodic_stalls(capture)
    period, duration = _printed(clock)
    assert stall["rule"] == RULE and stall["thread"] == "MainThread"
    assert stall["function"].startswith(f"{function} (") and stall["state"] == state
    assert stall["period_s"] == pytest.approx(period, rel=0.10)
    assert stall["duration_s"] == pytest.approx(duration, abs=0.2)
    assert stall["frames"][0].startswith(f"{function} (") and stall["frames"][0] in stall["title"]
    assert stall["title"].startswith(
        f"Every {stall['period_s']:.1f} s, {stall['duration_s']:.1f} s in"
    )
    assert stall["interval"][0] <= stall["value"] <= stall["interval"][1]
    assert stall["value"] == pytest.approx(100 * duration / period, abs=8)
    assert stall["regularity_cv"] <= MAX_CV


@pytest.mark.parametrize("case", ["periodic_eval", "periodic_checkpoint"])
def test_each_burst_lies_where_the_job_printed_it(case):
    clock, capture = captured(case)
    (stall,) = periodic_stalls(capture)
    track = capture.track
    printed = [(b - track.start, e - track.start) for b, e in clock["bursts"]]
    for begin, end in stall["bursts"]:
        if end >= track.duration_s - 0.05:
            continue  # cut by the capture's end: the job was stopped before printing it
        k = round(begin / track.step_s)
        slack = max(0.2, 3 * track.placement_sd_s(k)) + 0.1
        assert min(abs(begin - b) for b, _ in printed) <= slack, (begin, printed)


def test_a_steady_job_has_no_periodic_stall():
    _, capture = captured("steady")
    assert periodic_stalls(capture) == []


def _synthetic(rounds_per_s, seconds, stall_at, stall_s, seed=3):
    """A main thread alternating forward/backward every 50 ms, stalled in evaluate()
    for `stall_s` at each time of `stall_at`, and a loader waiting; 100 Hz."""
    rng, samples = random.Random(seed), []
    for k in range(int(seconds * rounds_per_s)):
        t = k / rounds_per_s
        if any(s <= t < s + stall_s for s in stall_at):
            samples.append(EVAL)
        else:
            samples.append(FORWARD if (t // 0.05) % 2 else BACKWARD)
        if rng.random() < 0.05:
            samples[-1] = WAIT
    text = speedscope([(1, "MainThread", samples), (2, "loader", [WAIT] * len(samples))])
    split = split_speedscope(text, start=0.0, end=seconds, rate=rounds_per_s, idle=True)
    return TimedCapture(split.raw_text, split.track)


def test_a_regular_stall_in_synthetic_samples_gives_its_exact_period():
    capture = _synthetic(100, 30, [1.3 + 4 * i for i in range(8)], 0.6)
    (stall,) = periodic_stalls(capture)
    assert stall["period_s"] == pytest.approx(4.0, abs=0.02)
    assert stall["duration_s"] == pytest.approx(0.6, abs=0.03)
    assert len(stall["bursts"]) == 8 and stall["function"] == "evaluate (train.py)"
    assert "forward" not in stall["title"]  # evaluate calls it, but forward runs all along


@pytest.mark.parametrize("seed", range(5))
def test_stalls_at_random_times_are_not_periodic(seed):
    rng = random.Random(seed)
    at, t = [], 0.5
    while t < 28:
        at.append(t)
        t += 0.7 + rng.expovariate(1 / 3)
    assert periodic_stalls(_synthetic(100, 30, at, 0.6)) == []


def test_stalls_that_stop_half_way_through_the_capture_are_not_a_period():
    capture = _synthetic(100, 40, [1 + 3 * i for i in range(5)], 0.6)
    assert periodic_stalls(capture) == []


def test_the_steps_own_phases_are_not_stalls():
    capture = _synthetic(100, 30, [], 0)
    assert periodic_stalls(capture) == []


def test_only_the_step_threads_are_judged():
    # The loader (not a step thread: it never touches the GPU nor computes most) has
    # the bursts; the main thread computes steadily.
    samples = [(EVAL if (k % 300) < 60 else WAIT) for k in range(3000)]
    text = speedscope([(1, "MainThread", [FORWARD] * 3000), (2, "loader", samples)])
    split = split_speedscope(text, start=0.0, end=30.0, rate=100, idle=True)
    capture = TimedCapture(split.raw_text, split.track)
    assert periodic_stalls(capture) == []
    (stall,) = periodic_stalls(capture, step_thread_names=["loader"])
    assert stall["thread"] == "loader" and stall["period_s"] == pytest.approx(3.0, abs=0.05)


def _load_recorder():
    spec = importlib.util.spec_from_file_location("timeline_record", TIMELINE / "record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_live_job_with_a_planted_stall_is_found_at_its_period(tmp_path):
    recorder = _load_recorder()
    require(recorder.PY_SPY, "py-spy", "make test installs it into .venv")
    clock = recorder.record(tmp_path / "live", 12, 50, ["--eval-every", "70", "--eval-s", "0.7"])
    data = (tmp_path / "live.speedscope.json").read_bytes()
    split = split_speedscope(data, start=clock["start"], end=clock["end"], rate=50, idle=True)
    (stall,) = periodic_stalls(TimedCapture(split.raw_text, split.track))
    period, duration = _printed(clock)
    assert stall["function"].startswith("evaluate (")
    assert stall["period_s"] == pytest.approx(period, rel=0.10)
    assert stall["duration_s"] == pytest.approx(duration, abs=0.2)
    assert json.dumps(stall)


def test_a_stall_in_no_function_of_its_own_is_named_by_its_state_and_call_site():
    # Every 4 s the step waits 0.6 s for data, from main() itself: no user function
    # comes and goes with it, the state does.
    samples = [(WAIT if (k - 130) % 400 < 60 and k >= 130 else FORWARD) for k in range(3000)]
    text = speedscope([(1, "MainThread", samples)])
    split = split_speedscope(text, start=0.0, end=30.0, rate=100, idle=True)
    (stall,) = periodic_stalls(TimedCapture(split.raw_text, split.track))
    assert (stall["function"], stall["state"]) == (None, "data_wait")
    assert stall["title"] == "Every 4.0 s, 0.6 s in data_wait"
    assert stall["frames"] == ["main (train.py:80)"]
    assert "main" in stall["advice"] and "(no user frame)" not in stall["frames"]
