"""Writes and outside-world actions for hosts, runs and their processes."""

import shutil
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from config.params import parse_pid
from runs import remote

from . import launches
from .audit import host_changes, recording_as
from .models import Host, Run, RunProcess, Tag, validate_library_paths, validate_step_threads
from .permissions import OPERATOR_HOST_FIELDS, can_administer_hosts

LOCAL_OFF = "local hosts are turned off on this server (FLAMEDECK_LOCAL_HOST=0)"


def host_target(host: Host) -> remote.Target:
    """The remote-execution view of a host (the one place Host meets the seam).

    A row saved before validation existed (or edited in SQL) raises RemoteError with
    cause `host_config`, naming the field, instead of crashing a command later.
    """
    if host.is_local and not settings.FLAMEDECK_LOCAL_HOST:
        raise remote.RemoteError("host_config", LOCAL_OFF, transient=False)
    target = remote.Target(
        transport=host.transport,
        address=host.address,
        port=host.port,
        username=host.username,
        exec_prefix=host.exec_prefix,
        py_spy=host.py_spy or "py-spy",
        sudo=host.sudo,
        ssh_config=settings.FLAMEDECK_SSH_CONFIG,
        known_hosts=settings.FLAMEDECK_KNOWN_HOSTS,
        connect_timeout_s=settings.FLAMEDECK_SSH_CONNECT_TIMEOUT_S,
    )
    remote.check_target(target)  # the command builder's own checks, same words
    try:  # the model's validators (the same checks, plus field lengths and choices)
        host.clean_fields(
            exclude=[f.name for f in Host._meta.fields if f.name not in Host.COMMAND_FIELDS]
        )
    except ValidationError as exc:
        reasons = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
        message = f"the host's settings are invalid: {reasons}; fix it on the host's Edit page"
        raise remote.RemoteError("host_config", message, transient=False) from None
    return target


def host_save(*, host: Host, user: AbstractBaseUser | None, via: str | None = None) -> Host:
    """Validate and save a host; record who changed which command fields.

    Creating a host or changing anything but its notes needs the host-admin
    permission (`user=None` is the shell: bootstrap, management commands). From the web
    a local host's exec prefix and py-spy path are fixed, and none exists with
    FLAMEDECK_LOCAL_HOST off. `via` (web, api, admin) defaults to "web" for a user and
    "shell" without one.
    """
    via = via or ("web" if user is not None else "shell")
    before = Host.objects.filter(pk=host.pk).first() if host.pk else None
    admin_only = [f for f in host_changes(before, host) if f not in OPERATOR_HOST_FIELDS]
    if user is not None and (before is None or admin_only) and not can_administer_hosts(user):
        raise PermissionDenied(
            "Creating hosts and changing how they are reached is for host admins."
        )
    if host.is_local:
        _check_local(host, before, from_web=user is not None)
    host.full_clean()
    with transaction.atomic(), recording_as(user, via):
        host.save()  # runs.audit records the change
    return host


def _check_local(host: Host, before: Host | None, *, from_web: bool) -> None:
    if not settings.FLAMEDECK_LOCAL_HOST:
        raise ValidationError({"transport": LOCAL_OFF})
    if not from_web:
        return
    # The server's own commands: their wrapper and py-spy are set by bootstrap only.
    was_local = before is not None and before.is_local
    prefix = before.exec_prefix if was_local else ""
    py_spy = before.py_spy if was_local else _bundled_py_spy()
    if host.exec_prefix != prefix:
        raise ValidationError({"exec_prefix": "A local host's exec prefix is not editable here."})
    if host.py_spy not in (py_spy, "py-spy", ""):
        raise ValidationError({"py_spy": "A local host's py-spy path is not editable here."})
    host.py_spy = py_spy


def host_check(*, host: Host) -> dict[str, Any]:
    """Test the connection: ssh, py-spy and its version, ptrace, Python processes.

    Failures come back inside the result (`cause`, `error`), never raised; a local
    host on a server with local hosts off is refused (ValidationError).
    """
    if host.is_local and not settings.FLAMEDECK_LOCAL_HOST:
        raise ValidationError({"host": LOCAL_OFF})
    try:
        result = remote.check_host(host_target(host)).as_dict()
    except remote.RemoteError as exc:  # settings saved before validation existed
        result = remote.HostCheck(ssh_ok=False, cause=exc.cause, error=exc.message).as_dict()
    result["ok"] = bool(result["ssh_ok"]) and bool(result["py_spy_version"])
    host.last_check = result
    host.last_checked_at = timezone.now()
    host.save(update_fields=["last_check", "last_checked_at"])
    return result


def tags_from_text(text: str) -> list[Tag]:
    """Tags named in a comma- or space-separated string, created when new."""
    names = {slugify(part) for part in text.replace(",", " ").split()}
    return [Tag.objects.get_or_create(name=name)[0] for name in sorted(names) if name]


@transaction.atomic
def run_create(
    *,
    user: AbstractBaseUser | None,
    name: str,
    description: str = "",
    tags: str = "",
    status: str = Run.Status.RUNNING,
) -> Run:
    run = Run.objects.create(
        name=name,
        description=description,
        status=status,
        created_by=user,
        started_at=timezone.now() if status == Run.Status.RUNNING else None,
    )
    run.tags.set(tags_from_text(tags))
    return run


def run_library_paths_save(*, run: Run, library_paths: str) -> Run:
    """Store what the run's analyses count as library code (applies to new analyses)."""
    validate_library_paths(library_paths)
    run.library_paths = library_paths
    run.save(update_fields=["library_paths"])
    return run


def run_step_threads_save(*, run: Run, step_threads: str) -> Run:
    """Store which threads the whole-job report reads as the step (new reports use it)."""
    validate_step_threads(step_threads)
    run.step_threads = step_threads
    run.save(update_fields=["step_threads"])
    return run


@dataclass(frozen=True)
class Attached:
    """One process attached to a run: the row, whether it is new, and any warning
    (the host could not be asked whether the PID runs)."""

    process: RunProcess
    created: bool
    warning: str = ""


def run_process_attach(*, run: Run, host: Host, pid: int, role: str = "") -> Attached:
    """Attach one process after checking on its host that it runs (see below)."""
    return run_processes_attach(run=run, host=host, processes=[(pid, role)])[0]


def run_processes_attach(
    *, run: Run, host: Host, processes: list[tuple[int, str]]
) -> list[Attached]:
    """Attach (pid, role) pairs of one host to the run, with one liveness check.

    A PID the host says is not running is refused (ValidationError naming it);
    when the host cannot be asked, the processes are attached with a warning.
    An already attached host+pid comes back as it is (`created` False), keeping its
    role unless it had none.
    """
    pids = [parse_pid(pid) for pid, _ in processes]
    alive, warning = _alive_or_warning(host, pids)
    if alive is not None and (gone := [pid for pid in pids if pid not in alive]):
        raise ValidationError({"pid": _not_running(host, gone)})
    now = timezone.now()
    state = {"alive": None if alive is None else True, "checked_at": None if alive is None else now}
    return [
        _attach_one(run, host, pid, role.strip()[:100], state, warning)
        for pid, (_, role) in zip(pids, processes, strict=True)
    ]


def _not_running(host: Host, pids: list[int]) -> str:
    listed = ", ".join(map(str, pids))
    return (
        f"no running process {listed} on {host.name}: it has exited or never ran there "
        "(PIDs are per host, and per container behind an exec prefix)"
    )


def _attach_one(run: Run, host: Host, pid: int, role: str, state: dict, warning: str) -> Attached:
    process, created = RunProcess.objects.get_or_create(
        run=run, host=host, pid=pid,
        defaults={"role": role, "launch": launches.latest_launch(run), **state},
    )  # fmt: skip
    if not created:
        process.role = process.role or role
        if state["checked_at"] is not None:
            process.alive, process.checked_at = state["alive"], state["checked_at"]
        process.save(update_fields=["role", "alive", "checked_at"])
    return Attached(process, created, warning)


def _alive_or_warning(host: Host, pids: list[int]) -> tuple[set[int] | None, str]:
    try:
        target = host_target(host)
    except remote.RemoteError as exc:  # unusable settings: nothing to attach to
        raise ValidationError({"host": host_problem(host, exc)}) from None
    return _ask(target, host.name, pids)


def host_problem(host: Host, exc: remote.RemoteError) -> str:
    """One line for a host that cannot be asked at all: its name, the cause and the fix."""
    return f"host {host.name} cannot be used ({exc.cause}): {exc.message}"


def _ask(target: remote.Target, name: str, pids: list[int]) -> tuple[set[int] | None, str]:
    # No database access here: this runs in worker threads.
    try:
        return remote.alive_pids(target, pids), ""
    except remote.RemoteError as exc:
        return None, f"could not check that the process runs on {name}: {exc.message}"


def run_register(
    *,
    user: AbstractBaseUser | None,
    run_name: str,
    host: Host,
    pid: int,
    role: str = "",
    launch: str = "",
    layout: dict[str, int] | None = None,
) -> tuple[Run, Attached, bool]:
    """A launcher's rank registers itself: get or create the run by name, attach
    (host, pid, role). Idempotent. Returns (run, attached, run_created).

    The PID is checked on its host first, as an attach is: the caller may have sent
    the wrong one (a container's PID to a host without its exec prefix, a launcher's
    own). One the host says is not running is refused (ValidationError naming it,
    before any run is made); when the host cannot be asked, the process is attached
    with `alive` unknown and a warning, never shown as running.

    Ranks register at the same instant; `Run.register_key` is unique, so they all
    land in one run. The first registration is the run's start; a live rank
    registering to a run that had ended starts it again.

    A run is the job across its launches (runs.launches): `launch` is the key the
    rank sent; a role the run already has from another PID retires that process when
    it has exited (asked on its host first) or belongs to another launch. `layout`:
    the rank's place in the job's parallel layout (profiles.pyspy.job.layout), validated
    by the caller.
    """
    pid, role = parse_pid(pid), role.strip()[:100]
    alive, warning = _alive_or_warning(host, [pid])
    if alive is not None and pid not in alive:
        raise ValidationError({"pid": _not_running(host, [pid])})
    run, run_created = _run_for_registration(user, run_name)
    holders = launches.role_holders(run=run, role=role, host=host, pid=pid)
    if holders:  # fresh liveness: an exited holder is retired, a running one stays
        run_processes_check(processes=[p for p in holders if not p.exited])
    if run.started_at is None or run.status != Run.Status.RUNNING:
        run.started_at = run.started_at or timezone.now()
        run.status, run.ended_at = Run.Status.RUNNING, None
        run.save(update_fields=["started_at", "status", "ended_at"])
    checked = alive is not None
    state = {"alive": True if checked else None, "checked_at": timezone.now() if checked else None}
    registered = launches.register_process(
        run=run,
        host=host,
        pid=pid,
        role=role,
        key=launches.launch_key(launch),
        state=state,
        layout=layout,
    )
    return run, Attached(registered.process, registered.created, warning), run_created


def _run_for_registration(user: AbstractBaseUser | None, name: str) -> tuple[Run, bool]:
    found = Run.objects.filter(register_key=name).first()
    found = found or Run.objects.filter(name=name).order_by("-created_at").first()
    if found is not None:
        return found, False
    try:
        with transaction.atomic():
            run = Run.objects.create(
                name=name, register_key=name, created_by=user, started_at=timezone.now(),
                description="Created when its first process registered (POST /api/register/).",
            )  # fmt: skip
        return run, True
    except IntegrityError:  # another rank created it a moment ago
        return Run.objects.get(register_key=name), False


def run_processes_check(*, processes: list[RunProcess]) -> dict[int, str]:
    """Ask each host, at once and with a short bound, which of its processes still
    run; store `alive`/`checked_at` on the rows. Returns {host id: why it could not
    be asked} for hosts that did not answer (their rows keep their last state)."""
    by_host: dict[int, list[RunProcess]] = defaultdict(list)
    for process in processes:
        by_host[process.host_id].append(process)
    errors: dict[int, str] = {}
    asks = {}
    for host_id, rows in by_host.items():
        try:
            asks[host_id] = (host_target(rows[0].host), rows[0].host.name, [p.pid for p in rows])
        except remote.RemoteError as exc:  # unusable settings: report, ask the others
            errors[host_id] = host_problem(rows[0].host, exc)
    if not asks:
        return errors
    with ThreadPoolExecutor(max_workers=min(16, len(asks))) as pool:
        answers = dict(zip(asks, pool.map(lambda a: _ask(*a), asks.values()), strict=True))
    now = timezone.now()
    for host_id, (alive, error) in answers.items():
        if alive is None:
            errors[host_id] = error
            continue
        for process in by_host[host_id]:
            process.alive, process.checked_at = process.pid in alive, now
        RunProcess.objects.bulk_update(by_host[host_id], ["alive", "checked_at"])
    runs_end_when_every_process_exited(run_ids={p.run_id for p in processes}, now=now)
    return errors


def runs_end_when_every_process_exited(*, run_ids: set[int], now: Any = None) -> int:
    """Mark "finished" each running run of `run_ids` whose every process was last
    found exited (one unknown or running process keeps it running). Returns how many."""
    running = Run.objects.filter(pk__in=run_ids, status=Run.Status.RUNNING)
    # Replaced processes belong to earlier launches: only the current ones count.
    current = RunProcess.objects.filter(run_id__in=run_ids, replaced_at__isnull=True)
    may_run = current.exclude(alive=False).values("run_id")
    ended = running.filter(pk__in=current.values("run_id")).exclude(pk__in=may_run)
    ids = set(ended.values_list("pk", flat=True))
    return Run.objects.filter(pk__in=ids).update(
        status=Run.Status.FINISHED, ended_at=now or timezone.now()
    )


def run_capture_settings_save(*, run: Run, settings_: dict[str, Any]) -> Run:
    """Remember the "Capture all" settings of a run for its next dialog."""
    run.capture_settings = settings_
    run.save(update_fields=["capture_settings"])
    return run


def local_host_ensure() -> Host | None:
    """The "local" host a newcomer can capture with at once (with FLAMEDECK_LOCAL_HOST).

    Run by bootstrap and after every migrate. Every local-transport host gets the
    exec prefix and py-spy path bootstrap sets (none, the bundled py-spy): one edited
    before the web locked them would otherwise keep running its own on this server.
    Both the reset and the creation are recorded as `via="bootstrap"`, by no user.
    """
    py_spy = _bundled_py_spy()
    with recording_as(None, "bootstrap"):
        tampered = Host.objects.filter(transport=Host.Transport.LOCAL).exclude(
            exec_prefix="", py_spy=py_spy
        )
        for host in tampered:
            host.exec_prefix, host.py_spy = "", py_spy
            host.save(update_fields=["exec_prefix", "py_spy", "updated_at"])
        if not settings.FLAMEDECK_LOCAL_HOST:
            return None
        host, _ = Host.objects.get_or_create(
            name="local",
            defaults={
                "transport": Host.Transport.LOCAL,
                "py_spy": py_spy,
                "notes": "This machine (where the worker runs).",
            },
        )
    return host


def _bundled_py_spy() -> str:
    # py-spy is a dependency, so the venv has it even when .venv/bin is not on PATH.
    bundled = Path(sys.executable).with_name("py-spy")
    return shutil.which("py-spy") or (str(bundled) if bundled.exists() else "py-spy")
