"""A whole-job capture's ranks read light: what the answers about a whole job must know
of every rank (status, label, whether it has samples, which capture a report name is)
without loading any rank's stats, trees or time track, so that a 1,024-rank job costs
one small query here and the heavy reads are left to a page of ranks
(profiles.jobs.bounds)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import F, JSONField, QuerySet, Value
from django.db.models.fields.json import KeyTransform

from profiles.models import Capture, CaptureGroup
from runs.models import Host


@dataclass(frozen=True)
class RankRow:
    """One capture of the group, as lists and counts need it."""

    id: int
    status: str
    label: str
    samples: int | None
    """Its stats' `total_samples` (None: not analysed)."""

    @property
    def final(self) -> bool:
        return self.status in Capture.FINAL

    @property
    def has_samples(self) -> bool:
        return self.status != Capture.Status.FAILED and bool(self.samples)

    @property
    def url(self) -> str:
        return capture_url(self.id)


def capture_url(pk: int) -> str:
    """A capture's page (profiles:capture_detail), without a resolver call per rank."""
    return f"/captures/{pk}/"


def ordered(captures: QuerySet[Capture]) -> QuerySet[Capture]:
    """The order of the group page and `processes`: by role, then capture id."""
    return captures.order_by("process__role", "pk")


def page_ids(group: CaptureGroup, page: Any) -> list[int]:
    """The capture ids of a page (profiles.jobs.bounds.Page), in page order. Read apart
    from the page's rows: a query that sorts every rank while reading something of
    their stats reads every rank's stats."""
    ids = ordered(group.captures.all()).values_list("pk", flat=True)
    return list(ids[page.offset : page.offset + page.limit])


def roster(group: CaptureGroup) -> list[RankRow]:
    """Every capture of the group, in page order, without its stats (a dump's ranks
    have no samples: their stats, every dump of the rank, are not even opened)."""
    dump = group.kind == "dump"
    samples = Value(None, JSONField()) if dump else KeyTransform("total_samples", "stats")
    rows = ordered(group.captures.all()).values(
        "pk",
        "status",
        "pid",
        "original_name",
        "host_id",
        host_name=F("host__name"),
        role=F("process__role"),
        samples=samples,
    )
    return [
        RankRow(id=r["pk"], status=r["status"], label=_label(r), samples=_int(r["samples"]))
        for r in rows
    ]


def _label(row: dict[str, Any]) -> str:
    """Capture.target_label of a values() row."""
    if row["host_id"] is None:
        return row["original_name"] or "imported"
    role = f" {row['role']}" if row["role"] else ""
    return f"{row['host_name']}:{row['pid']}{role}"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def status_counts(rows: Iterable[RankRow]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    return counts


REPORT_PARTS = ("classes", "captures", "straggler", "clocks")
"""What the answers that read a page of ranks need of the job report."""


def without_report(groups: QuerySet[CaptureGroup]) -> QuerySet[CaptureGroup]:
    """Groups loaded without their reports (a 1,024-rank report is megabytes, mostly its
    `ranks`), the REPORT_PARTS of the job report read in the database beside them."""
    parts = {f"report_{key}": KeyTransform(key, "job_report") for key in REPORT_PARTS}
    return groups.defer("job_report", "stacks").annotate(**parts)


def report_parts(group: CaptureGroup) -> dict[str, Any]:
    """REPORT_PARTS of the group's stored job report (None each without a report): read
    with the group (`without_report`), else from the report loaded or the database."""
    if all(hasattr(group, f"report_{key}") for key in REPORT_PARTS):
        return {key: getattr(group, f"report_{key}") for key in REPORT_PARTS}
    if "job_report" not in group.get_deferred_fields():
        return {key: (group.job_report or {}).get(key) for key in REPORT_PARTS}
    row = CaptureGroup.objects.filter(pk=group.pk).values(
        *(f"job_report__{k}" for k in REPORT_PARTS)
    )
    found = row.first() or {}
    return {key: found.get(f"job_report__{key}") for key in REPORT_PARTS}


def redaction_captures(*groups: CaptureGroup) -> QuerySet[Capture]:
    """The captures that decide what a viewer may see of these groups' answers: one on
    the flamedeck server itself, if any (profiles.captures.redact hides command lines
    of the server's own processes, and only of those)."""
    return (
        Capture.objects.filter(group__in=groups, host__transport=Host.Transport.LOCAL)
        .select_related("host")
        .only("pk", "host", "host__transport")[:1]
    )
