"""A run is one training job across its launches.

A team fixes, relaunches and checks the same job under the same run name. Each launch
gets a `Launch` (numbered from 1); its ranks register into it. When a role the run
already has registers from another PID, the old process is retired (kept, with its
captures, marked `replaced_at`/`replaced_by`) when it has exited or when the launch
differs: both sent a launch key (`TORCHELASTIC_RUN_ID`, or `FLAMEDECK_LAUNCH` when set)
and the keys differ. Without a key, a launch begins when a role of the newest launch
registers again after its process exited. "Capture all", "Dump all ranks" and
schedules then take only the current process of each role (runs.selectors).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from .models import Host, Launch, Run, RunProcess

MAX_KEY = 200


def launch_key(value: object) -> str:
    """The launch key a rank sent, cleaned: torchrun's "none" (no rdzv id) means none."""
    text = value.strip()[:MAX_KEY] if isinstance(value, str) else ""
    return "" if text.lower() in ("", "none") else text


def role_holders(*, run: Run, role: str, host: Host, pid: int) -> list[RunProcess]:
    """The current processes of `role` in the run other than host:pid (none without a
    role, or when host:pid is already attached: that is a repeat registration)."""
    if not role or run.processes.filter(host=host, pid=pid).exists():
        return []
    current = run.processes.filter(role=role, replaced_at__isnull=True)
    return list(current.select_related("host", "launch"))


def latest_launch(run: Run) -> Launch | None:
    return run.launches.order_by("-number").first()


@dataclass(frozen=True)
class Registered:
    """The registered process, whether it is new, and the processes it retired."""

    process: RunProcess
    created: bool
    retired: list[RunProcess]


def register_process(
    *,
    run: Run,
    host: Host,
    pid: int,
    role: str,
    key: str,
    state: dict[str, Any],
    layout: dict[str, int] | None = None,
) -> Registered:
    """Attach host:pid with `role` to the launch it belongs to, retiring the processes
    it replaces (module doc). `state` is its liveness (`alive`, `checked_at`); `layout`
    its place in the job's parallel layout, if it said (a repeat registration that says
    it sets it: the job built its mesh after the first). Ranks of one run register one
    at a time (a row lock on the run), so two ranks of a new launch never open two
    launches."""
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=run.pk).first()
        process = RunProcess.objects.filter(run=run, host=host, pid=pid).first()
        if process is not None:
            return Registered(_refresh(process, role, state, layout), False, [])
        holders = list(
            run.processes.filter(role=role, replaced_at__isnull=True).select_related("launch")
            if role
            else []
        )
        launch = _launch_for(run, key, holders)
        process = RunProcess.objects.create(
            run=run, host=host, pid=pid, role=role, launch=launch, layout=layout, **state
        )
        retired = [p for p in holders if _replaced(p, launch)]
        now = timezone.now()
        RunProcess.objects.filter(pk__in=[p.pk for p in retired]).update(
            replaced_at=now, replaced_by=process
        )
        return Registered(process, True, retired)


def _refresh(
    process: RunProcess, role: str, state: dict[str, Any], layout: dict[str, int] | None
) -> RunProcess:
    process.role = process.role or role
    if state["checked_at"] is not None:
        process.alive, process.checked_at = state["alive"], state["checked_at"]
    process.layout = layout or process.layout
    process.save(update_fields=["role", "alive", "checked_at", "layout"])
    return process


def _launch_for(run: Run, key: str, holders: list[RunProcess]) -> Launch:
    if key:
        return run.launches.filter(key=key).first() or _new_launch(run, key)
    latest = latest_launch(run)
    relaunched = any(p.exited and p.launch_id == getattr(latest, "pk", None) for p in holders)
    return _new_launch(run, "") if latest is None or relaunched else latest


def _new_launch(run: Run, key: str) -> Launch:
    number = (run.launches.aggregate(n=Max("number"))["n"] or 0) + 1
    return Launch.objects.create(run=run, number=number, key=key)


def _replaced(holder: RunProcess, launch: Launch) -> bool:
    """Retire a holder that has exited, or that belongs to another keyed launch."""
    other_key = holder.launch is not None and holder.launch.key and holder.launch_id != launch.pk
    return holder.exited or bool(other_key and launch.key)


# --- reads: the run page's timeline ---


def launch_timeline(*, run: Run, now: datetime | None = None) -> list[dict[str, Any]]:
    """The run's launches, oldest first: number, key, start (first process attached),
    end (the last of its processes exited or was replaced; None while one may run),
    roles, and `groups` (empty here: profiles.captures.selectors.launch_groups adds the whole-job
    captures of its processes; runs never reads profiles), with positions in percent of
    the span from the first launch's start to now (or the last end) for the timeline."""
    launches = list(run.launches.prefetch_related("processes"))
    if not launches:
        return []
    rows = [_launch_row(launch) for launch in launches]
    now = now or timezone.now()
    first = min(r["start"] for r in rows)
    last = max([now if r["end"] is None else r["end"] for r in rows])
    span = max((last - first).total_seconds(), 1.0)

    def at(moment: datetime) -> float:
        return round(100 * (moment - first).total_seconds() / span, 2)

    for row in rows:
        row["x"] = at(row["start"])
        row["width"] = max(1.0, round(at(row["end"] or last) - row["x"], 2))
        for group in row["groups"]:
            group["x"] = at(group["created_at"])
    return rows


def _launch_row(launch: Launch) -> dict[str, Any]:
    processes = list(launch.processes.all())
    start = min((p.created_at for p in processes), default=launch.created_at)
    ends = [p.replaced_at or (p.checked_at if p.exited else None) for p in processes]
    ended = bool(processes) and all(ends)
    return {
        "pk": launch.pk,
        "number": launch.number,
        "key": launch.key,
        "label": f"launch {launch.number}",
        "start": start,
        "end": max(ends) if ended else None,
        "roles": sorted({p.role for p in processes if p.role}),
        "processes": len(processes),
        "groups": [],
    }


def launch_starts(*, run: Run) -> list[dict[str, Any]]:
    """Where each launch begins (its first process attached), for marking the boundaries
    between launches on a chart; empty for a run of one launch."""
    rows = list(
        run.launches.annotate(start=Min("processes__created_at")).values_list(
            "number", "start", "created_at"
        )
    )
    if len(rows) < 2:
        return []
    return [
        {"number": number, "label": f"launch {number}", "start": (start or made).isoformat()}
        for number, start, made in rows
    ]


def launch_labels(processes: list[RunProcess]) -> dict[int, str]:
    """Per process id: "launch N" when these processes span more than one launch."""
    launches = {p.launch_id for p in processes}
    if len(launches) < 2:
        return {}
    return {p.pk: (f"launch {p.launch.number}" if p.launch_id else "attached") for p in processes}
