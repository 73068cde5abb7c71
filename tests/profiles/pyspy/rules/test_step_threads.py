"""Which threads run the training step (rules/step_threads.py), for small hand-made
per-thread stats: named ones, else those in collectives, else those touching the device,
else the busiest; and their states added up."""

import pytest

from profiles.pyspy.rules.step_threads import (
    WHOLE_CAPTURE,
    capture_threads,
    pool,
    samples_in,
    state_share,
    step_threads,
)
from profiles.pyspy.thresholds import COLLECTIVE_MIN


def thread(name, tid=1, callers=None, **states):
    """A ThreadStat whose samples are its states' samples."""
    total = sum(states.values())
    return {
        "name": name,
        "tid": tid,
        "pid": 100,
        "samples": total,
        "percent": 0.0,
        "states": [
            {
                "state": state,
                "samples": samples,
                "percent": 100 * samples / total,
                "user_callers": (callers or {}).get(state, []),
            }
            for state, samples in states.items()
        ],
        "active_percent": None,
    }


MAIN = thread("MainThread", 1, idle=400)
LOADER = thread("pin_memory", 2, compute=50, backpressure=350)
TRAINER = thread("trainer", 3, compute=300, collective=100)
LAUNCHER = thread("launcher", 4, compute=200, gpu_launch=20)


def chosen(threads, names=()):
    found = step_threads(threads, names)
    return [t["name"] for t in found.threads], found.detected_by


def test_threads_named_on_the_run_are_the_step_threads_by_name_or_tid():
    assert chosen([MAIN, LOADER, TRAINER], ["pin_memory"]) == (["pin_memory"], "named")
    assert chosen([MAIN, LOADER, TRAINER], ["1", " 2 "]) == (["MainThread", "pin_memory"], "named")
    hex_tid = thread("worker", "0x7F3A", compute=10)
    assert chosen([MAIN, hex_tid], ["0x7f3a"]) == (["worker"], "named")


def test_names_that_match_no_thread_fall_back_to_the_collective_threads():
    assert chosen([MAIN, LOADER, TRAINER], ["no-such-thread"]) == (["trainer"], "collective")


def test_every_thread_with_enough_collective_samples_is_a_step_thread_in_input_order():
    other = thread("trainer-2", 5, compute=10, collective=90)
    assert chosen([other, MAIN, TRAINER, LOADER]) == (["trainer-2", "trainer"], "collective")


def test_a_collective_share_below_the_minimum_does_not_count():
    samples = 10_000
    at_minimum = round(COLLECTIVE_MIN * samples)
    just = thread("just", 6, compute=samples - at_minimum, collective=at_minimum)
    below = thread("below", 7, compute=samples - at_minimum + 1, collective=at_minimum - 1)
    assert state_share(just, "collective") == pytest.approx(COLLECTIVE_MIN)
    assert chosen([below, just]) == (["just"], "collective")
    assert chosen([below]) == (["below"], "busiest")


def test_without_collectives_the_threads_touching_the_device_are_the_step_threads():
    syncer = thread("syncer", 8, compute=10, host_sync=1)
    assert chosen([MAIN, LOADER, LAUNCHER, syncer]) == (["launcher", "syncer"], "device")


def test_else_the_one_thread_with_the_most_compute_samples_is_the_step_thread():
    busier = thread("busier", 9, compute=60, idle=1)
    assert chosen([MAIN, LOADER, busier]) == (["busier"], "busiest")


def test_threads_with_no_compute_give_no_step_thread():
    assert chosen([MAIN]) == ([], "none")
    assert chosen([]) == ([], "none")


def test_samples_in_and_state_share_read_one_state_of_a_thread():
    assert samples_in(TRAINER, "collective") == 100
    assert samples_in(TRAINER, "idle") == 0
    assert state_share(TRAINER, "collective") == 0.25
    assert state_share({"samples": 0, "states": []}, "collective") == 0.0
    assert samples_in({"states": None}, "compute") == 0


def test_pool_adds_up_samples_states_and_user_callers_of_the_threads():
    first = thread(
        "a", compute=30, collective=10,
        callers={"collective": [{"frame": "step (train.py:5)", "samples": 10, "percent": 25.0}]},
    )  # fmt: skip
    second = thread(
        "b", compute=20, collective=40,
        callers={"collective": [
            {"frame": "step (train.py:5)", "samples": 30, "percent": 50.0},
            {"frame": "sync (train.py:9)", "samples": 10, "percent": 16.7},
        ]},
    )  # fmt: skip
    pooled = pool([first, second])
    assert pooled.samples == 100
    assert pooled.states == {"compute": 50, "collective": 50}
    assert pooled.callers["collective"] == {"step (train.py:5)": 40, "sync (train.py:9)": 10}
    assert pooled.callers["compute"] == {}


def test_pool_adds_up_framework_callers_by_frame_and_user_frame():
    row = {
        "frame": "Trainer.training_step (transformers/trainer.py:2412)",
        "function": "Trainer.training_step",
        "framework": "transformers",
        "phase": "training step",
        "user_inside": False,
        "user_frame": "main (train.py:3)",
        "percent": 10.0,
    }
    first, second = thread("a", collective=10), thread("b", collective=20)
    first["states"][0]["framework_callers"] = [{**row, "samples": 4}]
    second["states"][0]["framework_callers"] = [{**row, "samples": 6}]
    frameworks = pool([first, second]).frameworks["collective"]
    assert list(frameworks.values()) == [10]
    (key,) = frameworks
    assert row["frame"] in key and row["user_frame"] in key


def test_a_capture_without_thread_frames_is_one_whole_capture_thread():
    states = [{"state": "compute", "samples": 7, "percent": 100.0, "user_callers": []}]
    (whole,) = capture_threads({"threads": [], "total_samples": 7, "states": states})
    assert whole["name"] == WHOLE_CAPTURE and whole["samples"] == 7
    assert whole["states"] == states and whole["percent"] == 100.0
    assert chosen([whole]) == ([WHOLE_CAPTURE], "busiest")


def test_a_capture_with_threads_or_without_samples_keeps_its_threads():
    assert capture_threads({"threads": [MAIN, TRAINER], "total_samples": 800}) == [MAIN, TRAINER]
    assert capture_threads({"threads": [], "total_samples": 0}) == []
