"""Intervals and tests for shares (profiles/pyspy/stats/intervals.py): Wilson, Newcombe,
the pooled two-proportion test and its Student's t form, effective sample sizes."""

import math
import random

import pytest

from profiles.pyspy.stats import intervals
from profiles.pyspy.stats.intervals import difference_p, two_proportion_p
from profiles.pyspy.stats.t_distribution import t_quantile, t_two_sided_p
from profiles.pyspy.thresholds import Z_95


def test_the_wilson_interval_matches_a_published_value():
    # Newcombe (1998) table I: 81/263 -> 0.2553 to 0.3662.
    low, high = intervals.wilson_interval(81, 263)
    assert low == pytest.approx(0.2553, abs=5e-4)
    assert high == pytest.approx(0.3662, abs=5e-4)


def test_the_wilson_interval_keeps_width_at_zero_and_stays_in_bounds():
    low, high = intervals.wilson_interval(0, 50)
    assert low == 0.0 and 0.05 < high < 0.1
    low, high = intervals.wilson_interval(50, 50)
    assert high == 1.0 and 0.9 < low < 0.95


def test_the_wilson_interval_of_nothing_is_everything():
    assert intervals.wilson_interval(0, 0) == (0.0, 1.0)


def test_the_newcombe_interval_matches_a_published_value():
    # Newcombe (1998) table II, example (a): 56/70 vs 48/80, method 10: 0.0524 to 0.3339.
    low, high = intervals.newcombe_interval((48, 80), (56, 70))
    assert low == pytest.approx(0.0524, abs=5e-4)
    assert high == pytest.approx(0.3339, abs=5e-4)


def test_the_newcombe_interval_has_width_when_one_share_is_zero():
    low, high = intervals.newcombe_interval((0, 300), (6, 300))
    assert low < 0.02 < high
    assert high - low > 0.01


@pytest.mark.parametrize("n", [20, 300, 5000])
def test_the_wilson_interval_covers_about_95_percent_of_simulated_shares(n):
    rng = random.Random(n)
    p, trials = 0.3, 400
    hits = 0
    for _ in range(trials):
        k = sum(rng.random() < p for _ in range(n))
        low, high = intervals.wilson_interval(k, n)
        hits += low <= p <= high
    assert math.isclose(hits / trials, 0.95, abs_tol=0.04)


def test_the_two_proportion_test_matches_a_textbook_value():
    # R: prop.test(c(45, 56), c(100, 100), correct = FALSE)$p.value = 0.1198
    assert two_proportion_p((45, 100), (56, 100)) == pytest.approx(0.1198, abs=1e-4)
    assert two_proportion_p((0, 100), (0, 100)) == 1.0


def test_the_difference_test_uses_students_t_over_the_blocks_and_the_larger_effect():
    """A stored design effect is widened for 95% intervals by (t(m-1)/z)²; the test takes
    that off and uses Student's t with Welch's degrees of freedom (2 x 9 here)."""
    counts = (300, 1000), (360, 1000)
    plain = difference_p(*counts)
    assert plain == two_proportion_p(*counts) == pytest.approx(0.00433, abs=1e-5)
    raw = 4.0 / (t_quantile(0.95, 9) / Z_95) ** 2
    t = 0.06 / (0.33 * 0.67 * raw * 2 / 1000) ** 0.5
    t_based = difference_p(*counts, (4.0, 4.0), (10, 10))
    assert t_based == pytest.approx(t_two_sided_p(t, 18), rel=1e-9)
    assert plain < t_based < 0.5
    # Either side's smaller estimate of one job's design effect never makes it bolder.
    assert difference_p(*counts, (1.0, 4.0), (10, 10)) == t_based
    assert difference_p((0, 10), (0, 10)) == 1.0 and difference_p((1, 0), (1, 5)) == 1.0
