"""Properties on arbitrary input: only ProfileError, shares <= 100, trees well formed,
and every count equal to a brute-force once-per-sample oracle."""

import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiles.pyspy import (
    AnalysisOptions,
    Keyword,
    ProfileError,
    analyze,
    parse_profile_text,
    parse_raw_lines,
    read_profile,
)
from profiles.pyspy.rules.state_rules import STATES
from tests.profiles.pyspy.count.test_flamegraph import assert_well_formed

KEYWORDS = (Keyword("cu", "gpu"), Keyword("Sync", "gpu"), Keyword("x", "other"))
FRAMES = ["a", "b (x.py:1)", "cuSync (libcuda.so)", "cudaSync (libcudart.so)", "x", "thread (7): w"]
OPTIONS = AnalysisOptions(keywords=KEYWORDS, max_nodes=12)


def check_invariants(stats):
    whole = stats["total_samples"]
    for key in ("threads", "top_self", "top_total", "keywords", "categories", "uncovered_native"):
        for row in stats[key]:
            assert 0 <= row["percent"] <= 100
            assert 0 <= row["samples"] <= whole
    assert stats["flamegraph"]["value"] == whole
    assert_well_formed(stats["flamegraph"], OPTIONS.max_nodes)
    check_states(stats)


def check_states(stats):
    """Every sample in exactly one state, per capture and per thread."""
    for scope, whole in [(stats, stats["total_samples"])] + [
        (t, t["samples"]) for t in stats["threads"]
    ]:
        assert [s["state"] for s in scope["states"]] == list(STATES)
        assert sum(s["samples"] for s in scope["states"]) == whole
        for row in scope["states"]:
            assert 0 <= row["percent"] <= 100
            assert sum(c["samples"] for c in row["user_callers"]) <= row["samples"]
            if len(row["user_callers"]) < 10:
                assert sum(c["samples"] for c in row["user_callers"]) == row["samples"]
        active = scope.get("active_percent")
        assert active is None or 0 <= active <= 100


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_parses_or_raises_profile_error(text):
    try:
        profile = parse_profile_text(text)
    except ProfileError as exc:
        assert "\n" not in str(exc)
        return
    check_invariants(analyze(profile, OPTIONS))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet='ab;; \r#1.-\n"process:thread()7', max_size=30), max_size=20))
def test_arbitrary_raw_lines_never_break_the_invariants(lines):
    check_invariants(analyze(parse_raw_lines(lines), OPTIONS))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_arbitrary_bytes_read_or_raise_profile_error(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "input"
        path.write_bytes(data)
        try:
            profile = read_profile(path)
        except ProfileError:
            return
        check_invariants(analyze(profile, OPTIONS))


def stacks_of(frames, low=0, depth=8, lines=12):
    """Raw records: stacks of `frames` (root first) with counts from `low` to 50."""
    stack = st.lists(st.sampled_from(frames), min_size=1, max_size=depth)
    return st.lists(st.tuples(stack, st.integers(low, 50)), max_size=lines)


stacks = stacks_of(FRAMES)


def oracle(records):
    """Brute force: per line, a set of what the stack contains, times its count."""
    total, frames, keywords, categories = 0, Counter(), Counter(), Counter()
    for stack, count in records:
        total += count
        real = [f for f in stack if not f.startswith("thread (")]
        for frame in set(real):
            frames[frame] += count
        hits = {kw for kw in KEYWORDS if any(kw.keyword in f for f in real)}
        for kw in hits:
            keywords[kw.keyword] += count
        for category in {kw.category for kw in hits}:
            categories[category] += count
    return total, frames, keywords, categories


@settings(max_examples=300, deadline=None)
@given(stacks)
def test_every_count_equals_the_once_per_sample_oracle(records):
    lines = [";".join(stack) + f" {count}" for stack, count in records]
    stats = analyze(parse_raw_lines(lines), OPTIONS)
    total, frames, keywords, categories = oracle(records)
    assert stats["total_samples"] == total
    assert {r["frame"]: r["samples"] for r in stats["top_total"]} == {
        f: c for f, c in frames.items() if c
    }
    assert {r["keyword"]: r["samples"] for r in stats["keywords"]} == {
        kw.keyword: keywords[kw.keyword] for kw in KEYWORDS
    }
    assert {r["category"]: r["samples"] for r in stats["categories"]} == {
        "gpu": categories["gpu"],
        "other": categories["other"],
    }
    check_invariants(stats)


STATE_FRAMES = [
    "main (train.py:1)",
    "Queue.get (queue.py:171)",
    "pthread_cond_wait (libc.so.6)",
    "0x7f01 (libc.so.6)",
    "c10d::Work::wait (libtorch_cpu.so)",
    "take_gil (libpython3.11.so.1.0)",
    "at::native::add (libtorch_cpu.so)",
    "cuLaunchKernel (libcuda.so.1)",
    "time_sleep (libpython3.11.so.1.0)",
    "PyThread_acquire_lock_timed (libpython3.11.so.1.0)",
    "thread (7): w",
    "thread (8): v",
]
state_stacks = stacks_of(STATE_FRAMES, low=1, depth=7, lines=10)


def _by_state(stats, key="samples"):
    return {s["state"]: s[key] for s in stats["states"]}


@settings(max_examples=300, deadline=None)
@given(state_stacks)
def test_a_stacks_state_and_user_caller_do_not_depend_on_the_other_stacks(records):
    """The trie shares prefixes between stacks; each stack alone must give the same."""
    lines = [";".join(stack) + f" {count}" for stack, count in records]
    options = AnalysisOptions(include_flamegraph=False)
    together = analyze(parse_raw_lines(lines), options)
    check_states(together)
    samples, callers = Counter(), Counter()
    for line in lines:
        alone = analyze(parse_raw_lines([line]), options)
        samples.update(_by_state(alone))
        for row in alone["states"]:
            callers.update({(row["state"], c["frame"]): c["samples"] for c in row["user_callers"]})
    assert _by_state(together) == {state: samples[state] for state in STATES}
    assert {
        (row["state"], c["frame"]): c["samples"]
        for row in together["states"]
        for c in row["user_callers"]
    } == +callers
