"""Once-per-sample counting on stacks built to catch double counting (hand-checked)."""

import random

from profiles.pyspy import AnalysisOptions, Keyword, analyze, parse_raw_lines, read_profile
from tests.profiles.pyspy.golden import DATA

KEYWORDS = (
    Keyword("cuLaunchKernel", "launch"),
    Keyword("cudaStreamSynchronize", "sync"),
    Keyword("cuStreamSynchronize", "sync"),
    Keyword("malloc", "alloc"),
    Keyword("free", "alloc"),
    Keyword("forward (", "model"),
)
STACKS = [
    "main (m.py:1);f (a.py:1);f (a.py:1);f (a.py:1);cudaMalloc_wrapper (libx.so) 10",
    "main (m.py:1);g (a.py:2);cuLaunchKernel (libcuda.so.1);cuLaunchKernel_inner (libcuda.so.1) 5",
    "main (m.py:1);h (a.py:3);cudaStreamSynchronize (libcudart.so);"
    "cuStreamSynchronize (libcuda.so.1) 4",
    "main (m.py:1);free_list (a.py:4);malloc_impl (libc.so.6) 3",
    "main (m.py:1);Net.forward (n.py:9);Block.forward (n.py:20);Block.forward (n.py:20) 7",
    "main (m.py:1) 1",
]
TOTAL = 30


def _stats(lines=STACKS, **options):
    return analyze(parse_raw_lines(lines), AnalysisOptions(keywords=KEYWORDS, **options))


def _by(rows, key):
    return {row[key]: row["samples"] for row in rows}


def test_it_sums_the_counts_into_total_samples():
    stats = _stats()
    assert stats["total_samples"] == TOTAL
    assert stats["unique_stacks"] == 6


def test_it_counts_a_recursive_frame_once_per_sample():
    totals = _by(_stats()["top_total"], "frame")
    assert totals["f (a.py:1)"] == 10
    assert totals["Block.forward (n.py:20)"] == 7
    assert totals["main (m.py:1)"] == TOTAL


def test_it_counts_a_sample_once_per_keyword_when_several_frames_match():
    keywords = _by(_stats()["keywords"], "keyword")
    assert keywords["cuLaunchKernel"] == 5
    assert keywords["forward ("] == 7


def test_it_counts_a_sample_once_per_category_when_two_keywords_of_it_match():
    keywords = _by(_stats()["keywords"], "keyword")
    categories = _by(_stats()["categories"], "category")
    assert keywords["cudaStreamSynchronize"] == 4
    assert keywords["cuStreamSynchronize"] == 4
    assert categories["sync"] == 4
    assert keywords["free"] == 3 and keywords["malloc"] == 3
    assert categories["alloc"] == 3


def test_it_matches_keywords_case_sensitively():
    # cudaMalloc_wrapper holds "Malloc", not "malloc".
    assert _by(_stats()["keywords"], "keyword")["malloc"] == 3


def test_no_percentage_exceeds_100():
    stats = _stats()
    for key in ("top_self", "top_total", "keywords", "categories", "uncovered_native"):
        assert all(0 <= row["percent"] <= 100 for row in stats[key]), key
    assert _by(_stats()["top_total"], "frame")["main (m.py:1)"] == TOTAL


def test_it_lists_native_leaves_no_keyword_covers():
    native = _by(_stats()["uncovered_native"], "frame")
    assert native == {"cudaMalloc_wrapper (libx.so)": 10}


def test_it_counts_self_samples_at_the_leaf_only():
    own = _by(_stats()["top_self"], "frame")
    assert own["cudaMalloc_wrapper (libx.so)"] == 10
    assert own["main (m.py:1)"] == 1
    assert "f (a.py:1)" not in own


def test_it_merges_duplicate_stack_lines():
    stats = _stats(["a;b 2", "a;b 3", "a 1"])
    assert stats["unique_stacks"] == 2
    assert _by(stats["top_self"], "frame") == {"b": 5, "a": 1}


def test_it_gives_the_same_result_for_shuffled_lines():
    lines = (DATA / "native.txt").read_text().splitlines()
    expected = analyze(parse_raw_lines(lines), AnalysisOptions(max_nodes=40))
    for seed in range(5):
        random.Random(seed).shuffle(lines)
        assert analyze(parse_raw_lines(lines), AnalysisOptions(max_nodes=40)) == expected


def test_it_filters_every_statistic_by_thread_name_or_tid():
    profile = read_profile(DATA / "threads.txt")
    everything = analyze(profile)
    wanted = {t["name"]: t for t in everything["threads"] if t["name"] in ("target-0", "target-1")}
    by_name = analyze(profile, AnalysisOptions(threads=frozenset(wanted)))
    by_tid = analyze(
        profile, AnalysisOptions(threads=frozenset(str(t["tid"]) for t in wanted.values()))
    )
    assert by_name == by_tid
    assert by_name["total_samples"] == sum(t["samples"] for t in wanted.values())
    assert {t["name"] for t in by_name["threads"]} == set(wanted)
    assert by_name["flamegraph"]["value"] == by_name["total_samples"]
    assert all(t["percent"] <= 100 for t in by_name["threads"])


def test_it_leaves_thread_and_process_frames_out_of_frame_lists_and_keywords():
    stats = _stats(['process 1:"python queue.py";thread (7): target-0;work (w.py:1) 2'])
    assert [r["frame"] for r in stats["top_total"]] == ["work (w.py:1)"]
    thread = stats["threads"][0]
    assert len(stats["threads"]) == 1
    assert {k: thread[k] for k in ("name", "tid", "pid", "samples", "percent")} == {
        "name": "target-0",
        "tid": 7,
        "pid": 1,
        "samples": 2,
        "percent": 100.0,
    }
    kw = analyze(parse_raw_lines(['process 1:"python queue.py";x 2']))
    assert _by(kw["keywords"], "keyword")["queue"] == 0
