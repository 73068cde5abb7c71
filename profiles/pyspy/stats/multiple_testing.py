"""Many comparisons at once: Holm's step-down correction, Bonferroni's simultaneous
level, and Benjamini-Hochberg's false-discovery control.

Many comparisons at once (a straggler's explanation tests dozens of functions, rank classes
many pairs): Holm's step-down correction of the p-values. Holm controls the
family-wise error rate (the chance of even one false claim) under any dependence
between the tests: these comparisons share samples (one rank's share enters many
pairs), which Benjamini-Hochberg's false-discovery control would need to assume
away (positive dependence), and each claim the page makes ("this rank does X more")
must stand on its own, so one false one in a list is the error that matters. Holm is
uniformly more powerful than Bonferroni at the same guarantee. Intervals shown beside
such tests use `simultaneous_confidence` (Bonferroni's level, which Holm's first step
equals).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..thresholds import CONFIDENCE


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: reject a hypothesis at
    level alpha when its adjusted p-value is at most alpha."""
    m = len(p_values)
    adjusted = [1.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def holm_reject(p_values: Sequence[float], alpha: float = 1 - CONFIDENCE) -> list[bool]:
    """Which hypotheses Holm's procedure rejects at family-wise level `alpha`."""
    return [p <= alpha for p in holm_adjusted(p_values)]


def simultaneous_confidence(comparisons: int, confidence: float = CONFIDENCE) -> float:
    """The level each of `comparisons` intervals needs so all hold together (Bonferroni)."""
    return 1 - (1 - confidence) / max(1, comparisons)


def benjamini_hochberg(p_values: Sequence[float], *, dependent: bool = False) -> list[float]:
    """Adjusted p-values (q-values) of the BH step-up procedure, in input order.

    `dependent`: the Benjamini–Yekutieli variant (BH times the harmonic number of m),
    which holds the false discovery rate under any dependence between the tests.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    harmonic = sum(1 / i for i in range(1, m + 1)) if dependent else 1.0
    adjusted = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        index = order[rank - 1]
        running = min(running, p_values[index] * m * harmonic / rank)
        adjusted[index] = min(1.0, running)
    return adjusted
