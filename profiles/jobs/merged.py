"""The whole job's merged flamegraph (`GET /api/groups/<id>/flamegraph/`): each process's
stored tree under a node of its own, read from the trees the analysis stored.

A tree is read per process shown, so the answer reads at most FLAMEGRAPH_PROCESSES of
them (profiles.jobs.bounds): every process of a job that has no more, the processes
asked for (`?capture=`), or, for a larger job, one rank of each class of its stored
report (classes first: the ranks of a class behave alike), each under a node that
names its class and how many ranks it stands for; every class then weighs one rank.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from profiles import pyspy
from profiles.captures import selectors
from profiles.jobs import bounds, roster
from profiles.jobs.selectors import class_representatives
from profiles.models import Capture, CaptureGroup
from profiles.storage import files as capture_files

MAX_NODES = 8192


def _trees(group: CaptureGroup) -> QuerySet[Capture]:
    """The group's captures that have a stored tree, in page order, read light."""
    light = ("pk", "group", "pid", "original_name", "flamegraph_file", "host", "host__name",
             "process", "process__role")  # fmt: skip
    captures = group.captures.select_related("host", "process").only(*light)
    return roster.ordered(captures.exclude(flamegraph_file=""))


def group_flamegraph(group: CaptureGroup, only: set[int] | None = None) -> dict[str, Any]:
    """The merged tree of `only` (capture ids), else of the whole job (module doc)."""
    captures = _trees(group)
    if only:
        return selectors.group_flamegraph(captures=list(captures.filter(pk__in=only)))
    if captures.count() <= bounds.FLAMEGRAPH_PROCESSES:
        return selectors.group_flamegraph(captures=list(captures))
    report = roster.report_parts(group)
    chosen = class_representatives(report)
    if not chosen:  # no report yet: the first processes, said so at the root
        tree = selectors.group_flamegraph(captures=list(captures[: bounds.FLAMEGRAPH_PROCESSES]))
        return {**tree, "name": f"job: its first {bounds.FLAMEGRAPH_PROCESSES} processes"}
    return _by_class(captures, chosen)


def _by_class(captures: QuerySet[Capture], chosen: list[tuple[int, int, str]]) -> dict[str, Any]:
    """One node per class of ranks: its representative's tree, named for the class."""
    found = {c.pk: c for c in captures.filter(pk__in=[pk for pk, _, _ in chosen])}
    children = []
    for number, (pk, alike, label) in enumerate(chosen, 1):
        capture = found.get(pk)
        tree = capture_files.read_flamegraph(capture) if capture else None
        if tree is None:
            continue
        ranks = f"{alike} rank{'s' if alike != 1 else ''}"
        name = f"class {number} ({ranks}, process {capture.target_label} shown): {label}"
        children.append({**tree, "name": name})
    total = sum(child["value"] for child in children)
    root = {"name": "job: one rank of each class", "value": total, "children": children}
    return pyspy.prune_flamegraph(root, MAX_NODES)
