"""Sampling rounds, idle_included and active_percent (activity.py) on measured counts."""

from profiles.pyspy import analyze_lag
from profiles.pyspy.count.activity import (
    ThreadCount,
    active_percent,
    activity,
    rounds_from_log,
)

DONE = (
    "py-spy> Sampling process 50 times a second for 4 seconds. Press Control-C to exit.\n"
    "py-spy> Wrote raw flamegraph data to 'x'. Samples: 995 Errors: 0\n"
)
STOPPED = (
    "py-spy> Sampling process 50 times a second for 10 seconds. Press Control-C to exit.\n"
    "py-spy> Stopped sampling because Control-C pressed\n"
    "py-spy> Wrote raw flamegraph data to 'x'. Samples: 755 Errors: 0\n"
)


def test_a_capture_that_ended_by_duration_took_rate_times_duration_minus_one_rounds():
    # Measured with py-spy 0.4.3 --idle: 199 samples per thread at 50 Hz for 4 s.
    assert rounds_from_log(analyze_lag(DONE)) == 199
    assert rounds_from_log(analyze_lag(STOPPED)) is None
    assert rounds_from_log(analyze_lag("Error: Failed to get process executable name")) is None
    assert rounds_from_log(None) is None


def test_idle_samples_are_recognised_from_lasting_threads_filling_the_rounds():
    idle = [ThreadCount(199, 150), ThreadCount(199, 0), ThreadCount(199, 199), ThreadCount(3, 3)]
    assert activity(idle, analyze_lag(DONE)) == (199, True)
    assert activity(idle, None) == (199, True)  # without a log: the top count
    # Without --idle (measured): busy 164, half-busy 90, blocked threads a few each.
    dropped = [ThreadCount(164, 0), ThreadCount(90, 10), ThreadCount(20, 20), ThreadCount(14, 14)]
    assert activity(dropped, analyze_lag(DONE)) == (199, False)
    assert activity(dropped, None) == (None, False)


def test_a_single_thread_counts_as_idle_only_when_it_was_kept_while_blocked():
    waiting = [ThreadCount(159, 143), ThreadCount(1, 1)]  # gloo rank 0 and a transient state
    log = DONE.replace("50 times", "40 times")
    assert activity(waiting, analyze_lag(log)) == (159, True)
    assert activity([ThreadCount(159, 0)], analyze_lag(log)) == (159, False)
    assert activity(waiting, None) == (None, None)  # nothing to compare it with


def test_what_the_caller_knows_wins_over_the_inference():
    counts = [ThreadCount(164, 0), ThreadCount(90, 10)]
    assert activity(counts, None, idle=True) == (164, True)
    assert activity(counts, analyze_lag(DONE), idle=False) == (199, False)


def test_active_percent_is_samples_over_rounds_at_most_100():
    assert active_percent(130, 588) == 22.11  # DESIGN.md's trainer waiting for data
    assert active_percent(400, 399) == 100.0
    assert active_percent(5, None) is None
