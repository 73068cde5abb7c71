"""Moving every capture's files from one artifact storage to another
(`manage.py move_artifacts`): copy, verify size and SHA-256, then delete the source."""

import hashlib

from django.core.files.storage import Storage

from profiles.models import Capture
from profiles.storage.artifacts import ARTIFACT_FIELDS


def storage_for(spec: str) -> Storage:
    """A storage for a FLAMEDECK_ARTIFACTS value (filesystem, database, s3://…)."""
    from django.conf import settings
    from django.utils.module_loading import import_string

    from config.env import artifacts_storage

    config = artifacts_storage(spec, str(settings.MEDIA_ROOT))
    return import_string(config["BACKEND"])(**config.get("OPTIONS", {}))


class MoveFailed(Exception):
    """A copy that did not read back as its source: the source is kept."""


def artifacts_move(*, source: Storage, destination: Storage, keep: bool = False) -> dict[str, int]:
    """Copy every capture's files from `source` to `destination` under the same names,
    then delete them from `source` (unless `keep`).

    A source file is deleted only once the destination holds the same size and SHA-256
    (read back after the copy). A file already at the destination counts as done only
    when it matches too; one that does not (a copy cut off mid-file by an interrupted
    move) is copied again. So a move can be stopped anywhere and run again: it resumes,
    and never deletes the only good copy."""
    counts = {"moved": 0, "already_there": 0, "recopied": 0, "missing": 0}
    for capture in Capture.objects.only(*ARTIFACT_FIELDS).iterator():
        for name in filter(None, (getattr(capture, f).name for f in ARTIFACT_FIELDS)):
            counts[_move_one(name, source, destination, keep)] += 1
    return counts


def file_digest(storage: Storage, name: str) -> tuple[int, str]:
    """(size, SHA-256 hex) of a stored file, read in blocks."""
    digest, size = hashlib.sha256(), 0
    with storage.open(name, "rb") as fh:
        while block := fh.read(MOVE_BLOCK):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


MOVE_BLOCK = 1024 * 1024


def _move_one(name: str, source: Storage, destination: Storage, keep: bool) -> str:
    if not source.exists(name):
        return "already_there" if destination.exists(name) else "missing"
    wanted = file_digest(source, name)
    outcome = "moved"
    if destination.exists(name):
        if file_digest(destination, name) == wanted:
            outcome = "already_there"
        else:
            destination.delete(name)  # a partial or stale copy, never the only one
            outcome = "recopied"
    if outcome != "already_there":
        _copy(name, source, destination, wanted)
    if not keep:
        source.delete(name)
    return outcome


def _copy(name: str, source: Storage, destination: Storage, wanted: tuple[int, str]) -> None:
    with source.open(name, "rb") as fh:
        saved = destination.save(name, fh)
    if saved != name:
        raise MoveFailed(f"{name}: the destination stored it as {saved}; the source is kept")
    got = file_digest(destination, name)
    if got != wanted:
        raise MoveFailed(
            f"{name}: the copy reads back as {got[0]} bytes (SHA-256 {got[1][:12]}…), the "
            f"source is {wanted[0]} bytes ({wanted[1][:12]}…); the source is kept"
        )
