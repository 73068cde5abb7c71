"""Writes and outside-world actions for hosts, runs and their processes."""

import shutil
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from runs import remote

from .models import Host, Run, RunProcess, Tag


def host_target(host: Host) -> remote.Target:
    """The remote-execution view of a host (the one place Host meets the seam)."""
    return remote.Target(
        transport=host.transport,
        address=host.address,
        port=host.port,
        username=host.username,
        exec_prefix=host.exec_prefix,
        py_spy=host.py_spy or "py-spy",
        sudo=host.sudo,
        ssh_config=settings.FLAMEDECK_SSH_CONFIG,
        known_hosts=settings.FLAMEDECK_KNOWN_HOSTS,
    )


def host_save(*, host: Host) -> Host:
    host.full_clean()
    host.save()
    return host


def host_check(*, host: Host) -> dict[str, Any]:
    """Test the connection: ssh, py-spy and its version, ptrace, Python processes.

    Failures come back inside the result (`cause`, `error`), never raised.
    """
    result = remote.check_host(host_target(host)).as_dict()
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


def run_process_add(*, run: Run, host: Host, pid: int, role: str = "") -> RunProcess:
    process, _ = RunProcess.objects.update_or_create(
        run=run, host=host, pid=pid, defaults={"role": role}
    )
    return process


def local_host_ensure() -> Host:
    """The "local" host a newcomer can capture with at once."""
    host, _ = Host.objects.get_or_create(
        name="local",
        defaults={
            "transport": Host.Transport.LOCAL,
            "py_spy": _bundled_py_spy(),
            "notes": "This machine (where the worker runs).",
        },
    )
    return host


def _bundled_py_spy() -> str:
    # py-spy is a dependency, so the venv has it even when .venv/bin is not on PATH.
    bundled = Path(sys.executable).with_name("py-spy")
    return shutil.which("py-spy") or (str(bundled) if bundled.exists() else "py-spy")
