"""Waiting vs computing from a flamegraph tree: once per sample, synthetic frames
left out, pruned mass unknown rather than computing."""

import pytest

from profiles import pyspy
from profiles.pyspy.keywords import GPU_KEYWORDS
from profiles.pyspy.waiting import wait_split

PAIRS = [(k.keyword, k.category) for k in GPU_KEYWORDS]
RAW = [
    "thread (1): MainThread;step (t.py:1);forward (t.py:2);cuLaunchKernel (libcuda.so.1) 30",
    "thread (1): MainThread;step (t.py:1);allreduce (d.py:9);ncclAllReduce (libnccl.so);"
    "pthread_cond_wait (libc.so.6) 50",
    "thread (1): MainThread;step (t.py:1);sync (t.py:3);cuStreamSynchronize (libcuda.so.1) 15",
    "thread (1): MainThread;step (t.py:1) 5",
]


def _tree(lines, max_nodes=8192):
    profile = pyspy.parse_raw_lines(lines)
    return pyspy.analyze(profile, pyspy.AnalysisOptions(max_nodes=max_nodes))["flamegraph"]


def test_a_sample_matching_several_wait_keywords_counts_once():
    split = wait_split(_tree(RAW), PAIRS)
    assert split == {"total": 100, "waiting": 65, "computing": 35, "unknown": 0}


def test_a_thread_named_like_a_keyword_does_not_make_its_samples_wait():
    lines = ["thread (7): futex-worker;step (t.py:1) 10"]
    assert wait_split(_tree(lines), PAIRS)["waiting"] == 0


def test_samples_under_pruned_nodes_are_unknown_not_computing():
    split = wait_split(_tree(RAW, max_nodes=3), PAIRS)
    assert split["unknown"] > 0
    assert split["waiting"] + split["computing"] + split["unknown"] == split["total"] == 100


def test_without_wait_keywords_everything_computes():
    assert wait_split(_tree(RAW), [("cuLaunchKernel", "launch")])["computing"] == 100


@pytest.mark.parametrize("name", ["torch_native_gil.txt", "torch_native_idle.txt"])
def test_it_agrees_with_the_engine_on_real_captures_with_pattern_keywords(name):
    """The default set uses `=name`, `re:` and `under` forms: a sample waits exactly
    when the engine would count it in a wait category (merged into one here)."""
    from pathlib import Path

    from profiles import pyspy
    from profiles.pyspy.waiting import WAIT_CATEGORIES

    profile = pyspy.read_profile(Path(__file__).parents[2] / "data" / "pyspy" / name)
    merged = tuple(
        pyspy.Keyword(k.keyword, "waiting" if k.category in WAIT_CATEGORIES else k.category)
        for k in pyspy.GPU_KEYWORDS
    )
    stats = pyspy.analyze(profile, pyspy.AnalysisOptions(keywords=merged, max_nodes=10**6))
    expected = next(c["samples"] for c in stats["categories"] if c["category"] == "waiting")
    tree = pyspy.analyze(profile, pyspy.AnalysisOptions(max_nodes=10**6))["flamegraph"]
    pairs = [(k.keyword, k.category) for k in pyspy.GPU_KEYWORDS]
    split = wait_split(tree, pairs)
    assert expected > 0 and split["unknown"] == 0
    assert split["waiting"] == expected
