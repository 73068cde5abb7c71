"""Honest intervals: batch means hold their coverage on autocorrelated samples where the
naive Wilson interval does not (Student's t: test_t_distribution.py)."""

import random

import pytest

from profiles.pyspy.stats.batch_means import (
    batch_means_difference,
    batch_means_interval,
    block_shares,
    block_size,
)
from profiles.pyspy.stats.intervals import wilson_interval

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
