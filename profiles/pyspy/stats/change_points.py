"""Change points in a series of captures: where did a share shift?

Input: for each tracked share (`kind:name`, as regression.py names rows), its
percentage in each capture, oldest first (the baseline first). The shift point is the
split maximising sqrt(k(n-k)/n)·|mean before − mean after| (a CUSUM-style statistic,
E-Divisive's for one dimension); its p-value comes from permuting the series
(Besag–Clifford sequential stopping), so capture-to-capture variation beyond binomial
noise counts against it, with no assumption about it. Shares are corrected together
(Benjamini–Yekutieli); a shift counts when significant and at least the minimum effect.
Time is bounded: at most MAX_PERMUTATIONS permutations of n values per share.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import TypedDict

from .multiple_testing import benjamini_hochberg

MIN_SERIES = 6
MAX_PERMUTATIONS = 19999
STOP_AFTER_EXCEEDANCES = 20


class SeriesShift(TypedDict):
    """Where one share shifted: captures before `index` vs from `index` on."""

    key: str
    index: int
    before_mean: float
    after_mean: float
    delta_points: float
    p_value: float
    q_value: float
    permutations: int
    significant: bool


def _split_statistic(values: Sequence[float]) -> tuple[float, int]:
    """max over k of sqrt(k(n-k)/n)·|mean(values[:k]) − mean(values[k:])|, and its k;
    each side keeps at least two points."""
    n, total = len(values), sum(values)
    best, best_k, prefix = -1.0, 2, 0.0
    for k in range(1, n - 1):
        prefix += values[k - 1]
        if k < 2:
            continue
        gap = abs(prefix / k - (total - prefix) / (n - k))
        score = math.sqrt(k * (n - k) / n) * gap
        if score > best:
            best, best_k = score, k
    return best, best_k


def _permutation_p(values: list[float], observed: float, rng: random.Random) -> tuple[float, int]:
    """Besag–Clifford sequential Monte Carlo p-value: stop once the permuted statistic
    reached the observed one STOP_AFTER_EXCEEDANCES times (p = h/b), else after
    MAX_PERMUTATIONS (p = (h+1)/(b+1)). Time is bounded by MAX_PERMUTATIONS·n."""
    shuffled, hits = list(values), 0
    for done in range(1, MAX_PERMUTATIONS + 1):
        rng.shuffle(shuffled)
        if _split_statistic(shuffled)[0] >= observed - 1e-12:
            hits += 1
            if hits >= STOP_AFTER_EXCEEDANCES:
                return hits / done, done
    return (hits + 1) / (MAX_PERMUTATIONS + 1), MAX_PERMUTATIONS


def series_shift(key: str, values: Sequence[float], seed: int = 0) -> SeriesShift | None:
    """The most likely shift point of one share series (percent per capture), with its
    permutation p-value; None for a series too short or constant."""
    values = list(values)
    if len(values) < MIN_SERIES or max(values) - min(values) <= 0:
        return None
    observed, k = _split_statistic(values)
    p, permutations = _permutation_p(values, observed, random.Random(f"{seed}:{key}"))
    before, after = sum(values[:k]) / k, sum(values[k:]) / (len(values) - k)
    return {
        "key": key,
        "index": k,
        "before_mean": round(before, 2),
        "after_mean": round(after, 2),
        "delta_points": round(after - before, 2),
        "p_value": p,
        "q_value": 1.0,
        "permutations": permutations,
        "significant": False,
    }


def series_shifts(
    series: Mapping[str, Sequence[float]],
    *,
    min_effect_points: float = 2.0,
    false_discovery_rate: float = 0.01,
    seed: int = 0,
) -> list[SeriesShift]:
    """Shift points of every series, corrected together; significant first."""
    shifts = [s for key, values in series.items() if (s := series_shift(key, values, seed))]
    adjusted = benjamini_hochberg([s["p_value"] for s in shifts], dependent=True)
    for shift, q in zip(shifts, adjusted, strict=True):
        shift["q_value"] = q
        shift["significant"] = (
            q < false_discovery_rate and abs(shift["delta_points"]) >= min_effect_points
        )
    return sorted(shifts, key=lambda s: (not s["significant"], s["p_value"], s["key"]))
