"""Per-thread user functions: each sample once per function whatever line ran, library
frames left out, the threads that matter first, bounded."""

from profiles.pyspy import AnalysisOptions, analyze, parse_profile_text
from profiles.pyspy.count.functions import MAX_THREADS, TOP_FUNCTIONS, function_name


def functions_of(text: str, **options) -> list[dict]:
    stats = analyze(parse_profile_text(text), AnalysisOptions(include_flamegraph=False, **options))
    return stats["thread_functions"]


C10D = "all_reduce (torch/distributed/distributed_c10d.py:3252);c10d::Work::wait (libtorch_cpu.so)"
RAW = f"""\
thread (1): trainer;Job.train (train.py:160);metric (train.py:79);<genexpr> (train.py:79) 3
thread (1): trainer;Job.train (train.py:160);metric (train.py:80);<genexpr> (train.py:80) 5
thread (1): trainer;Job.train (train.py:161);{C10D} 4
thread (2): loader;load (train.py:70);Queue.put (queue.py:149);Condition.wait (threading.py:331) 6
"""


def test_a_function_counts_every_sample_it_is_on_whatever_line_ran():
    trainer = next(t for t in functions_of(RAW) if t["thread"] == "trainer")
    rows = {f["function"]: f["samples"] for f in trainer["functions"]}
    assert rows == {"Job.train (train.py)": 12, "metric (train.py)": 8, "<genexpr> (train.py)": 8}
    assert trainer["samples"] == 12


def test_each_function_links_to_its_line_seen_in_most_samples():
    trainer = next(t for t in functions_of(RAW) if t["thread"] == "trainer")
    frames = {f["function"]: f["frame"] for f in trainer["functions"]}
    assert frames["metric (train.py)"] == "metric (train.py:80)"
    assert frames["Job.train (train.py)"] == "Job.train (train.py:160)"


def test_recursion_and_two_lines_of_one_function_on_a_stack_count_once():
    raw = "thread (1): t;walk (tree.py:3);walk (tree.py:5);walk (tree.py:3);leaf (tree.py:9) 7\n"
    (row,) = functions_of(raw)
    assert {f["function"]: f["samples"] for f in row["functions"]} == {
        "walk (tree.py)": 7,
        "leaf (tree.py)": 7,
    }


def test_library_frames_are_not_functions_and_the_runs_library_paths_count_as_library():
    raw = "thread (1): t;main (train.py:1);step (vendor/lib.py:20);forward (torch/nn/x.py:3) 4\n"
    (row,) = functions_of(raw)
    assert [f["function"] for f in row["functions"]] == ["main (train.py)", "step (vendor/lib.py)"]
    (row,) = functions_of(raw, library=("vendor",))
    assert [f["function"] for f in row["functions"]] == ["main (train.py)"]


def test_threads_in_collectives_come_first_then_the_busiest():
    names = [t["thread"] for t in functions_of(RAW)]
    assert names == ["trainer", "loader"]


def test_it_keeps_at_most_the_top_functions_of_the_top_threads():
    lines = [
        f"thread ({t}): w{t};f{i} (app.py:{i}) {i + 1}"
        for t in range(MAX_THREADS + 4)
        for i in range(TOP_FUNCTIONS + 5)
    ]
    rows = functions_of("\n".join(lines) + "\n")
    assert len(rows) == MAX_THREADS
    assert all(len(r["functions"]) == TOP_FUNCTIONS for r in rows)
    assert rows[0]["functions"][0] == {
        "function": f"f{TOP_FUNCTIONS + 4} (app.py)",
        "frame": f"f{TOP_FUNCTIONS + 4} (app.py:{TOP_FUNCTIONS + 4})",
        "samples": TOP_FUNCTIONS + 5,
    }


def test_a_function_name_drops_only_a_trailing_line_number():
    assert function_name("metric (train.py:80)") == "metric (train.py)"
    assert function_name("metric (train.py)") == "metric (train.py)"
    assert function_name("0x7f00 (libc.so.6)") == "0x7f00 (libc.so.6)"
    assert function_name("run (C:\\jobs\\train.py:12)") == "run (C:\\jobs\\train.py)"


def test_a_thread_filter_counts_only_the_chosen_threads():
    rows = functions_of(RAW, threads=frozenset({"loader"}))
    assert [r["thread"] for r in rows] == ["loader"]
