"""Student's t distribution from the standard library: its two-sided tail and quantiles,
through the regularized incomplete beta function (stats/batch_means.py, compare/captures.py)."""

from __future__ import annotations

import math
from functools import lru_cache


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= t) for Student's t with `df` degrees of freedom."""
    if not math.isfinite(t):
        return 0.0
    return _incomplete_beta(df / 2, 0.5, df / (df + t * t))


@lru_cache(maxsize=1024)
def t_quantile(confidence: float, df: float) -> float:
    """The t with P(|T| <= t) = confidence (df degrees of freedom), by bisection."""
    target = 1 - confidence
    low, high = 0.0, 1.0
    while t_two_sided_p(high, df) > target:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        if t_two_sided_p(middle, df) > target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (continued fraction, Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(log_front + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny, c, d = 1e-300, 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return result
