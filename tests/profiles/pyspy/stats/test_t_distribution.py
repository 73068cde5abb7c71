"""Student's t from the standard library (stats/t_distribution.py): two-sided tails against
the closed forms for 1 and 2 degrees of freedom, quantiles against the printed table."""

import math

import pytest

from profiles.pyspy.stats.t_distribution import t_quantile, t_two_sided_p

# Two-sided critical values as printed in t tables (three decimals), by confidence and df.
TABLE = {
    0.90: {1: 6.314, 2: 2.920, 5: 2.015, 10: 1.812, 30: 1.697},
    0.95: {1: 12.706, 2: 4.303, 3: 3.182, 5: 2.571, 9: 2.262, 10: 2.228, 20: 2.086, 30: 2.042,
           120: 1.980},
    0.99: {1: 63.657, 2: 9.925, 5: 4.032, 10: 3.169, 30: 2.750},
}  # fmt: skip
CASES = [(c, df, t) for c, row in TABLE.items() for df, t in row.items()]


@pytest.mark.parametrize(("confidence", "df", "expected"), CASES)
def test_quantiles_are_the_tabulated_critical_values(confidence, df, expected):
    assert t_quantile(confidence, df) == pytest.approx(expected, abs=5e-4)


@pytest.mark.parametrize(("confidence", "df", "expected"), CASES)
def test_the_tail_beyond_a_tabulated_value_is_one_minus_the_confidence(confidence, df, expected):
    # The table's rounding moves the tail by a little; the closer df is to 1 the less.
    assert t_two_sided_p(expected, df) == pytest.approx(1 - confidence, rel=2e-3)


@pytest.mark.parametrize("t", [0.1, 0.5, 1.0, 2.0, 6.314, 12.706, 100.0])
def test_with_one_degree_of_freedom_the_tail_is_the_cauchy_ones(t):
    assert t_two_sided_p(t, 1) == pytest.approx(1 - 2 / math.pi * math.atan(t), rel=1e-9)


@pytest.mark.parametrize("t", [0.1, 0.5, 1.0, 2.0, 4.303, 30.0])
def test_with_two_degrees_of_freedom_the_tail_has_its_closed_form(t):
    assert t_two_sided_p(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-9)


def test_with_many_degrees_of_freedom_it_is_the_normal_distribution():
    assert t_quantile(0.95, 1e7) == pytest.approx(1.959964, abs=1e-5)
    assert t_two_sided_p(1.959964, 1e7) == pytest.approx(0.05, rel=1e-4)


def test_fractional_degrees_of_freedom_lie_between_their_neighbours():
    # Welch's test gives fractional df: the critical value falls as df grows.
    assert t_quantile(0.95, 9) > t_quantile(0.95, 9.5) > t_quantile(0.95, 10)


def test_the_tail_is_one_at_zero_zero_at_infinity_and_symmetric_in_t():
    assert t_two_sided_p(0.0, 5) == 1.0
    assert t_two_sided_p(math.inf, 5) == 0.0
    assert t_two_sided_p(-2.5, 7) == t_two_sided_p(2.5, 7)
    tails = [t_two_sided_p(t / 4, 7) for t in range(40)]
    assert tails == sorted(tails, reverse=True)


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.95, 0.999])
@pytest.mark.parametrize("df", [1, 3, 17, 250])
def test_the_quantile_inverts_the_tail(confidence, df):
    assert t_two_sided_p(t_quantile(confidence, df), df) == pytest.approx(1 - confidence, rel=1e-8)
