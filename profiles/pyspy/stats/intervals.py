"""Intervals and tests for shares counted in samples: Wilson, Newcombe, the pooled test.

A share is (successes, n). Every interval here is computed on the *effective* sample
size (`effective`: both counts divided by the share's design effect, measured over time
blocks by batch means), so autocorrelated samples do not make it too narrow. Why Wilson
and Newcombe: a Wald interval collapses to zero width at 0% or 100% and under-covers the
small shares that matter (an allocator at 0.4%); Wilson does neither, never leaves
[0, 1], and Newcombe's hybrid score interval for a difference (Newcombe 1998, method 10)
is built from the two Wilson intervals, so it agrees with them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..thresholds import CONFIDENCE, Z_95
from .t_distribution import t_quantile, t_two_sided_p


def difference_p(
    before: tuple[float, float],
    after: tuple[float, float],
    effects: tuple[float, float] = (1.0, 1.0),
    blocks: tuple[int | None, int | None] = (None, None),
) -> float:
    """Two-sided p-value that two shares, (successes, n) each, are equal: the pooled
    two-proportion test with each side's variance times its design effect, and, where a
    side's effect was measured over `blocks` time blocks, Student's t with Welch's
    degrees of freedom (blocks - 1 a side) instead of the normal; 1.0 when undefined.

    A stored design effect is widened for 95% intervals by (t(m-1)/z)²
    (timed/design_effects.py); the
    test takes that factor off again and uses the t distribution itself, so its p-value
    holds at every level (Holm's small ones included), not only at 5%."""
    (x1, n1), (x2, n2) = before, after
    if n1 <= 0 or n2 <= 0:
        return 1.0
    pooled = (x1 + x2) / (n1 + n2)
    if pooled <= 0 or pooled >= 1:
        return 1.0
    raw = [d / _widening(m) for d, m in zip(effects, blocks, strict=True)]
    if all(blocks):
        # Under "no change" both sides measure one design effect; each estimate is noisy
        # (a bursty share's blocks are heavy-tailed), and the smaller one would make the
        # test too bold: both sides take the larger.
        raw = [max(raw)] * 2
    sides = [pooled * (1 - pooled) * d / n for d, n in zip(raw, (n1, n2), strict=True)]
    t = abs(x2 / n2 - x1 / n1) / math.sqrt(sum(sides))
    terms = [v * v / (m - 1) for v, m in zip(sides, blocks, strict=True) if m]
    if not terms:
        return math.erfc(t / math.sqrt(2))
    return t_two_sided_p(t, sum(sides) ** 2 / sum(terms))


def _widening(blocks: int | None) -> float:
    return (t_quantile(CONFIDENCE, blocks - 1) / Z_95) ** 2 if blocks else 1.0


def pooled_effect(sides: Iterable[tuple[float, float]]) -> float:
    """The design effect of a share pooled over independent captures (the ranks of a
    job), from (samples, design effect) of each: Var(pooled) = Σ n_i d_i p(1-p) / N²,
    so the effects weighted by samples."""
    pairs = [(n, d) for n, d in sides if n > 0]
    total = sum(n for n, _ in pairs)
    return sum(n * d for n, d in pairs) / total if total else 1.0


def effective(counts: tuple[float, float], design_effect: float = 1.0) -> tuple[float, float]:
    """(successes, n) as that many independent draws: both divided by the design effect."""
    return counts[0] / design_effect, counts[1] / design_effect


def wilson_interval(successes: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for a proportion, as fractions; (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At 0 or n the bound is exactly 0 or 1; float rounding would leave a speck.
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return low, high


def newcombe_interval(
    before: tuple[float, float], after: tuple[float, float], z: float = Z_95
) -> tuple[float, float]:
    """Newcombe's hybrid score interval for p_after - p_before, as fractions.

    `before` and `after` are (successes, n). Built from the two Wilson intervals, so
    it stays within [-1, 1] and keeps its width when a share is 0 or 1. A side with
    n = 0 says nothing: its share may be anything in [0, 1], so the interval is every
    difference the other side's Wilson interval allows ([-1, 1] when both are empty).
    """
    l1, u1 = wilson_interval(*before, z=z)
    l2, u2 = wilson_interval(*after, z=z)
    if before[1] <= 0 or after[1] <= 0:
        return max(-1.0, l2 - u1), min(1.0, u2 - l1)
    p1, p2 = before[0] / before[1], after[0] / after[1]
    d = p2 - p1
    low = d - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2)
    high = d + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
    return max(-1.0, low), min(1.0, high)


def two_proportion_p(before: tuple[float, float], after: tuple[float, float]) -> float:
    """Two-sided p-value of the pooled two-proportion z-test; 1.0 when undefined."""
    return difference_p(before, after)
