"""Many comparisons at once (profiles/pyspy/stats/multiple_testing.py): Holm's step-down,
Bonferroni's simultaneous level, Benjamini-Hochberg and Benjamini-Yekutieli, each checked
against values worked by hand (and R's p.adjust)."""

import random

import pytest

from profiles.pyspy.stats.multiple_testing import (
    benjamini_hochberg,
    holm_adjusted,
    holm_reject,
    simultaneous_confidence,
)


def test_benjamini_hochberg_adjusts_as_the_step_up_procedure_does():
    # R's p.adjust(c(0.01, 0.04, 0.03, 0.005), "BH") = 0.02, 0.04, 0.04, 0.02
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    # "BY" multiplies by 1 + 1/2 + 1/3 + 1/4 = 2.0833 (capped at 1)
    by = benjamini_hochberg([0.01, 0.04, 0.03, 0.005], dependent=True)
    assert by == pytest.approx([0.041667, 0.083333, 0.083333, 0.041667], rel=1e-4)


def test_holm_adjusts_step_down_and_keeps_the_given_order():
    # Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.04 -> made
    # monotone: 0.02, 0.03, 0.06, 0.06.
    assert holm_adjusted([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_reject([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]


def test_holm_never_rejects_more_than_the_uncorrected_test_nor_less_than_bonferroni():
    rng = random.Random(9)
    for _ in range(200):
        p = [rng.random() ** 3 for _ in range(rng.randint(1, 30))]
        holm = holm_reject(p)
        assert all(not h or q <= 0.05 for h, q in zip(holm, p, strict=True))
        assert all(h or q > 0.05 / len(p) for h, q in zip(holm, p, strict=True))


def test_many_null_comparisons_give_a_false_claim_in_about_five_percent_of_families():
    rng, families, wrong = random.Random(13), 300, 0
    for _ in range(families):
        wrong += any(holm_reject([rng.random() for _ in range(40)]))
    assert wrong / families <= 0.09
    assert simultaneous_confidence(40) == pytest.approx(1 - 0.05 / 40)
