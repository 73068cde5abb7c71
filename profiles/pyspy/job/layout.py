"""Where ranks sit in the job's parallel layout, said in words.

A rank's layout is a small dict of axis -> coordinate, such as `{"dp": 7, "tp": 0,
"pp": 3}`: tensor-parallel rank 0 of pipeline stage 3 of data-parallel replica 7. Ranks
report it when they register (from FLAMEDECK_LAYOUT or a torch DeviceMesh: docs/jobs.md);
the whole-job report (job/report.py, stuck.py) and the whole-job dump (job/dump_verdict.py)
then name the
parallel group of the ranks they single out, as stack aggregators of large jobs group
their outliers: "rank-29 (pipeline stage 3 of data-parallel replica 7) stands in …".

- `layout_problem(value)`: why a value is not a layout (None when it is one): a dict
  of at most MAX_AXES known axis names (AXES) to integers 0..MAX_COORDINATE.
- `Layouts(by_rank)`: the layouts of a report's ranks, by rank name; `place(names)` says
  what the named ranks share ("pipeline stage 3", "all of pipeline stage 3" when they
  are every rank of it in the report), and `named(label, names)` puts that after a
  label. A rank without a layout, or ranks that share no coordinate, say nothing: with
  no layouts every text is what it was without them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

AXES: dict[str, str] = {
    "tp": "tensor-parallel rank",
    "sp": "sequence-parallel rank",
    "cp": "context-parallel rank",
    "ep": "expert-parallel rank",
    "pp": "pipeline stage",
    "dp_shard": "data-parallel shard",
    "fsdp": "FSDP shard",
    "dp_replicate": "data-parallel replica",
    "dp": "data-parallel replica",
}
"""Known axis names (DeviceMesh dimension names as torchtitan and Megatron spell them)
and how a coordinate on each is said; innermost first, the order a place is read in."""
MAX_AXES = 8
MAX_COORDINATE = 65_535


def layout_problem(value: object) -> str | None:
    """Why `value` is not a layout (module doc), in one line; None when it is one."""
    if not isinstance(value, dict):
        return 'give an object of axis -> coordinate, e.g. {"dp": 7, "pp": 3}'
    if len(value) > MAX_AXES:
        return f"at most {MAX_AXES} axes"
    unknown = [str(axis)[:30] for axis in value if axis not in AXES]
    if unknown:
        return f"unknown axis {unknown[0]!r}: use {', '.join(sorted(AXES))}"
    for axis, number in value.items():
        if isinstance(number, bool) or not isinstance(number, int):
            return f"{axis}: give a whole number"
        if not 0 <= number <= MAX_COORDINATE:
            return f"{axis}: give a number from 0 to {MAX_COORDINATE}"
    return None


def said(layout: Mapping[str, int]) -> str:
    """`tensor-parallel rank 0 of pipeline stage 3 of data-parallel replica 7`."""
    return " of ".join(f"{AXES[axis]} {layout[axis]}" for axis in AXES if axis in layout)


class Layouts:
    """The ranks' layouts by rank name (module doc); malformed ones are left out."""

    def __init__(self, by_rank: Mapping[str, object] | None = None) -> None:
        self._by_rank: dict[str, dict[str, int]] = {
            name: dict(layout)
            for name, layout in (by_rank or {}).items()
            if layout and layout_problem(layout) is None
        }

    def __bool__(self) -> bool:
        return bool(self._by_rank)

    def place(self, names: Sequence[str]) -> str:
        """What the named ranks share, in words; "" when a rank has no layout or they
        share no coordinate. "all of …" when they are every rank of the report there."""
        layouts = [self._by_rank.get(name) for name in names]
        if not names or not all(layouts):
            return ""
        first = layouts[0] or {}
        shared = {a: n for a, n in first.items() if all(_at(other, {a: n}) for other in layouts)}
        if not shared:
            return ""
        there = {rank for rank, layout in self._by_rank.items() if _at(layout, shared)}
        whole = len(names) > 1 and there == set(names)
        return ("all of " if whole else "") + said(shared)

    def named(self, label: str, names: Sequence[str]) -> str:
        """`label (place)`, or `label` alone when the place is not known."""
        place = self.place(names)
        return f"{label} ({place})" if place else label


def _at(layout: Mapping[str, int] | None, coordinates: Mapping[str, int]) -> bool:
    return layout is not None and all(layout.get(a) == n for a, n in coordinates.items())


NO_LAYOUTS = Layouts()
