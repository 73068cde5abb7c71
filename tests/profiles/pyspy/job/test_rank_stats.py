"""One rank's stored stats made whole (job/rank_stats.py): well-formed stats come back as
they are; missing, null or mistyped keys get their documented empty value, and nothing
else is invented."""

import math
from pathlib import Path

import pytest

from profiles.pyspy import AnalysisOptions, analyze, read_profile
from profiles.pyspy.job.rank_stats import FRAME_LISTS, well_formed

PYSPY = Path(__file__).resolve().parents[3] / "data" / "pyspy"


def state(name, samples, **extra):
    return {"state": name, "samples": samples, "percent": 0.0, "user_callers": [], **extra}


def test_the_stats_the_engine_writes_come_back_unchanged():
    stats = analyze(
        read_profile(PYSPY / "states_gloo_rank0_idle.txt"),
        AnalysisOptions(include_flamegraph=False),
        log_text=(PYSPY / "states_gloo_rank0_idle.txt.log").read_text(),
    )
    assert stats["lag"] is not None and stats["threads"]
    assert well_formed(stats) == stats


def test_anything_but_a_mapping_reads_as_an_empty_rank():
    empty = {
        "total_samples": 0,
        "threads": [],
        "states": [],
        "idle_included": None,
        "rounds": None,
        "thread_functions": [],
        "lag": None,
        **{key: [] for key in FRAME_LISTS},
    }
    for stats in (None, [], "stats", 3):
        assert well_formed(stats) == empty


def test_the_total_is_the_threads_samples_when_missing_and_a_thread_has_its_states_sum():
    stats = {"threads": [{"name": "main", "states": [state("compute", 30), state("idle", 10)]}]}
    fixed = well_formed(stats)
    (main,) = fixed["threads"]
    assert main["samples"] == 40 and fixed["total_samples"] == 40
    assert main["tid"] == "" and main["pid"] is None
    assert main["percent"] == 0.0 and main["active_percent"] is None


def test_a_thread_keeps_a_sample_count_larger_than_its_states():
    thread = {"name": "t", "samples": 50, "states": [state("compute", 20)]}
    fixed = well_formed({"threads": [thread]})
    assert fixed["threads"][0]["samples"] == 50


def test_rows_that_are_not_objects_and_states_outside_the_vocabulary_are_dropped():
    stats = {
        "total_samples": 10,
        "states": [state("compute", 6), state("gpu_sync", 4), state("napping", 99), "idle", None],
        "threads": ["main", {"name": "t", "states": [state("teleporting", 5), 7]}],
        "top_self": [{"frame": "f (a.py:1)", "samples": 3, "percent": 30.0}, ["g", 2]],
    }
    fixed = well_formed(stats)
    assert [s["state"] for s in fixed["states"]] == ["compute", "gpu_sync"]
    assert [t["name"] for t in fixed["threads"]] == ["t"]
    assert fixed["threads"][0]["states"] == [] and fixed["threads"][0]["samples"] == 0
    assert fixed["top_self"] == [{"frame": "f (a.py:1)", "samples": 3, "percent": 30.0}]


@pytest.mark.parametrize("bad", [-1, True, 2.5, "7", None])
def test_a_count_that_is_no_count_reads_as_zero(bad):
    fixed = well_formed({"total_samples": bad, "states": [state("compute", bad)]})
    assert fixed["total_samples"] == 0 and fixed["states"][0]["samples"] == 0


@pytest.mark.parametrize("bad", [math.nan, True, "12.5", None])
def test_a_percent_that_is_no_number_reads_as_zero(bad):
    fixed = well_formed({"top_total": [{"frame": "f", "samples": 1, "percent": bad}]})
    assert fixed["top_total"][0]["percent"] == 0.0


def test_tids_flags_rounds_and_lag_of_the_wrong_type_read_as_empty():
    fixed = well_formed(
        {
            "threads": [{"name": 5, "tid": True, "pid": -3, "active_percent": "x"}],
            "idle_included": "yes",
            "rounds": -4,
            "lag": ["not", "a", "report"],
        }
    )
    (thread,) = fixed["threads"]
    assert thread["name"] == thread["tid"] == "" and thread["pid"] is None
    assert thread["active_percent"] == 0.0
    assert (fixed["idle_included"], fixed["rounds"], fixed["lag"]) == (None, None, None)
    threads = [{"tid": "0x7F1"}, {"tid": 12}]
    kept = well_formed({"threads": threads, "idle_included": False, "rounds": 0})
    assert [t["tid"] for t in kept["threads"]] == ["0x7F1", 12]
    assert (kept["idle_included"], kept["rounds"]) == (False, 0)


def test_thread_functions_get_their_texts_and_counts():
    fixed = well_formed(
        {"thread_functions": [{"thread": "main", "tid": 1, "samples": 9,
                               "functions": [{"function": "step (train.py)", "samples": "9"}, 3]}]}
    )  # fmt: skip
    assert fixed["thread_functions"] == [
        {"thread": "main", "tid": 1, "samples": 9,
         "functions": [{"function": "step (train.py)", "frame": "", "samples": 0}]}
    ]  # fmt: skip


def test_keys_it_does_not_read_are_kept_and_the_input_is_not_changed():
    stats = {"format": "raw", "threads": [{"name": "t", "extra": 1, "states": []}]}
    fixed = well_formed(stats)
    assert fixed["format"] == "raw" and fixed["threads"][0]["extra"] == 1
    assert stats == {"format": "raw", "threads": [{"name": "t", "extra": 1, "states": []}]}
