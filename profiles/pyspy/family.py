"""Many comparisons at once: Holm's step-down correction and Bonferroni's simultaneous
level (the reasons for Holm here: blocks.py's module doc)."""

from __future__ import annotations

from collections.abc import Sequence

from .thresholds import CONFIDENCE


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
