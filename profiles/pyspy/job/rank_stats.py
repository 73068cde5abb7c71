"""One rank's stored stats, made whole before the job report reads them.

The job report (job/report.py) runs on stats the dashboard stored, maybe by an older version,
maybe of a capture that failed half-way: keys can be missing, null or of the wrong
type. `well_formed` returns a copy in which every key the report reads is present and
of its documented type (types.Stats): a missing count is 0, a missing list is empty,
a thread without `samples` has the sum of its states, rows that are not objects and
states outside state_rules.STATES are dropped. Nothing is invented beyond that, so a
well-formed input comes back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..rules.state_rules import STATES

_KNOWN_STATES = frozenset(STATES)
FRAME_LISTS = ("top_self", "top_total", "uncovered_native")


def well_formed(stats: object) -> dict[str, Any]:
    """`stats` with every key the job report reads present and typed (see the module doc)."""
    if not isinstance(stats, Mapping):
        stats = {}
    threads = [_thread(t) for t in _rows(stats.get("threads"))]
    whole = _count(stats.get("total_samples"))
    return {
        **stats,
        "total_samples": whole or sum(t["samples"] for t in threads),
        "threads": threads,
        "states": _states(stats.get("states")),
        "idle_included": _flag(stats.get("idle_included")),
        "rounds": stats.get("rounds") if _is_count(stats.get("rounds")) else None,
        "thread_functions": [_functions(r) for r in _rows(stats.get("thread_functions"))],
        "lag": stats.get("lag") if isinstance(stats.get("lag"), Mapping) else None,
        # The frame lists tell the wait model whether a rank shows CUDA or NCCL frames.
        **{key: _frames(stats.get(key)) for key in FRAME_LISTS},
    }


def _thread(thread: Mapping[str, Any]) -> dict[str, Any]:
    states = _states(thread.get("states"))
    active = thread.get("active_percent")
    return {
        **thread,
        "name": _text(thread.get("name")),
        "tid": _tid(thread.get("tid")),
        "pid": thread.get("pid") if _is_count(thread.get("pid")) else None,
        "samples": max(_count(thread.get("samples")), sum(s["samples"] for s in states)),
        "percent": _number(thread.get("percent")),
        "states": states,
        "active_percent": _number(active) if active is not None else None,
    }


def _states(rows: object) -> list[dict[str, Any]]:
    return [_state(r) for r in _rows(rows) if r.get("state") in _KNOWN_STATES]


def _state(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "samples": _count(row.get("samples")),
        "percent": _number(row.get("percent")),
        "user_callers": _frames(row.get("user_callers")),
    }


def _functions(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "thread": _text(row.get("thread")),
        "tid": _tid(row.get("tid")),
        "samples": _count(row.get("samples")),
        "functions": [
            {**f, "function": _text(f.get("function")), "frame": _text(f.get("frame")),
             "samples": _count(f.get("samples"))}
            for f in _rows(row.get("functions"))
        ],
    }  # fmt: skip


def _frames(rows: object) -> list[dict[str, Any]]:
    return [
        {**r, "frame": _text(r.get("frame")), "samples": _count(r.get("samples")),
         "percent": _number(r.get("percent"))}
        for r in _rows(rows)
    ]  # fmt: skip


def _rows(value: object) -> list[Mapping[str, Any]]:
    return [r for r in value if isinstance(r, Mapping)] if isinstance(value, list) else []


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _count(value: object) -> int:
    return value if _is_count(value) else 0  # type: ignore[return-value]


def _number(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        return value  # type: ignore[return-value]
    return 0.0


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _tid(value: object) -> int | str:
    return value if isinstance(value, str) or _is_count(value) else ""  # type: ignore[return-value]


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None
