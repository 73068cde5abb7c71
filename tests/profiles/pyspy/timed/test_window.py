"""A window is a capture of its own: the samples taken in it, analysed like any capture."""

from collections import Counter

import pytest

from profiles.pyspy import ProfileError, analyze, parse_profile_text, to_folded
from profiles.pyspy.formats.split import split_speedscope
from profiles.pyspy.timed.periodic_stalls import periodic_stalls
from profiles.pyspy.timed.timed_capture import TimedCapture, with_states
from profiles.pyspy.timed.window import (
    window,
    window_flamegraph,
    window_states,
    window_text,
)
from tests.profiles.pyspy.timeline_data import captured, recorded, speedscope

WORK = ["main (train.py:10)", "step (train.py:20)"]
WAIT = ["main (train.py:10)", "Queue.get (queue.py:180)"]


def _counts(raw_text: str) -> Counter:
    return Counter(
        {
            line.rpartition(" ")[0]: int(line.rpartition(" ")[2])
            for line in to_folded(parse_profile_text(raw_text))
        }
    )


def test_a_window_holds_exactly_the_rounds_placed_in_it():
    text = speedscope([(7, "main", [WORK] * 100 + [WAIT] * 50 + [WORK] * 50)])
    split = split_speedscope(text, start=50.0, end=52.0, rate=100, idle=True)
    stats = analyze(parse_profile_text(window(split.raw_text, split.track, 1.0, 1.5)))
    assert stats["total_samples"] == 50
    assert [(s["state"], s["samples"]) for s in stats["states"] if s["samples"]] == [
        ("data_wait", 50)
    ]


@pytest.mark.parametrize(("start", "end"), [(0, 3.3), (2.5, 7.75), (7, 100)])
def test_window_and_rest_add_up_to_the_timed_threads_samples(start, end):
    _, split = recorded("periodic_eval")
    inside = _counts(window(split.raw_text, split.track, start, end))
    outside = _counts(window(split.raw_text, split.track, start, end, rest=True))
    assert inside + outside == _counts(split.raw_text)
    rounds = split.track.rounds
    step = split.track.step_s
    assert sum(inside.values()) == 2 * (min(rounds, round(end / step)) - round(start / step))


def test_a_window_over_a_stall_shows_the_stall_and_the_rest_does_not():
    clock, capture = captured("periodic_eval")
    (stall,) = periodic_stalls(capture)
    begin, end = stall["bursts"][1]
    inside = analyze(parse_profile_text(window_text(capture, begin, end)))
    rest = analyze(parse_profile_text(window_text(capture, begin, end, rest=True)))

    def evaluate_share(stats):
        main = next(t for t in stats["thread_functions"] if t["thread"] == "MainThread")
        found = [f for f in main["functions"] if f["function"].startswith("evaluate (")]
        return found[0]["samples"] / main["samples"] if found else 0.0

    assert evaluate_share(inside) >= 0.8
    assert evaluate_share(rest) <= 0.35
    assert inside["findings"] is not None and inside["flamegraph"]["value"] > 0


@pytest.mark.parametrize(
    ("start", "end", "reason"),
    [
        (2, 1, "end after it starts"),
        (-1, 1, "0 or more"),
        (float("nan"), 1, "0 or more"),
        ("0", 1, "must be seconds"),
        (500, 600, "holds no samples"),
    ],
)
def test_a_window_that_holds_nothing_is_refused_with_its_reason(start, end, reason):
    _, split = recorded("steady")
    with pytest.raises(ProfileError, match=reason):
        window(split.raw_text, split.track, start, end)


def test_the_rest_of_a_window_over_everything_is_refused():
    _, split = recorded("steady")
    with pytest.raises(ProfileError, match="rest of the capture holds no samples"):
        window(split.raw_text, split.track, 0, 1000, rest=True)


def test_threads_sampled_in_fewer_rounds_are_in_no_window():
    text = speedscope([(7, "main", [WORK] * 100), (8, "late", [WAIT] * 30)])
    split = split_speedscope(text, start=0.0, end=1.0, rate=100, idle=True)
    stats = analyze(parse_profile_text(window(split.raw_text, split.track, 0, 1)))
    assert [t["name"] for t in stats["threads"]] == ["main"]


def test_a_frame_name_is_carried_as_text_never_interpreted():
    odd = ["main (train.py:10)", "<script>alert(1)</script> (x.py:1)", "100% {x} (y.py:2)"]
    text = speedscope([(7, "main", [odd] * 20 + [WORK] * 20)])
    split = split_speedscope(text, start=0.0, end=0.4, rate=100, idle=True)
    capture = TimedCapture(split.raw_text, split.track)
    frames = {
        f["frame"] for f in analyze(parse_profile_text(window_text(capture, 0, 0.2)))["top_self"]
    }
    assert frames == {"100% {x} (y.py:2)"}


def test_the_window_flamegraph_is_the_flamegraph_analyze_gives_the_window():
    _, capture = captured("periodic_eval")
    text = window_text(capture, 2.0, 6.5)
    found = window_flamegraph(capture, 2.0, 6.5)
    assert _without_paths(found) == analyze(parse_profile_text(text))["flamegraph"]
    # The window's text names frames short; its tree keeps the files the capture recorded.
    assert "(/" not in text
    paths = {n["name"]: n.get("path") for n in _nodes(found)}
    assert paths["Thread._bootstrap (threading.py:995)"] == "/usr/lib/python3.11/threading.py"
    assert paths["thread (28564): MainThread"] is None
    tree = window_flamegraph(capture, 2.0, 6.5, max_nodes=10)
    assert tree["value"] == analyze(parse_profile_text(text))["total_samples"]


def _nodes(tree: dict) -> list[dict]:
    found, stack = [], [tree]
    while stack:
        found.append(stack.pop())
        stack += found[-1]["children"]
    return found


def _without_paths(node: dict) -> dict:
    kept = {k: v for k, v in node.items() if k not in ("path", "children")}
    return {**kept, "children": [_without_paths(c) for c in node["children"]]}


def test_window_states_count_each_threads_states_like_analyze_does_on_the_window():
    clock, split = recorded("periodic_checkpoint")
    track = with_states(split.track, split.raw_text)
    capture = TimedCapture(split.raw_text, track)
    for rest in (False, True):
        rows = {r["name"]: r for r in window_states(capture, 3.0, 9.0, rest=rest)}
        stats = analyze(parse_profile_text(window_text(capture, 3.0, 9.0, rest=rest)))
        for thread in stats["threads"]:
            row = rows[thread["name"]]
            assert row["samples"] == thread["samples"]
            assert row["states"] == {
                s["state"]: s["samples"] for s in thread["states"] if s["samples"]
            }
