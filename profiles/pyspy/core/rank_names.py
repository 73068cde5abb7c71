"""Rank names as people read them: natural order (`rank-2` before `rank-10`) and short
labels for lists of ranks (`ranks 0-2, 5`). Used by the job report and the whole-job
dump (job/report.py re-exports both functions)."""

from __future__ import annotations

import re
from collections.abc import Sequence

SHOWN_RANGES = 6
"""Runs of rank numbers a label lists before it elides the middle ones."""
_NUMBERED = re.compile(r"(.*?)(\d+)\Z")


def natural(name: str) -> tuple[str, int, str]:
    """Sort key: `rank-2` before `rank-10`."""
    match = _NUMBERED.match(name)
    return (match.group(1), int(match.group(2)), name) if match else (name, -1, name)


def ranks_label(names: Sequence[str]) -> str:
    """`ranks 0-2, 5` for numbered names sharing a prefix (`21 ranks: 1, 4, 7, …, 61`
    past SHOWN_RANGES runs); else the names (8 at most)."""
    matches = [_NUMBERED.match(n) for n in names]
    prefixes = {m.group(1) for m in matches if m}
    if len(prefixes) == 1 and all(matches):
        numbers = sorted(int(m.group(2)) for m in matches if m)
        parts = _ranges(numbers)
        if len(parts) > SHOWN_RANGES:
            shown = ", ".join(parts[: SHOWN_RANGES - 1])
            return f"{len(numbers)} ranks: {shown}, …, {parts[-1]}"
        return f"{'ranks' if len(numbers) > 1 else 'rank'} {', '.join(parts)}"
    shown = ", ".join(names[:8])
    return shown + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def _ranges(numbers: list[int]) -> list[str]:
    parts, start = [], numbers[0]
    for prev, cur in zip(numbers, [*numbers[1:], None], strict=True):
        if cur != prev + 1:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = cur if cur is not None else start
    return parts
