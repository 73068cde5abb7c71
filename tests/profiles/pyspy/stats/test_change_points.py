"""Change points in a series (profiles/pyspy/stats/change_points.py): the split that
best separates a series' mean, and its permutation p-value."""

import random

import pytest

from profiles.pyspy.stats.change_points import series_shift, series_shifts


def test_the_change_point_test_finds_a_planted_shift_and_where():
    rng = random.Random(5)
    values = [10 + rng.gauss(0, 0.6) for _ in range(10)] + [
        13 + rng.gauss(0, 0.6) for _ in range(8)
    ]
    shift = series_shift("state:data_wait", values)
    assert shift["index"] == 10
    assert shift["p_value"] < 0.001 and shift["delta_points"] == pytest.approx(3, abs=0.8)


def test_the_change_point_test_is_quiet_on_noise_and_repeatable():
    rng = random.Random(9)
    noise = {f"state:s{i}": [10 + rng.gauss(0, 1) for _ in range(20)] for i in range(8)}
    shifts = series_shifts(noise)
    assert not any(s["significant"] for s in shifts)
    assert series_shifts(noise) == shifts


def test_a_series_too_short_or_flat_has_no_shift():
    assert series_shift("k", [1, 2, 3, 4, 5]) is None
    assert series_shift("k", [4.0] * 12) is None


def test_a_shift_smaller_than_the_minimum_effect_is_not_flagged():
    values = [10.0] * 10 + [11.0] * 10
    (shift,) = series_shifts({"k": values}, min_effect_points=2)
    assert shift["p_value"] < 0.001 and not shift["significant"]
