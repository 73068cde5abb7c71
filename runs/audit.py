"""The host change log: every save or delete of a Host that changes a command field
(or its name) leaves a HostChange row, whichever path made it.

Pages, the API and the admin save through `runs.services.host_save`, which says who
and how (`recording_as`). Anything else (a shell, a management command, a fixture)
is recorded too, as `via="shell"` with no user. Deleting a host keeps its history:
the rows keep the host's name and lose only the link.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db.models.signals import post_delete, post_save, pre_save

from .models import Host, HostChange

# Changes to these are recorded in HostChange and shown on the host page.
RECORDED_FIELDS = ("name", *Host.COMMAND_FIELDS)
_actor: ContextVar[tuple[object, str] | None] = ContextVar("host_change_actor", default=None)


@contextmanager
def recording_as(user, via: str) -> Iterator[None]:
    """Host saves and deletes inside this block are recorded as made by `user` via `via`."""
    token = _actor.set((user, via))
    try:
        yield
    finally:
        _actor.reset(token)


def host_changes(before: Host | None, after: Host, fields=Host.EDITABLE_FIELDS) -> dict:
    """{field: [before, after]} for fields that differ; on creation, the fields set."""
    if before is None:
        return {f: [None, getattr(after, f)] for f in fields if getattr(after, f) not in ("", None)}
    return {
        f: [getattr(before, f), getattr(after, f)]
        for f in fields
        if getattr(before, f) != getattr(after, f)
    }


def _record(host: Host | None, name: str, changes: dict) -> None:
    user, via = _actor.get() or (None, "shell")
    HostChange.objects.create(host=host, host_name=name, changed_by=user, changes=changes, via=via)


def _before_save(sender, instance: Host, raw: bool, update_fields=None, **kwargs) -> None:
    if update_fields is not None and not set(update_fields) & set(RECORDED_FIELDS):
        instance._recorded_changes = {}  # e.g. the last check's result
        return
    before = Host.objects.filter(pk=instance.pk).first() if instance.pk else None
    instance._recorded_changes = host_changes(before, instance, RECORDED_FIELDS)


def _after_save(sender, instance: Host, **kwargs) -> None:
    changes = instance.__dict__.pop("_recorded_changes", None)
    if changes:
        _record(instance, instance.name, changes)


def _after_delete(sender, instance: Host, **kwargs) -> None:
    gone = {f: [getattr(instance, f), None] for f in RECORDED_FIELDS}
    _record(None, instance.name, {f: pair for f, pair in gone.items() if pair[0] not in ("", None)})


def connect() -> None:
    pre_save.connect(_before_save, sender=Host, dispatch_uid="host_change_before")
    post_save.connect(_after_save, sender=Host, dispatch_uid="host_change_after")
    post_delete.connect(_after_delete, sender=Host, dispatch_uid="host_change_delete")
