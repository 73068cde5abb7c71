"""Sandwich view from a stored flamegraph tree: callers and callees of one frame,
each sample counted once (recursion included), pruned trees flagged approximate."""

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from profiles.pyspy import AnalysisOptions, analyze, parse_raw_lines, prune_flamegraph
from profiles.pyspy.count.sandwich import frames_like, sandwich
from tests.profiles.pyspy.golden import DATA, check_golden


def tree_of(lines: list[str], max_nodes: int = 8192) -> dict:
    profile = parse_raw_lines(lines)
    return analyze(profile, AnalysisOptions(max_nodes=max_nodes))["flamegraph"]


def shape(node: dict) -> dict:
    """{name: (value, shape of children)} for readable assertions."""
    return {c["name"]: (c["value"], shape(c)) for c in node["children"]}


RECURSIVE = [
    "thread (1): main;run (t.py:1);walk (t.py:5);walk (t.py:5);leaf (t.py:9) 3",
    "thread (1): main;run (t.py:1);walk (t.py:5) 2",
    "thread (2): aux;other (t.py:2);walk (t.py:5);cuLaunchKernel (libcuda.so.1) 5",
    "thread (2): aux;other (t.py:2) 4",
]


def test_a_recursive_frame_counts_each_sample_once():
    result = sandwich(tree_of(RECURSIVE), "walk (t.py:5)")
    assert result["samples"] == 3 + 2 + 5
    assert result["total_samples"] == 14
    assert result["percent"] == round(100 * 10 / 14, 2)
    assert result["self_samples"] == 2
    assert result["occurrences"] == 2
    assert result["approximate"] is False
    assert result["callers"]["value"] == 10
    assert shape(result["callers"]) == {
        "run (t.py:1)": (5, {}),
        "other (t.py:2)": (5, {}),
    }
    # Callees keep the inner recursive call as a node with its own value.
    assert shape(result["callees"]) == {
        "walk (t.py:5)": (3, {"leaf (t.py:9)": (3, {})}),
        "cuLaunchKernel (libcuda.so.1)": (5, {}),
    }


def test_thread_frames_are_not_callers():
    result = sandwich(tree_of(RECURSIVE), "other (t.py:2)")
    assert shape(result["callers"]) == {}
    assert result["callers"]["value"] == result["samples"] == 9
    assert result["self_samples"] == 4


def test_callers_merge_across_threads_by_name():
    lines = [
        "thread (1): a;step (t.py:3);item (t.py:7);sync (libcuda.so.1) 6",
        "thread (2): b;step (t.py:3);item (t.py:7);sync (libcuda.so.1) 4",
        "thread (2): b;eval (t.py:4);sync (libcuda.so.1) 1",
    ]
    result = sandwich(tree_of(lines), "sync (libcuda.so.1)")
    assert result["samples"] == result["self_samples"] == 11
    assert shape(result["callers"]) == {
        "eval (t.py:4)": (1, {}),
        "item (t.py:7)": (10, {"step (t.py:3)": (10, {})}),
    }


def test_an_absent_frame_gives_zero_samples_and_bare_trees():
    result = sandwich(tree_of(RECURSIVE), "nowhere (x.py:1)")
    assert result["samples"] == result["self_samples"] == result["occurrences"] == 0
    assert result["percent"] == 0.0
    assert result["callers"] == {"name": "nowhere (x.py:1)", "value": 0, "children": []}
    assert result["callees"] == {"name": "nowhere (x.py:1)", "value": 0, "children": []}


def test_a_pruned_tree_is_flagged_approximate_with_the_mass_it_may_hide():
    lines = [f"main (m.py:1);f{i} (m.py:{i});hot (h.py:1) {i + 1}" for i in range(20)]
    full = tree_of(lines)
    pruned = prune_flamegraph(full, 12)
    exact, rough = sandwich(full, "hot (h.py:1)"), sandwich(pruned, "hot (h.py:1)")
    assert exact["samples"] == sum(range(1, 21))
    assert exact["approximate"] is False and exact["hidden_samples"] == 0
    assert rough["approximate"] is True
    assert rough["samples"] < exact["samples"]
    assert rough["samples"] + rough["hidden_samples"] >= exact["samples"]


def test_self_samples_lost_under_pruned_nodes_inside_an_occurrence_are_bounded():
    # `walk` recursing: its self samples are inner `walk` leaves under many callees.
    lines = [f"walk (t.py:5);step{i} (t.py:{i});walk (t.py:5) {i + 1}" for i in range(30)]
    full = tree_of(lines)
    exact, rough = (
        sandwich(full, "walk (t.py:5)"),
        sandwich(prune_flamegraph(full, 10), "walk (t.py:5)"),
    )
    assert exact["self_samples"] == sum(range(1, 31)) and exact["hidden_self_samples"] == 0
    assert rough["samples"] == exact["samples"] and rough["hidden_samples"] == 0
    assert rough["self_samples"] < exact["self_samples"]  # lost under pruned nodes
    assert rough["self_samples"] + rough["hidden_self_samples"] >= exact["self_samples"]


def test_pruned_mass_under_the_frame_stays_visible_in_its_callees():
    lines = [f"main (m.py:1);kid{i} (k.py:{i}) {i + 1}" for i in range(30)]
    result = sandwich(prune_flamegraph(tree_of(lines), 8), "main (m.py:1)")
    assert result["samples"] == sum(range(1, 31))
    assert result["approximate"] is False  # nothing outside `main` was pruned
    assert result["hidden_self_samples"] > 0  # but a pruned kid could end in `main` again
    last = result["callees"]["children"][-1]
    assert last["name"].startswith("[pruned: ") and last["pruned_frames"] > 0
    assert sum(c["value"] for c in result["callees"]["children"]) == result["samples"]


def test_the_same_stacks_in_any_order_give_the_same_sandwich():
    lines = list(RECURSIVE)
    first = sandwich(tree_of(lines), "walk (t.py:5)")
    random.Random(4).shuffle(lines)
    assert sandwich(tree_of(lines), "walk (t.py:5)") == first


def test_a_recursive_frame_of_a_real_native_capture_matches_its_golden_sandwich():
    profile_lines = (DATA / "native.txt").read_text(encoding="utf-8").splitlines()
    tree = tree_of(profile_lines)
    frame = frames_like(tree, "hash_block", 1)[0][0]  # recursive in this capture
    check_golden("sandwich_native", json.loads(json.dumps(sandwich(tree, frame))))


def test_frames_like_lists_matching_frames_heaviest_first_once_per_sample():
    found = frames_like(tree_of(RECURSIVE), "T.PY")
    assert found[0] == ("walk (t.py:5)", 10)
    assert ("other (t.py:2)", 9) in found
    assert all(not name.startswith("thread (") for name, _ in found)


FRAMES = st.sampled_from(["a (x.py:1)", "b (x.py:2)", "c (libc.so.6)", "d (x.py:3)"])


@settings(max_examples=60, deadline=None)
@given(
    stacks=st.lists(
        st.tuples(st.lists(FRAMES, min_size=1, max_size=6), st.integers(1, 9)), min_size=1
    ),
    frame=FRAMES,
)
def test_counts_equal_a_naive_count_over_samples(stacks, frame):
    lines = [";".join(path) + f" {count}" for path, count in stacks]
    result = sandwich(tree_of(lines), frame)
    assert result["samples"] == sum(n for path, n in stacks if frame in path)
    assert result["self_samples"] == sum(n for path, n in stacks if path[-1] == frame)
    callers_below = sum(c["value"] for c in result["callers"]["children"])
    assert callers_below == sum(n for path, n in stacks if frame in path and path[0] != frame)
    assert sum(c["value"] for c in result["callees"]["children"]) == (
        result["samples"]
        - sum(n for path, n in stacks if frame in path and path.index(frame) == len(path) - 1)
    )
