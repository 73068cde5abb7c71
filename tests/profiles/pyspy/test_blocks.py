"""Honest intervals: batch means hold their coverage on autocorrelated samples where the
naive Wilson interval does not; Holm's correction; Student's t."""

import random

import pytest

from profiles.pyspy.blocks import (
    batch_means_difference,
    batch_means_interval,
    block_shares,
    block_size,
    holm_adjusted,
    holm_reject,
    simultaneous_confidence,
    t_quantile,
    t_two_sided_p,
)
from profiles.pyspy.compare import wilson_interval

RATE = 100
SECONDS = 15
SHARE = 0.3
MEAN_WAIT = 10  # samples: a 100 ms wait at 100 Hz


def waits(rng: random.Random, n: int = RATE * SECONDS, share: float = SHARE) -> list[int]:
    """A Markov chain of waits (1) and work (0): waits last MEAN_WAIT samples on average,
    and the chain spends `share` of its time waiting (started from that share)."""
    leave = 1 / MEAN_WAIT
    enter = share * leave / (1 - share)
    state, out = int(rng.random() < share), []
    for _ in range(n):
        out.append(state)
        state = (rng.random() >= leave) if state else (rng.random() < enter)
    return out


def _coverage(interval, replicates=400, seed=11, share=SHARE):
    rng, covered = random.Random(seed), 0
    for _ in range(replicates):
        low, high = interval(waits(rng, share=share))
        covered += low <= share <= high
    return covered / replicates


def test_the_naive_wilson_interval_under_covers_autocorrelated_waits():
    coverage = _coverage(lambda s: wilson_interval(sum(s), len(s)))
    assert coverage < 0.75


@pytest.mark.parametrize("share", [0.3, 0.08])
def test_batch_means_over_one_second_blocks_hold_about_95_percent(share):
    block = block_size(RATE * SECONDS, 1 / RATE)
    assert block == RATE
    coverage = _coverage(lambda s: batch_means_interval(s, block)[1:3], share=share)
    assert 0.90 <= coverage <= 0.995


def test_the_interval_contains_the_share_and_stays_within_zero_and_one():
    rng = random.Random(5)
    for share in (0.0, 0.02, 0.5, 0.98, 1.0):
        values = [int(rng.random() < share) for _ in range(1200)]
        found = batch_means_interval(values, 100)
        assert 0.0 <= found.low <= found.share <= found.high <= 1.0
        assert found.blocks == 12


def test_blocks_that_all_agree_still_leave_an_interval_as_wide_as_independent_samples():
    found = batch_means_interval([0] * 1500, 100)
    assert found.high >= wilson_interval(0, 1500)[1] > 0


def test_too_few_blocks_say_nothing():
    assert batch_means_interval([1, 0, 1], 100)[1:3] == (0.0, 1.0)


def test_block_shares_cover_every_sample_once():
    values = list(range(1003))
    means = block_shares(values, 100)
    assert len(means) == 10 and block_size(10**6, 0.01) == 1000


def test_a_difference_between_two_runs_of_the_same_job_alarms_about_five_percent():
    rng, alarms, replicates = random.Random(2), 0, 300
    for _ in range(replicates):
        alarms += batch_means_difference(waits(rng), waits(rng), RATE).p_value < 0.05
    assert alarms / replicates <= 0.09


def test_a_planted_change_is_detected():
    rng = random.Random(4)
    found = batch_means_difference(waits(rng, share=0.2), waits(rng, share=0.4), RATE)
    assert found.p_value < 0.01 and found.low > 0 and found.delta == pytest.approx(0.2, abs=0.1)


def test_the_difference_says_nothing_with_too_few_blocks():
    assert batch_means_difference([1] * 50, [0] * 50, 100)[1:] == (-1.0, 1.0, 1.0)


def test_student_t_matches_the_printed_tables():
    # Two-sided 95% points from any statistics table.
    table = {1: 12.706, 2: 4.303, 5: 2.571, 10: 2.228, 14: 2.145, 30: 2.042, 120: 1.980}
    for df, t in table.items():
        assert t_quantile(0.95, df) == pytest.approx(t, abs=0.001)
        assert t_two_sided_p(t, df) == pytest.approx(0.05, abs=0.0005)
    assert t_two_sided_p(0.0, 7) == pytest.approx(1.0)


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
