"""Reads for runs and their processes."""

from typing import Any

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from django.urls import reverse

from config.params import parse_id

from . import capture_settings
from .models import Host, Run, RunProcess


def run_for_user(*, user, pk: int) -> Run:
    """The run a page shows, or 404. Every logged-in user may see every run; this is
    where a rule would go."""
    return get_object_or_404(
        Run.objects.select_related("created_by").prefetch_related("tags"), pk=pk
    )


def host_for_user(*, user, pk: int) -> Host:
    """The host a page shows, or 404 (every logged-in user sees every host)."""
    return get_object_or_404(Host, pk=pk)


def host_by_id_or_name(value: object) -> Host | None:
    """The host named by a JSON value: its id (a number) or its name."""
    text = (
        str(value).strip() if isinstance(value, int | str) and not isinstance(value, bool) else ""
    )
    if not text:
        return None
    by_name = Host.objects.filter(name=text).first()
    if by_name is not None:
        return by_name
    try:
        pk = parse_id(text, name="host")
    except ValidationError:  # not an id ("²", "-1", 2^63): only a name could match
        return None
    return Host.objects.filter(pk=pk).first()


def run_processes(*, run: Run) -> list[RunProcess]:
    return list(run.processes.select_related("host", "launch"))


def current_processes(*, run: Run) -> list[RunProcess]:
    """The current process of each role: those no later launch replaced (runs.launches)."""
    return [p for p in run_processes(run=run) if not p.replaced]


def capturable_processes(*, run: Run) -> tuple[list[RunProcess], list[RunProcess]]:
    """(to capture, skipped) among the current processes: those whose last check found
    them exited are skipped; never-checked or unknown ones are tried. Replaced
    processes (earlier launches) are neither."""
    processes = current_processes(run=run)
    return [p for p in processes if not p.exited], [p for p in processes if p.exited]


def process_json(process: RunProcess) -> dict[str, Any]:
    return {
        "id": process.pk,
        "host": process.host.name,
        "host_id": process.host_id,
        "pid": process.pid,
        "role": process.role,
        "alive": process.alive,
        "checked_at": process.checked_at,
        "launch": process.launch.number if process.launch_id else None,
        "replaced_at": process.replaced_at,
        "replaced_by": process.replaced_by_id,
        "layout": process.layout,
    }


def capture_all_plan(*, run: Run) -> dict[str, Any]:
    """What "Capture all" will touch: counts of processes and hosts, and who is skipped."""
    return _plan(run_processes(run=run))


def _plan(processes: list[RunProcess]) -> dict[str, Any]:
    processes = [p for p in processes if not p.replaced]  # earlier launches: history
    live = [p for p in processes if not p.exited]
    return {
        "processes": len(live),
        "hosts": len({p.host_id for p in live}),
        "skipped": [process_json(p) for p in processes if p.exited],
    }


def capture_settings_for(run: Run | None, *, job: bool) -> dict[str, Any]:
    """What a capture of the run starts with: the settings "Capture all" remembered on
    it, over a whole-job capture's defaults (`job`) or a one-process capture's. The
    capture buttons and the "Capture all" dialog open with these."""
    remembered = run.capture_settings if run is not None else {}
    return {
        name: remembered.get(name, default)
        for name, default in capture_settings.defaults(job=job).items()
    }


def capture_all_dialog(*, run: Run, processes: list[RunProcess]) -> dict[str, Any]:
    """What the "Capture all" dialog opens with: the run's remembered settings and
    what it will touch (from the cached liveness; the dialog refreshes it)."""
    return {
        "captureUrl": reverse("api:run_capture_all", args=[run.pk]),
        "runUrl": reverse("api:run_detail", args=[run.pk]),
        "checkUrl": reverse("api:run_check", args=[run.pk]),
        "settings": {
            name: value
            for name, value in capture_settings_for(run, job=True).items()
            if name in capture_settings.names("record")  # a whole-job capture records
        },
        "plan": _plan(processes),
    }
