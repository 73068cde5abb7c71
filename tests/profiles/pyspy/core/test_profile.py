"""The sample trie (core/profile.py): counts per stack, shared prefixes, the order of its
nodes, inclusive totals with recursion counted once, and the merge of frames whose full
names shorten alike."""

import random
from collections import Counter
from pathlib import Path

from profiles.pyspy.core.profile import ProfileBuilder, accumulate
from profiles.pyspy.formats.raw import parse_raw_lines

DATA = Path(__file__).resolve().parents[3] / "data" / "pyspy"

MAIN = "main (train.py:1)"
STEP = "step (train.py:5)"
LOAD = "load (data.py:9)"
SORT = "sort (util.py:3)"


def build(stacks):
    builder = ProfileBuilder()
    for stack, count in stacks:
        builder.add(stack, count)
    return builder.build("raw")


def stack_of(profile, node):
    """The frames from the root down to `node`."""
    frames = []
    while node > 0:
        frames.append(profile.frames[profile.frame[node]])
        node = profile.parent[node]
    return tuple(reversed(frames))


def leaf_counts(profile):
    """Each stack with samples of its own, and how many."""
    return {
        stack_of(profile, node): count
        for node, count in enumerate(profile.self_count)
        if node and count
    }


def check_invariants(profile):
    """Parents before children, depths one below the parent, no two siblings alike."""
    n = profile.node_count
    assert len(profile.frame) == len(profile.depth) == len(profile.self_count) == n
    assert len(profile.first_on_path) == n
    assert profile.parent[0] == -1 and profile.depth[0] == 0
    for node in range(1, n):
        assert 0 <= profile.parent[node] < node
        assert profile.depth[node] == profile.depth[profile.parent[node]] + 1
    for node in range(n):
        kids = profile.kids(node)
        assert all(profile.parent[k] == node for k in kids)
        assert len({profile.frame[k] for k in kids}) == len(kids)
    assert sum(len(profile.kids(node)) for node in range(n)) == n - 1


def test_a_stack_added_twice_is_one_leaf_with_the_counts_summed():
    profile = build([((MAIN, STEP), 3), ((MAIN, STEP), 4)])
    assert profile.node_count == 3
    assert leaf_counts(profile) == {(MAIN, STEP): 7}
    assert profile.frames == [MAIN, STEP]


def test_stacks_share_their_common_prefix_and_keep_their_own_counts():
    profile = build([((MAIN, STEP, SORT), 2), ((MAIN, LOAD), 5), ((MAIN, STEP), 1)])
    check_invariants(profile)
    assert profile.node_count == 5  # root, main, step, sort, load
    assert leaf_counts(profile) == {(MAIN, STEP, SORT): 2, (MAIN, LOAD): 5, (MAIN, STEP): 1}
    main = profile.kids(0)
    assert [stack_of(profile, n) for n in main] == [(MAIN,)]
    assert sorted(stack_of(profile, n) for n in profile.kids(main[0])) == [
        (MAIN, LOAD),
        (MAIN, STEP),
    ]


def test_add_returns_the_leaf_node_of_the_stack():
    builder = ProfileBuilder()
    first = builder.add((MAIN, STEP), 1)
    other = builder.add((MAIN, LOAD), 1)
    again = builder.add((MAIN, STEP), 1)
    profile = builder.build("raw")
    assert first == again != other
    assert stack_of(profile, first) == (MAIN, STEP)
    assert stack_of(profile, other) == (MAIN, LOAD)
    assert profile.self_count[first] == 2


def test_totals_are_inclusive_and_subtree_sizes_count_the_node_itself():
    profile = build([((MAIN, STEP, SORT), 2), ((MAIN, LOAD), 5), ((MAIN, STEP), 1)])
    totals = profile.accumulated()
    by_stack = {stack_of(profile, n): (totals.total[n], totals.size[n]) for n in range(1, 5)}
    assert by_stack == {
        (MAIN,): (8, 4),
        (MAIN, STEP): (3, 2),
        (MAIN, STEP, SORT): (2, 1),
        (MAIN, LOAD): (5, 1),
    }
    assert totals.total[0] == 8 and totals.size[0] == 5
    assert profile.accumulated() is totals  # computed once


def test_a_recursive_frame_counts_once_per_sample_in_its_frame_total():
    profile = build([((MAIN, STEP, STEP, STEP), 4), ((MAIN, STEP, LOAD), 1)])
    firsts = [
        stack_of(profile, n) for n in range(1, profile.node_count) if profile.first_on_path[n]
    ]
    assert firsts == [(MAIN,), (MAIN, STEP), (MAIN, STEP, LOAD)]
    frame_total = dict(zip(profile.frames, profile.accumulated().frame_total, strict=True))
    assert frame_total == {MAIN: 5, STEP: 5, LOAD: 1}


def test_accumulate_takes_any_own_values_over_the_same_tree():
    profile = build([((MAIN, STEP), 1), ((MAIN, LOAD), 1)])
    own = [0] * profile.node_count
    own[profile.kids(0)[0]] = 10  # main's own value only
    assert accumulate(profile, own).total[0] == 10
    assert accumulate(profile, own).frame_total == [10, 0, 0]


def test_full_paths_that_shorten_alike_merge_into_one_frame_and_one_stack():
    full = "Condition.wait (/usr/lib/python3.11/threading.py:320)"
    other = "Condition.wait (/opt/python/lib/python3.11/threading.py:320)"
    profile = build([((MAIN, full), 2), ((MAIN, other), 3)])
    short = "Condition.wait (threading.py:320)"
    assert profile.frames == [MAIN, short]
    assert leaf_counts(profile) == {(MAIN, short): 5}
    assert profile.renamed == {full: short, other: short}
    check_invariants(profile)


def test_installed_packages_are_read_from_the_full_paths_before_shortening():
    torch_frame = "Module.forward (/venv/lib/python3.11/site-packages/torch/nn/module.py:5)"
    profile = build([((MAIN, torch_frame), 1)])
    assert profile.installed == frozenset({"torch"})
    assert profile.frames == [MAIN, "Module.forward (torch/nn/module.py:5)"]


def test_frame_info_marks_threads_native_and_python_frames():
    thread = "thread (0x7F1): MainThread"
    native = "cudaStreamSynchronize (libcudart.so.12)"
    profile = build([((thread, MAIN, native), 1)])
    info = profile.frame_info()
    ids = {name: i for i, name in enumerate(profile.frames)}
    assert [info.synthetic[ids[f]] for f in (thread, MAIN, native)] == [1, 0, 0]
    assert [info.native[ids[f]] for f in (thread, MAIN, native)] == [0, 0, 1]
    assert [info.python[ids[f]] for f in (thread, MAIN, native)] == [0, 1, 0]
    assert info.thread == {ids[thread]: ("0x7F1", "MainThread", None)}


def test_a_real_capture_keeps_every_line_and_the_same_lines_shuffled_give_the_same_stacks():
    lines = (DATA / "threads.txt").read_text().splitlines()
    expected = Counter()
    for line in lines:
        stack, _, count = line.rpartition(" ")
        expected[tuple(stack.split(";"))] += int(count)
    profile = parse_raw_lines(lines)
    check_invariants(profile)
    assert leaf_counts(profile) == dict(expected)
    assert profile.accumulated().total[0] == sum(expected.values())
    shuffled = lines[:]
    random.Random(7).shuffle(shuffled)
    assert leaf_counts(parse_raw_lines(shuffled)) == dict(expected)
