"""Per-thread tables: combining any thread subset gives exactly analyze(threads=...)."""

import json
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiles.pyspy import AnalysisOptions, Keyword, analyze, parse_raw_lines, read_profile
from profiles.pyspy.count.thread_tables import combine_threads, thread_names, thread_tables
from tests.profiles.pyspy.golden import DATA
from tests.profiles.pyspy.test_properties import stacks_of

KEYWORDS = (
    Keyword("cu", "gpu"),
    Keyword("Sync", "gpu"),
    Keyword("x", "other"),
    Keyword("=b", "py"),
    Keyword("re:^cuda under python", "ctx"),
)
THREADED = [
    "threads.txt",
    "native.txt",
    "idle.txt",
    "subprocesses.txt",
    "multiline_cmdline.txt",
    "speedscope.json",
    "corpus_deepdrr_speedscope.json",
    "attribution.txt",
    "torch_native_idle.txt",
    "torch_speedscope.json",
]


def expected(profile, threads, keywords):
    options = AnalysisOptions(keywords=keywords, threads=frozenset(threads))
    stats = dict(analyze(profile, options))
    stats.pop("flamegraph")
    return stats


def through_json(tables):
    """What a stored table looks like when read back."""
    return json.loads(json.dumps(tables))


def subsets(names):
    """Every single thread, every pair, and all of them."""
    yield from ([n] for n in names)
    yield from (list(pair) for pair in combinations(names, 2))
    yield list(names)


@pytest.mark.parametrize("case", THREADED)
def test_any_thread_subset_of_a_real_capture_equals_a_fresh_analysis(case):
    profile = read_profile(DATA / case)
    tables = through_json(thread_tables(profile))
    names = [t["name"] or str(t["tid"]) for t in thread_names(tables)][:8]
    assert names, f"{case} has no threads"
    for chosen in subsets(names):
        assert combine_threads(tables, chosen) == expected(
            profile, chosen, AnalysisOptions().keywords
        )


def test_threads_are_also_found_by_tid_and_unknown_ones_give_an_empty_view():
    profile = read_profile(DATA / "threads.txt")
    tables = through_json(thread_tables(profile))
    first = tables["threads"][0]
    by_tid = combine_threads(tables, [str(first["tid"])])
    assert by_tid == expected(profile, [str(first["tid"])], AnalysisOptions().keywords)
    assert by_tid["total_samples"] == first["samples"] > 0
    empty = combine_threads(tables, ["no-such-thread"])
    assert empty["total_samples"] == 0 and empty["top_self"] == [] and empty["threads"] == []


def test_a_capture_without_thread_frames_has_no_tables_to_filter():
    profile = parse_raw_lines(["main (a.py:1);work (a.py:2) 5"])
    tables = thread_tables(profile)
    assert tables["threads"] == [] and tables["frames"] == []


def test_tables_name_each_frame_once_and_store_counts_as_pairs():
    profile = parse_raw_lines(
        [
            "thread (1): a;main (m.py:1);cuSync (libcuda.so) 3",
            "thread (2): b;main (m.py:1);cuSync (libcuda.so) 4",
            "thread (2): b;main (m.py:1);main (m.py:1) 2",
        ]
    )
    tables = thread_tables(profile, KEYWORDS)
    assert sorted(tables["frames"]) == ["cuSync (libcuda.so)", "main (m.py:1)"]
    b = next(t for t in tables["threads"] if t["name"] == "b")
    main = tables["frames"].index("main (m.py:1)")
    total = dict(zip(b["total"][::2], b["total"][1::2], strict=True))
    assert total[main] == 6  # the recursive stack counts once
    assert b["samples"] == 6 and b["keywords"] == [4, 4, 0, 0, 0]
    assert b["categories"] == [4, 0, 0, 0]
    # The samples of both gpu keywords come from main: [frame index, samples].
    assert b["keyword_callers"][:2] == [[main, 4], [main, 4]] and b["category_callers"][0] == [
        main,
        4,
    ]


def test_a_thread_subsets_states_carry_the_framework_frames_of_a_fresh_analysis():
    # A real gloo rank: its backward runs under Tensor.backward (framework_rules.py's
    # torch rows), called from the user's train_step.
    profile = read_profile(DATA / "states_gloo_rank0_idle.txt")
    tables = through_json(thread_tables(profile))
    stats = combine_threads(tables, ["MainThread"])
    rows = {s["state"]: s.get("framework_callers") for s in stats["states"]}
    assert rows["compute"], rows
    found = rows["compute"][0]
    assert (found["function"], found["phase"], found["user_inside"]) == (
        "Tensor.backward",
        "backward",
        False,
    )
    assert found["user_frame"].startswith("train_step (states_target.py:"), found
    thread = stats["threads"][0]
    assert any(s.get("framework_callers") for s in thread["states"])
    assert stats == expected(profile, ["MainThread"], AnalysisOptions().keywords)


def test_tables_stored_before_framework_frames_combine_without_them():
    profile = read_profile(DATA / "states_gloo_rank0_idle.txt")
    tables = through_json(thread_tables(profile))
    del tables["framework_frames"]
    for table in tables["threads"]:
        del table["state_frameworks"]
    stats = combine_threads(tables, ["MainThread"])
    assert not any("framework_callers" in s for s in stats["states"])
    assert sum(s["samples"] for s in stats["states"]) == stats["total_samples"] > 0


def test_tables_stored_before_callers_existed_still_combine_with_empty_callers():
    profile = parse_raw_lines(["thread (1): a;main (m.py:1);cuSync (libcuda.so) 3"])
    tables = through_json(thread_tables(profile, KEYWORDS))
    for table in tables["threads"]:
        del table["keyword_callers"], table["category_callers"]
    stats = combine_threads(tables, ["a"])
    gpu = next(r for r in stats["categories"] if r["category"] == "gpu")
    assert gpu["samples"] == 3 and gpu["python_callers"] == []


FRAMES = [
    "a",
    "b (x.py:1)",
    "c (y.py)",
    "lock (libpython3.11.so)",
    "cuSync (libcuda.so)",
    "cudaSync (libcudart.so)",
    "x",
    "thread (7): w",
    "thread (0x1A): hex",
    "thread (9)",
]
stacks = stacks_of(FRAMES)


@settings(max_examples=300, deadline=None)
@given(stacks, st.sets(st.sampled_from(["w", "7", "0x1a", "hex", "9", "nobody"]), max_size=3))
def test_combined_tables_equal_a_fresh_analysis_on_arbitrary_stacks(records, chosen):
    # Thread frames come first, as py-spy writes them; only the outermost one counts.
    lines = []
    for stack, count in records:
        head = [f for f in stack if f.startswith("thread (")][:1]
        rest = [f for f in stack if not f.startswith("thread (")]
        lines.append(";".join(head + rest) + f" {count}")
    profile = parse_raw_lines(lines)
    tables = through_json(thread_tables(profile, KEYWORDS))
    assert combine_threads(tables, chosen) == expected(profile, chosen, KEYWORDS)


def test_tables_stored_before_states_count_every_sample_as_unknown():
    profile = read_profile(DATA / "threads.txt")
    tables = through_json(thread_tables(profile))
    for table in tables["threads"]:
        for key in ("states", "state_callers", "keyword_user_callers", "category_user_callers"):
            del table[key]
    del tables["rounds"], tables["idle_included"]
    stats = combine_threads(tables, [tables["threads"][0]["name"]])
    unknown = next(s for s in stats["states"] if s["state"] == "unknown")
    assert unknown["samples"] == stats["total_samples"] > 0
    assert stats["rounds"] is None and stats["idle_included"] is None
    assert all(k["user_callers"] == [] for k in stats["keywords"])
