"""The regression judgement (profiles/pyspy/compare/regression.py): pair tests with a
multiple-testing correction and the minimum effect (change points: stats/test_change_points.py)."""

import random

import pytest

from profiles.pyspy.compare.regression import (
    CHANGED,
    TOO_FEW,
    UNCHANGED,
    JudgeOptions,
    judge,
    returned,
    tracked_counts,
)
from tests import factories
from tests.support import watch_sim


def test_an_unchanged_capture_is_within_noise():
    result = judge(
        factories.state_stats(5000, host_sync=3), factories.state_stats(5000, host_sync=3)
    )
    assert result["verdict"] == UNCHANGED and result["moved"] == []
    assert result["rows_compared"] > 5


def test_a_real_change_moves_its_row_with_intervals_on_both_sides():
    before = factories.state_stats(5000, host_sync=3.1)
    result = judge(before, factories.state_stats(5000, host_sync=11.4))
    assert result["verdict"] == CHANGED
    row = next(r for r in result["moved"] if r["key"] == "state:host_sync")
    assert row["before"]["percent"] == 3.1 and row["after"]["percent"] == 11.4
    assert row["before"]["low"] < 3.1 < row["before"]["high"]
    assert 0 < row["delta_low"] < 8.3 < row["delta_high"]
    assert row["q_value"] < 0.01


def test_a_significant_change_below_the_minimum_effect_does_not_move():
    before, after = (
        factories.state_stats(200_000, idle=10),
        factories.state_stats(200_000, idle=11.5),
    )
    strict = judge(before, after, JudgeOptions(min_effect_points=2))
    loose = judge(before, after, JudgeOptions(min_effect_points=1))
    row = next(r for r in strict["rows"] if r["key"] == "state:idle")
    assert row["q_value"] < 1e-6 and not row["moved"]
    assert strict["verdict"] == UNCHANGED and loose["verdict"] == CHANGED


def test_too_few_samples_are_said_and_nothing_is_judged():
    result = judge(factories.state_stats(5000), factories.state_stats(200, host_sync=50))
    assert result["verdict"] == TOO_FEW and result["moved"] == []
    assert "the capture has 200" in result["reason"] and "300" in result["reason"]


def test_a_capture_without_states_has_no_state_rows():
    before = factories.state_stats(5000)
    after = {k: v for k, v in factories.state_stats(5000).items() if k != "states"}
    keys = {r["key"] for r in judge(before, after)["rows"]}
    assert keys and not any(k.startswith("state:") for k in keys)


def test_rows_counting_the_same_samples_are_one_test_with_aliases():
    stats = factories.state_stats(5000, host_sync=3)
    stats["top_self"] = [{"frame": "cudaStreamSynchronize (libcudart.so)", "samples": 150}]
    result = judge(stats, stats)
    synced = [r for r in result["rows"] if r["before"]["samples"] == 150]
    assert len(synced) == 1
    assert set(synced[0]["aliases"]) | {synced[0]["key"]} == {
        "state:host_sync",
        "category:sync",
        "self:cudaStreamSynchronize (libcudart.so)",
    }


def test_a_frame_missing_from_a_top_list_proves_only_a_change_away_from_its_bound():
    frame = "metric_per_sample (train.py:67)"
    listed = factories.state_stats(5000)
    listed["top_self"] = [
        {"frame": frame, "samples": 1000},
        {"frame": "x (a.py:1)", "samples": 400},
    ]
    dropped = factories.state_stats(5000)
    dropped["top_self"] = [{"frame": "x (a.py:1)", "samples": 400}]
    fell = next(r for r in judge(listed, dropped)["rows"] if frame in r["key"])
    assert fell["bound"] == "after below" and fell["moved"]
    # Listed in the baseline, absent now: "below 8%" can never prove a rise.
    rose = next(r for r in judge(dropped, listed)["rows"] if frame in r["key"])
    assert rose["bound"] == "before below" and rose["moved"]
    listed["top_self"][0]["samples"] = 300
    not_proven = next(r for r in judge(listed, dropped)["rows"] if frame in r["key"])
    assert not_proven["p_value"] == 1.0 and not not_proven["moved"]


def test_a_row_returns_only_below_half_the_minimum_effect():
    row = {"delta_points": 1.2}
    assert not returned(row, +1, 2.0)
    assert returned({"delta_points": 0.9}, +1, 2.0)
    assert returned({"delta_points": 5.0}, -1, 2.0)
    assert not returned(None, +1, 2.0)


def test_tracked_counts_follow_the_baselines_states_categories_and_frames():
    baseline = factories.state_stats(2000, data_wait=20)
    baseline["top_self"] = [{"frame": "Queue.get (queue.py:182)", "samples": 400}]
    later = factories.state_stats(4000, data_wait=25)
    later["top_self"] = [{"frame": "other (a.py:1)", "samples": 30}]
    counts = tracked_counts(baseline, later)
    assert counts["state:data_wait"] == [1000, 4000]
    assert counts["self:Queue.get (queue.py:182)"] == [30, 4000]  # bound: the list's floor
    assert "self:other (a.py:1)" not in counts


def test_the_fast_simulation_counts_rows_as_the_engine_does():
    base = watch_sim.base_distribution()
    counts = watch_sim.sample(base, 3000, random.Random(3))
    engine, fast = watch_sim.stats_of(counts), watch_sim.StackRows(list(base)).stats(counts)

    def rows(stats, field, key):
        return sorted((r[key], r["samples"]) for r in stats.get(field) or [])

    assert engine["total_samples"] == fast["total_samples"]
    for field, key in [("categories", "category"), ("states", "state")]:
        assert rows(engine, field, key) == rows(fast, field, key)
    for field in ("top_self", "top_total"):
        assert [(r["frame"], r["samples"]) for r in engine[field]] == [
            (r["frame"], r["samples"]) for r in fast[field]
        ]


def test_two_hundred_unchanged_pairs_raise_at_most_one_percent_false_alerts():
    rates = watch_sim.simulate("unchanged", pairs=200, samples=2000, fast=True)
    assert rates.alerted <= 2


@pytest.mark.parametrize("scenario", ["new frame", "grown frame"])
def test_a_planted_three_point_change_is_found_nine_times_in_ten(scenario):
    rates = watch_sim.simulate(scenario, pairs=200, samples=2000, fast=True)
    assert rates.found_rate >= 0.9
