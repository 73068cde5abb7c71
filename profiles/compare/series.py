"""Share series for the charts: one line per rank, never one line through two ranks.

A capture measures one process. Its series is the process's role (`RunProcess.role`,
e.g. "rank-3"), so a rank keeps its line when the job restarts with new pids. A process
without a role keys by host:pid, an import without a process by its file name. A key
that two captures of one whole-job capture hold names no rank (every process "worker"):
those captures key by host:pid, or stand alone. The whole job is a series of its own:
one point per whole-job capture, the mean of its ranks, its band their range. With many
ranks only a few are shown at first (`pick_shown`): the highest latest share and the
largest change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from statistics import fmean
from typing import Any, Literal, NamedTuple, TypedDict

from django.db import NotSupportedError
from django.db.models import F, Func, JSONField, QuerySet
from django.db.models.fields.json import KT
from django.urls import reverse

from profiles.models import Capture
from profiles.pyspy import compare as engine

JOB = "job"
JOB_NAME = "whole job (mean of ranks)"
DEFAULT_SHOWN = 4
# What a series measures: the step threads' states (the product's words), or a keyword
# set's categories or keywords (a lens the user picks). Each is a stored list and the
# stored count its shares are of.
MEASURE_FIELDS = {"state": "step_threads.states", "category": "categories", "keyword": "keywords"}
MEASURE_KEYS = {"state": "state", "category": "category", "keyword": "keyword"}
MEASURE_TOTALS = {
    "state": "stats__step_threads__samples",
    "category": "stats__total_samples",
    "keyword": "stats__total_samples",
}
SeriesKind = Literal["job", "rank", "state", "category", "keyword"]
_DIGITS = re.compile(r"(\d+)")


class TrendPoint(TypedDict):
    capture: int
    url: str
    at: str
    label: str
    percent: float
    low: float
    high: float
    lag: str | None
    scheduled: bool


class TrendSeries(TypedDict):
    key: str
    name: str
    kind: SeriesKind
    shown: bool
    reason: str
    """Why it is shown at first ("highest latest share", "changed most"), or ""."""
    points: list[TrendPoint]


# --- reads ------------------------------------------------------------------------------


class MeasureSamples(Func):
    """`[[names…], [samples…]]` of a stored stats list (states, categories or keywords), built in
    the database: the lists' callers, most of their size, never reach Python (decoding
    them cost 0.8 ms a capture; on PostgreSQL two jsonpath arrays take a quarter of
    the time of unnesting the list)."""

    output_field = JSONField()
    POSTGRESQL = (
        "jsonb_build_array("
        "jsonb_path_query_array(%(expressions)s, '$.%(list_name)s[*].%(key)s'),"
        " jsonb_path_query_array(%(expressions)s, '$.%(list_name)s[*].samples'))"
    )
    SQLITE = (
        "json_array("
        "(SELECT json_group_array(json_extract(e.value, '$.%(key)s'))"
        " FROM json_each(%(expressions)s, '$.%(list_name)s') AS e),"
        " (SELECT json_group_array(json_extract(e.value, '$.samples'))"
        " FROM json_each(%(expressions)s, '$.%(list_name)s') AS e))"
    )

    def __init__(self, kind: str) -> None:
        super().__init__(F("stats"))
        # Constants of this module, never user input: they go into the SQL text.
        self.names = {"list_name": MEASURE_FIELDS[kind], "key": MEASURE_KEYS[kind]}

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list]:
        return super().as_sql(compiler, connection, template=self.POSTGRESQL, **self.names)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list]:
        return super().as_sql(compiler, connection, template=self.SQLITE, **self.names)

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list]:
        raise NotSupportedError("flamedeck's database is PostgreSQL or SQLite.")


class Measured(NamedTuple):
    """A done capture as a series reads it (a tuple: thousands are read per page)."""

    pk: int
    run_id: int | None
    group_id: int | None
    host_id: int | None
    pid: int | None
    original_name: str
    queued_at: datetime
    finished_at: datetime | None
    scheduled: bool
    role: str | None
    host_name: str | None
    verdict: str | None
    sample_count: int
    measures: list[tuple[str, int]]
    """[name, samples] of the measure's stored list."""


def measured_captures(
    qs: QuerySet[Capture], *, kind: str = "category", limit: int | None = None
) -> list[Measured]:
    """Done captures with samples (the first `limit` of `qs`), with only what a series
    needs: never the whole stats. For states, `sample_count` is the step threads'
    samples, and a capture analysed before step threads were stored has none."""
    rows = (
        qs.filter(status=Capture.Status.DONE)
        .exclude(kind=Capture.Kind.DUMP)
        .annotate(
            role=F("process__role"),
            host_name=F("host__name"),
            verdict=KT("stats__lag__verdict"),
            sample_count=KT(MEASURE_TOTALS[kind]),
            measures=MeasureSamples(kind),
        )
        .values_list(*Measured._fields)
    )
    found = [Measured(*row) for row in rows[:limit]]
    return [
        c._replace(sample_count=int(c.sample_count), measures=_pairs(c.measures))
        for c in found
        if c.sample_count and int(c.sample_count)
    ]


def _pairs(arrays: list[list[Any]] | None) -> list[tuple[str, int]]:
    names, samples = arrays or ([], [])
    return list(zip(names, samples, strict=True))


def share(capture: Measured, kind: str, name: str) -> engine.ShareSide | None:
    """The capture's share of `name` with its 95% interval; None when not measured (a
    keyword set without it). Every sample is in a state: one not stored is 0%."""
    for measure, samples in capture.measures:
        if measure == name:
            return engine.share_side(int(samples), int(capture.sample_count))
    if kind == "state":
        return engine.share_side(0, int(capture.sample_count))
    return None


def measure_names(captures: Iterable[Measured]) -> list[str]:
    """Names measured in these captures, largest mean share first."""
    shares: dict[str, list[float]] = {}
    for capture in captures:
        for name, samples in capture.measures:
            shares.setdefault(name, []).append(int(samples) / int(capture.sample_count))
    return sorted(shares, key=lambda n: (-fmean(shares[n]), n))


# --- keys -------------------------------------------------------------------------------


def series_keys(captures: Sequence[Measured]) -> dict[int, tuple[str, str]]:
    """capture id → (series key, series name)."""
    keys = {c.pk: _key(c) for c in captures}
    clashing = _clashing(captures, keys)
    for c in captures:
        if keys[c.pk][0] in clashing:
            keys[c.pk] = _fallback_key(c, keys[c.pk][1])
    return keys


def _clashing(captures: Iterable[Measured], keys: dict[int, tuple[str, str]]) -> set[str]:
    """Keys that two captures of one whole-job capture hold (e.g. every process has the
    role "worker"): such a key names no rank."""
    seen: set[tuple[int, str]] = set()
    clashing = set()
    for c in captures:
        if c.group_id:
            pair = (c.group_id, keys[c.pk][0])
            if pair in seen:
                clashing.add(pair[1])
            seen.add(pair)
    return clashing


def _key(capture: Measured) -> tuple[str, str]:
    if capture.role:
        return f"role:{capture.role}", capture.role
    if capture.host_id:
        return f"proc:{capture.host_id}:{capture.pid}", f"{capture.host_name}:{capture.pid}"
    name = capture.original_name
    return f"import:{name}", f"imported {name}" if name else "imported"


def _fallback_key(capture: Measured, name: str) -> tuple[str, str]:
    if capture.role and capture.host_id:
        where = f"{capture.host_name}:{capture.pid}"
        return f"proc:{capture.host_id}:{capture.pid}", f"{capture.role} {where}"
    return f"capture:{capture.pk}", f"{name} #{capture.pk}"


def natural(text: str) -> list[Any]:
    """Sort key: rank-2 before rank-10."""
    return [int(p) if p.isdigit() else p for p in _DIGITS.split(text)]


# --- points -----------------------------------------------------------------------------


def capture_point(capture: Measured, side: engine.ShareSide, label: str) -> TrendPoint:
    return {
        "capture": capture.pk,
        "url": reverse("profiles:capture_detail", args=[capture.pk]),
        "at": (capture.finished_at or capture.queued_at).isoformat(),
        "label": label,
        "percent": side["percent"],
        "low": side["low"],
        "high": side["high"],
        "lag": capture.verdict,
        "scheduled": capture.scheduled,
    }


def units(captures: Iterable[Measured]) -> list[list[Measured]]:
    """Captures grouped as taken: every rank of one whole-job capture is one unit."""
    found: dict[object, list[Measured]] = {}
    for capture in captures:
        key = ("g", capture.group_id) if capture.group_id else capture.pk
        found.setdefault(key, []).append(capture)
    return list(found.values())


def unit_point(unit: list[Measured], kind: str, name: str, label: str) -> TrendPoint | None:
    """A capture's point, or a whole-job capture's: the mean of its ranks, the band
    their range, linking to the group page."""
    shares = [(c, s) for c in unit if (s := share(c, kind, name)) is not None]
    if not shares:
        return None
    first, side = shares[0]
    if not first.group_id:
        return capture_point(first, side, label)
    values = [s["percent"] for _, s in shares]
    point = capture_point(first, side, f"whole-job capture #{first.group_id} ({len(values)} ranks)")
    point.update(percent=round(fmean(values), 2), low=min(values), high=max(values))
    point["url"] = reverse("profiles:group_detail", args=[first.group_id])
    point["at"] = min(c.finished_at or c.queued_at for c in unit).isoformat()
    point["lag"] = next((c.verdict for c in unit if c.verdict and c.verdict != "ok"), first.verdict)
    return point


def capture_label(capture: Measured, name: str) -> str:
    return f"#{capture.pk} {name}"


# --- series -----------------------------------------------------------------------------


def new_series(key: str, name: str, kind: SeriesKind) -> TrendSeries:
    return {"key": key, "name": name, "kind": kind, "shown": True, "reason": "", "points": []}


def job_series(captures: Iterable[Measured], kind: str, name: str) -> TrendSeries:
    """One point per whole-job capture (single captures stay out: they are one rank)."""
    series = new_series(JOB, JOB_NAME, "job")
    for unit in units(c for c in captures if c.group_id):
        if (point := unit_point(unit, kind, name, "")) is not None:
            series["points"].append(point)
    return series


def rank_series(captures: Sequence[Measured], kind: str, name: str) -> list[TrendSeries]:
    """One measure, a series per rank plus the whole job's; `captures` in time order."""
    keys = series_keys(captures)
    by_key: dict[str, TrendSeries] = {}
    for capture in captures:
        if (side := share(capture, kind, name)) is None:
            continue
        key, title = keys[capture.pk]
        series = by_key.setdefault(key, new_series(key, title, "rank"))
        series["points"].append(capture_point(capture, side, capture_label(capture, title)))
    job = job_series(captures, kind, name)
    ranks = sorted(by_key.values(), key=lambda s: natural(s["name"]))
    return pick_shown(([job] if job["points"] else []) + ranks)


def measure_series(captures: Sequence[Measured], key: str, kind: str) -> list[TrendSeries]:
    """One rank (or the whole job), a series per state or category (`kind`); `captures`
    in time order."""
    if key == JOB:
        chosen, title = units(c for c in captures if c.group_id), ""
    else:
        keys = series_keys(captures)
        chosen = [[c] for c in captures if keys[c.pk][0] == key]
        title = keys[chosen[0][0].pk][1] if chosen else ""
    found = []
    for name in measure_names(c for unit in chosen for c in unit):
        series = new_series(f"{kind}:{name}", name, "state" if kind == "state" else "category")
        for unit in chosen:
            label = capture_label(unit[0], title)
            if (point := unit_point(unit, kind, name, label)) is not None:
                series["points"].append(point)
        found.append(series)
    return found


def series_names(captures: Sequence[Measured]) -> dict[str, str]:
    """series key → name, the whole job's included when it has whole-job captures."""
    names = {key: name for key, name in series_keys(captures).values()}
    if any(c.group_id for c in captures):
        names[JOB] = JOB_NAME
    return dict(sorted(names.items(), key=lambda kv: (kv[0] != JOB, natural(kv[1]))))


def pick_shown(series: list[TrendSeries], limit: int = DEFAULT_SHOWN) -> list[TrendSeries]:
    """Mark the series drawn at first: the whole job always; with more than `limit` + 1
    ranks, those with the highest latest share and the largest change, alternately."""
    ranks = [s for s in series if s["kind"] == "rank"]
    if len(ranks) <= limit + 1:
        return series
    for s in ranks:
        s["shown"] = False
    worst = sorted(ranks, key=lambda s: -_last(s))
    changed = sorted(ranks, key=lambda s: -abs(_last(s) - s["points"][0]["percent"]))
    picks = [(worst, "highest latest share"), (changed, "changed most")]
    shown = 0
    while shown < limit:
        ordered, reason = picks[shown % 2]
        candidate = next(s for s in ordered if not s["shown"])
        candidate.update(shown=True, reason=reason)
        shown += 1
    return series


def _last(series: TrendSeries) -> float:
    return series["points"][-1]["percent"]
