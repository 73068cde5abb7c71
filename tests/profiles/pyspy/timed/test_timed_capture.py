"""A capture with time (timed/timed_capture.py): its records read once, each round placed on
the host's clock, each sample's state in order, and the states stored in the track."""

import pytest

from profiles.pyspy.errors import ProfileError
from profiles.pyspy.formats.split import split_speedscope
from profiles.pyspy.formats.time_track import TimeUnavailable
from profiles.pyspy.rules.state_rules import STATES
from profiles.pyspy.timed.timed_capture import NO_STATE, TimedCapture, state_name, with_states
from tests.profiles.pyspy.timeline_data import speedscope

WORK = ["main (train.py:10)", "step (train.py:20)"]
WAIT = ["main (train.py:10)", "Queue.get (queue.py:180)"]
LOAD = ["Thread.run (threading.py:982)", "load (loader.py:5)"]
COMPUTE, DATA_WAIT = STATES.index("compute"), STATES.index("data_wait")


def split(start=100.0, end=102.0):
    """4 rounds at 2 Hz: `main` works, waits once; `loader` loads; `late` lives 2 rounds."""
    text = speedscope(
        [
            (9, "loader", [LOAD] * 4),
            (7, "main", [WORK, WORK, WAIT, WORK]),
            (11, "late", [LOAD, LOAD]),
        ],
        rate=2,
    )
    return split_speedscope(text, start=start, end=end, rate=2, idle=True)


@pytest.fixture
def capture():
    parts = split()
    return TimedCapture(parts.raw_text, parts.track)


def thread_named(capture, name):
    return next(t for t in capture.track.threads if t.name == name)


def test_round_k_is_placed_at_k_steps_of_the_capture_and_the_last_plus_one_at_its_end(capture):
    assert [capture.seconds(k) for k in range(5)] == [0.0, 0.5, 1.0, 1.5, 2.0]
    longer = split(end=104.0)
    assert TimedCapture(longer.raw_text, longer.track).seconds(3) == 3.0


def test_only_threads_sampled_in_every_round_are_timed_sorted_by_name(capture):
    assert [(t.name, t.tid) for t in capture.timed()] == [("loader", 9), ("main", 7)]


def test_records_are_the_raw_texts_lines_and_stacks_name_their_frames(capture):
    assert len(capture.lines) == capture.track.records == 4
    main = thread_named(capture, "main")
    assert capture.stack(main.lines[0]) == "thread (7): main;" + ";".join(WORK)
    assert capture.stack(main.lines[2]) == "thread (7): main;" + ";".join(WAIT)
    assert [capture.lines[r].rpartition(" ")[2] for r in main.lines] == ["3", "3", "1", "3"]


def test_each_sample_gets_its_records_state_in_round_order(capture):
    main = thread_named(capture, "main")
    assert list(capture.sample_states(main)) == [COMPUTE, COMPUTE, DATA_WAIT, COMPUTE]
    assert capture.state_flags(main, ["data_wait"]) == b"\x00\x00\x01\x00"
    assert capture.state_flags(main, ["compute", "data_wait"]) == b"\x01" * 4
    assert capture.line_states()[-1] == NO_STATE  # what a sample in no record picks


def test_marks_and_flags_place_a_user_function_on_the_rounds_that_have_it(capture):
    main, loader = thread_named(capture, "main"), thread_named(capture, "loader")
    marks = capture.marks("step (train.py)", True)
    assert len(marks) == capture.track.records + 1 and marks[-1] == 0
    assert capture.flags(main, marks) == b"\x01\x01\x00\x01"
    assert capture.flags(loader, marks) == b"\x00" * 4
    assert capture.flags(main, capture.marks("data_wait", False)) == b"\x00\x00\x01\x00"


def test_user_frames_and_functions_leave_library_code_out(capture):
    main = thread_named(capture, "main")
    working = main.lines[0]
    assert capture.user_frames()[working] == WORK
    assert capture.user_functions()[working] == {"main (train.py)", "step (train.py)"}
    waiting = main.lines[2]
    assert capture.user_frames()[waiting] == ["main (train.py:10)"]


def test_stored_states_are_read_back_without_the_raw_text(capture):
    parts = split()
    track = with_states(parts.track, parts.raw_text)
    assert track.record_states == [state_name(s) for s in capture.line_states()[:-1]]
    alone = TimedCapture(None, track)
    assert alone.line_states() == capture.line_states()
    main = thread_named(alone, "main")
    assert list(alone.sample_states(main)) == [COMPUTE, COMPUTE, DATA_WAIT, COMPUTE]
    with pytest.raises(ProfileError, match="read from its time track alone"):
        alone.stack(0)


def test_a_track_alone_without_stored_states_is_refused():
    with pytest.raises(ProfileError, match="the raw text is needed"):
        TimedCapture(None, split().track)


def test_a_track_of_another_text_is_refused_naming_both_counts():
    parts = split()
    with pytest.raises(ProfileError, match="names 4 records, the text has 3"):
        TimedCapture(parts.raw_text.split("\n", 1)[1], parts.track)


def test_no_track_means_no_time():
    with pytest.raises(TimeUnavailable, match="keeps no time"):
        TimedCapture("main (train.py:10) 1\n", None)


def test_full_paths_in_the_records_read_as_the_capture_names_them():
    full = [
        "main (/home/me/proj/train.py:10)",
        "Module.forward (/venv/lib/python3.11/site-packages/torch/nn/module.py:5)",
    ]
    text = speedscope([(7, "main", [full, full])], rate=2)
    parts = split_speedscope(text, start=0.0, end=1.0, rate=2, idle=True)
    capture = TimedCapture(parts.raw_text, parts.track)
    record = capture.track.threads[0].lines[0]
    assert capture.stack(record).endswith(
        "main (train.py:10);Module.forward (torch/nn/module.py:5)"
    )
    assert capture.installed == frozenset({"torch"})
    assert capture.user_frames()[record] == ["main (train.py:10)"]
