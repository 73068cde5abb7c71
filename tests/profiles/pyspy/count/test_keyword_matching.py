"""python_callers: the nearest Python frame above a keyword's outermost match."""

from profiles.pyspy import AnalysisOptions, Keyword, analyze, parse_raw_lines

SYNC = (Keyword("cuStreamSynchronize", "sync"), Keyword("cudaMemcpy", "copy"))


def _callers(lines, keywords=SYNC, row="categories", name="sync"):
    stats = analyze(parse_raw_lines(lines), AnalysisOptions(keywords=keywords))
    key = "category" if row == "categories" else "keyword"
    entry = next(r for r in stats[row] if r[key] == name)
    return [(c["frame"], c["samples"], c["percent"]) for c in entry["python_callers"]]


def test_it_attributes_a_native_match_to_the_python_line_that_called_it():
    lines = [
        "train (t.py:50);train_step (t.py:45);THPVariable_item (libtorch_python.so);"
        "cudaMemcpyAsync (libcudart.so);cuStreamSynchronize (libcuda.so) 3",
        "train (t.py:50);other (t.py:60);cuStreamSynchronize (libcuda.so) 1",
    ]
    assert _callers(lines) == [("train_step (t.py:45)", 3, 75.0), ("other (t.py:60)", 1, 25.0)]


def test_a_python_frame_that_matches_is_attributed_to_its_caller():
    lines = ["consume (t.py:30);Queue.get (queue.py:171);wait (threading.py:320) 4"]
    keywords = (Keyword("queue", "python queue"),)
    assert _callers(lines, keywords, name="python queue") == [("consume (t.py:30)", 4, 100.0)]


def test_it_uses_the_outermost_match_and_counts_a_recursive_stack_once():
    lines = [
        "main (m.py:1);outer (m.py:2);cuStreamSynchronize (libcuda.so);"
        "inner (m.py:3);cuStreamSynchronize (libcuda.so) 2",
        "main (m.py:1);f (m.py:5);f (m.py:5);cuStreamSynchronize (libcuda.so) 1",
    ]
    assert _callers(lines) == [("outer (m.py:2)", 2, 66.67), ("f (m.py:5)", 1, 33.33)]


def test_a_match_with_no_python_frame_above_it_counts_under_no_python_frame():
    lines = [
        "thread (1): pool;0x7f01 (libc.so.6);cuStreamSynchronize (libcuda.so) 2",
        "cuStreamSynchronize (libcuda.so);work (w.py:3) 1",
        "main (m.py:1);cuStreamSynchronize (libcuda.so) 1",
    ]
    assert _callers(lines) == [("(no Python frame)", 3, 75.0), ("main (m.py:1)", 1, 25.0)]


def test_it_treats_nolineno_frozen_and_suffixless_scripts_as_python_frames():
    lines = [
        "main (run.py);cuStreamSynchronize (libcuda.so) 1",
        "<module> (<frozen runpy>:88);cuStreamSynchronize (libcuda.so) 1",
        "<module> (flameshow:6);cuStreamSynchronize (libcuda.so) 1",
        "zlib_compress (zlibmodule.c:374);cuStreamSynchronize (libcuda.so) 1",
    ]
    assert [c[0] for c in _callers(lines)] == [
        "(no Python frame)",
        "<module> (<frozen runpy>:88)",
        "<module> (flameshow:6)",
        "main (run.py)",
    ]


def test_each_keyword_of_one_stack_has_its_own_outermost_match_and_caller():
    lines = [
        "step (t.py:9);copy_in (t.py:10);cudaMemcpy (libcudart.so);"
        "helper (t.py:11);cuStreamSynchronize (libcuda.so) 5"
    ]
    assert _callers(lines, row="keywords", name="cudaMemcpy") == [("copy_in (t.py:10)", 5, 100.0)]
    assert _callers(lines, row="keywords", name="cuStreamSynchronize") == [
        ("helper (t.py:11)", 5, 100.0)
    ]


def test_it_keeps_the_top_ten_callers_by_samples_then_by_frame():
    lines = [
        f"c{i:02d} (t.py:{i});cuStreamSynchronize (libcuda.so) {1 + i // 3}" for i in range(12)
    ]
    callers = _callers(lines)
    assert len(callers) == 10
    assert [c[1] for c in callers] == sorted((c[1] for c in callers), reverse=True)
    # Three callers tie at 1 sample for the last place: the first by name wins.
    assert callers[-4:] == [
        ("c03 (t.py:3)", 2, 6.67),
        ("c04 (t.py:4)", 2, 6.67),
        ("c05 (t.py:5)", 2, 6.67),
        ("c00 (t.py:0)", 1, 3.33),
    ]


def test_callers_sum_to_the_samples_of_their_keyword_and_unmatched_rows_have_none():
    lines = [f"f{i} (a.py:{i});cuStreamSynchronize (libcuda.so) {i}" for i in range(1, 6)]
    lines.append("idle (a.py:9) 7")
    stats = analyze(parse_raw_lines(lines), AnalysisOptions(keywords=SYNC))
    for row in stats["keywords"] + stats["categories"]:
        assert sum(c["samples"] for c in row["python_callers"]) == row["samples"]
    copy = next(r for r in stats["categories"] if r["category"] == "copy")
    assert copy["samples"] == 0 and copy["python_callers"] == []
