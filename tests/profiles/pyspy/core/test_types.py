"""The JSON shapes (core/types.py) are what the engine returns: for small real inputs from
tests/data, every key a TypedDict names is there (optional ones aside), no other key is,
and every value has its declared type."""

from pathlib import Path
from typing import NotRequired, get_origin, get_type_hints

import pytest

from profiles.pyspy import AnalysisOptions, Keyword, analyze, analyze_lag, parse_dump
from profiles.pyspy.core import types
from profiles.pyspy.formats.reading import read_profile
from profiles.pyspy.job.dump_verdict import analyze_stacks
from profiles.pyspy.job.report import analyze_job
from profiles.pyspy.timed.timeline import timeline
from tests.profiles.pyspy.timeline_data import captured
from tests.profiles.pyspy.typed_schema import problems

DATA = Path(__file__).resolve().parents[3] / "data"
PYSPY = DATA / "pyspy"


def keys_of(typed_dict):
    """(required keys, optional keys) as declared, NotRequired read from the hints."""
    hints = get_type_hints(typed_dict, include_extras=True)
    optional = {k for k, hint in hints.items() if get_origin(hint) is NotRequired}
    return set(hints) - optional, optional


def assert_shape(value, typed_dict, optional_present=()):
    """`value` fits `typed_dict`: exactly its required keys plus `optional_present`."""
    required, optional = keys_of(typed_dict)
    assert set(optional_present) <= optional
    assert set(value) == required | set(optional_present)
    assert problems(value, typed_dict) == []


@pytest.fixture(scope="module")
def stats():
    options = AnalysisOptions(keywords=(Keyword("compress_block", "compression"),))
    log = (PYSPY / "idle.txt.log").read_text()
    return analyze(read_profile(PYSPY / "idle.txt"), options, log_text=log)


def test_analyze_returns_stats_with_every_key_but_the_dashboards_time(stats):
    optional = ("thread_functions", "findings", "flamegraph", "lag")
    assert_shape(stats, types.Stats, optional)
    assert stats["total_samples"] > 0 and stats["keywords"][0]["samples"] > 0


def test_the_nested_rows_of_stats_have_exactly_their_declared_keys(stats):
    assert_shape(stats["threads"][0], types.ThreadStat)
    assert_shape(stats["states"][0], types.StateStat)
    assert_shape(stats["top_self"][0], types.FrameStat)
    assert_shape(stats["keywords"][0], types.KeywordStat)
    assert_shape(stats["categories"][0], types.CategoryStat)
    assert_shape(stats["thread_functions"][0], types.ThreadFunctions)
    assert_shape(stats["lag"], types.LagReport)
    assert set(stats["flamegraph"]) >= keys_of(types.FlameNode)[0]


def test_a_py_spy_log_gives_a_lag_report():
    report = analyze_lag((PYSPY / "lag_tty.log").read_text())
    assert_shape(report, types.LagReport)
    assert report["series"], "the log's lag points"
    assert_shape(report["series"][0], types.LagPoint)


def test_a_dump_gives_dump_threads_and_frames():
    threads = parse_dump((PYSPY / "dump_locals.txt").read_text())
    assert threads
    for thread in threads:
        assert_shape(thread, types.DumpThread)
    with_locals = [f for t in threads for f in t["frames"] if "locals" in f]
    assert with_locals, "dump_locals.txt was taken with --locals"
    assert_shape(with_locals[0], types.DumpFrame, ("locals",))
    assert_shape(with_locals[0]["locals"][0], types.DumpLocal)


def test_a_whole_job_report_of_two_real_ranks_fits_job_report():
    ranks = [
        (f"rank-{r}", analyze(read_profile(PYSPY / f"states_gloo_rank{r}_idle.txt")))
        for r in (0, 1)
    ]
    report = analyze_job(ranks)
    assert_shape(report, types.JobReport)
    assert_shape(report["wait_model"], types.WaitModel)
    assert [r["name"] for r in report["ranks"]] == ["rank-0", "rank-1"]
    assert_shape(report["ranks"][0]["threads"][0], types.JobThread)


def test_a_whole_job_dump_fits_stacks():
    folder = DATA / "dumps" / "progressing"
    ranks = [
        (f"rank-{r}", [parse_dump(p.read_text()) for p in sorted(folder.glob(f"rank-{r}.*.json"))])
        for r in range(4)
    ]
    report = analyze_stacks(ranks)
    assert_shape(report, types.Stacks)
    assert problems(report["verdict"], types.StacksVerdict) == []
    assert len(report["ranks"]) == 4


def test_a_timeline_of_a_real_recording_fits_timeline():
    _, capture = captured("steady")
    line = timeline(capture)
    assert problems(line, types.Timeline) == []
    assert {"start", "bucket_s", "threads"} <= set(line)
    assert_shape(line["threads"][0], types.TimelineThread)
