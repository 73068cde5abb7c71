"""A whole-job capture's ranks on one clock (`GET /api/groups/<id>/timeline/`), a page
of ranks at a time (profiles.jobs.bounds).

Every rank's host clock is moved by the offset measured when its session started
(profiles.pyspy.timed.timeline.aligned_timelines), and the buckets cover the whole job's
span (each rank's first and last sample, as its analysis stored them), so every page
has the same `start` and buckets and the page can ask for more ranks later. Only the
page's ranks' time tracks are read.

Which ranks, in which order: `?ranks=` (names) or `?class=` (an index into the stored
report's classes), else every rank in capture order; when they do not fit one page,
the straggler and one rank of each class lead, so the first page shows every kind of
rank. Ranks without time on the page are listed under `missing` with the reason.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import F
from django.db.models.fields.json import KeyTransform

from config.params import parse_int
from profiles.captures.timelines import NoTime, timed_capture
from profiles.jobs import bounds, roster
from profiles.jobs.selectors import class_representatives
from profiles.models import Capture, CaptureGroup
from profiles.pyspy.timed import aligned_timelines, rank_strip

TIME_KEYS = ("available", "start", "end", "rate")
MOST = bounds.TIMELINE_MAX_RANKS


def _rows(group: CaptureGroup) -> list[dict[str, Any]]:
    """Every capture of the group in capture order, without its stats."""
    rows = group.captures.order_by("pk").values(
        "pk",
        "kind",
        "status",
        "pid",
        "time_file",
        role=F("process__role"),
        offset=KeyTransform("clock_offset_s", "progress"),
    )
    return [{**row, "name": row["role"] or f"pid {row['pid']}"} for row in rows]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _offset(row: dict[str, Any]) -> float:
    return float(row["offset"]) if _number(row["offset"]) else 0.0


def job_span(group: CaptureGroup, report: dict[str, Any]) -> tuple[float, float, float] | None:
    """(first sample, last sample, lowest rate) over every rank that keeps time, on the
    reference clock; None when none does. From the clocks the stored report keeps
    (profiles.jobs.report.rank_clocks), else from every rank's stats (a report not
    stored yet: the ranks' stats are read in the database, a few keys each)."""
    clocks = report.get("clocks")
    if clocks is None:
        clocks = _stored_clocks(group)
    clocks = [c for c in clocks.values() if len(c) == 4 and all(_number(v) for v in c)]
    if not clocks:
        return None
    return (
        min(start + offset for start, _, _, offset in clocks),
        max(end + offset for _, end, _, offset in clocks),
        min(rate for _, _, rate, _ in clocks),
    )


def _stored_clocks(group: CaptureGroup) -> dict[int, list[Any]]:
    """Capture id -> [start, end, rate, offset] of the done ranks whose time is there."""
    time = {f"time_{k}": KeyTransform(k, KeyTransform("time", "stats")) for k in TIME_KEYS}
    rows = group.captures.filter(kind=Capture.Kind.RECORD, status=Capture.Status.DONE).values(
        "pk", offset=KeyTransform("clock_offset_s", "progress"), **time
    )
    return {
        row["pk"]: [row["time_start"], row["time_end"], row["time_rate"], _offset(row)]
        for row in rows
        if row["time_available"] is True
    }


# `?class=`'s bounds as a number (the schema's); past the report's classes is a 409.
CLASS_MAX = 2**31 - 1


# `?ranks=`: at most MOST comma-separated names (empty ones included).
RANKS_PATTERN = rf"^[^,]*(?:,[^,]*){{0,{MOST - 1}}}$"


class NoSuchRank(LookupError):
    """`?ranks=` names a rank the whole-job capture does not have (404)."""


class NotInReport(Exception):
    """A class of ranks the stored report does not have (yet): the report's state
    refuses the request, not its form (409)."""


def selection(rows: list[dict[str, Any]], report: dict[str, Any], params: Any) -> list[int]:
    """The capture ids asked for, in order (module doc); ValidationError on a bad ask."""
    ids = report.get("captures") or {}
    known = {row["pk"] for row in rows}
    if params.get("ranks"):
        if params["ranks"].count(",") >= MOST:  # counted as sent: RANKS_PATTERN
            raise ValidationError({"ranks": f"at most {MOST} ranks at once"})
        names = [n.strip() for n in params["ranks"].split(",") if n.strip()]
        by_name = {**{row["name"]: row["pk"] for row in rows}, **ids}
        unknown = [n for n in names if by_name.get(n) not in known]
        if unknown:
            raise NoSuchRank(f"ranks: no rank named {unknown[0][:100]!r} in this capture")
        return list(dict.fromkeys(by_name[n] for n in names))
    if "class" in params:
        index = parse_int(params["class"], name="class", minimum=0, maximum=CLASS_MAX)
        classes = report.get("classes") or []
        if not classes:
            raise NotInReport("class: no classes of ranks yet (the report is not stored)")
        if index >= len(classes):
            raise NotInReport(f"class: the report has {len(classes)} classes of ranks")
        members = {ids[n] for n in classes[index].get("ranks") or [] if n in ids}
        return [row["pk"] for row in rows if row["pk"] in members]
    order = [row["pk"] for row in rows]
    if len(order) <= bounds.page_from(params, len(order), most=MOST).limit:
        return order
    straggler = ids.get((report.get("straggler") or {}).get("name") or "")
    return bounds.lead_order(
        order, [straggler, *(pk for pk, _, _ in class_representatives(report))]
    )


def group_timeline(group: CaptureGroup, bucket_s: float | None, params: Any) -> dict[str, Any]:
    """A page of the whole job's ranks on one clock (module doc)."""
    rows = _rows(group)
    report = roster.report_parts(group)
    chosen = selection(rows, report, params)
    page = bounds.page_from(params, len(chosen), most=MOST)
    by_pk = {row["pk"]: row for row in rows}
    shown = [by_pk[pk] for pk in page.of(chosen)]
    span = job_span(group, report)
    ranks, missing = _read(group, shown)
    if not ranks and span is None:
        raise NoTime("no rank of this whole-job capture has a timeline")
    tracks = [(row["name"], timed, _offset(row)) for row, timed in ranks]
    aligned = dict(aligned_timelines(tracks, bucket_s, span=span))
    devices = _devices(group, [row["pk"] for row, _ in ranks])
    for line, (row, timed) in zip(aligned["ranks"], ranks, strict=True):
        line["capture"] = row["pk"]
        line["clock"] = [timed.track.start, timed.track.end]
        # Its device on the same buckets, its GPUs averaged: one short series a rank.
        line["device"] = rank_strip(devices.get(row["pk"]), aligned, _offset(row))
    aligned["missing"] = missing
    aligned["page"] = page.as_json()
    aligned["classes"] = [
        {"label": str(c.get("label") or ""), "ranks": len(c.get("ranks") or [])}
        for c in report.get("classes") or []
    ]
    return aligned


def _devices(group: CaptureGroup, pks: list[int]) -> dict[int, Any]:
    """The GPU series of the page's ranks (at most TIMELINE_MAX_RANKS), read in one query."""
    rows = group.captures.filter(pk__in=pks, gpu_samples__isnull=False)
    return dict(rows.values_list("pk", "gpu_samples"))


def _read(group: CaptureGroup, shown: list[dict[str, Any]]) -> tuple[list, list]:
    """(row, its timed capture) of the shown ranks that keep time, and the others as
    `missing` rows with the reason."""
    wanted = [row["pk"] for row in shown if row["kind"] == Capture.Kind.RECORD
              and row["status"] == Capture.Status.DONE]  # fmt: skip
    reason = KeyTransform("reason", KeyTransform("time", "stats"))
    captures = group.captures.defer("stats", "gpu_samples").annotate(time_reason=reason)
    captures = {c.pk: c for c in captures.filter(pk__in=wanted)}
    ranks, missing = [], []
    for row in shown:
        capture = captures.get(row["pk"])
        if capture is None:
            missing.append({"name": row["name"], "capture": row["pk"], "reason": row["status"]})
            continue
        if not capture.time_file:
            reason = capture.time_reason or "this capture keeps no time"
            missing.append({"name": row["name"], "capture": row["pk"], "reason": reason})
            continue
        try:
            ranks.append((row, timed_capture(capture, text=False)))
        except NoTime as exc:
            missing.append({"name": row["name"], "capture": row["pk"], "reason": str(exc)})
    return ranks, missing
