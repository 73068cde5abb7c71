"""The storage every capture artifact goes through (FLAMEDECK_ARTIFACTS).

Capture FileFields take `artifact_storage` as their (callable) storage, so raw samples,
logs, flamegraph trees, thread tables and exports are read and written through
`STORAGES["artifacts"]`: the local disk, the database or S3-compatible object storage.
"""

import hashlib
import uuid

from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.functional import LazyObject, empty


class _ArtifactStorage(LazyObject):
    def _setup(self) -> None:
        self._wrapped = storages["artifacts"]


_storage = _ArtifactStorage()


def artifact_storage() -> Storage:
    return _storage  # type: ignore[return-value]


@receiver(setting_changed)
def _forget_storage(*, setting: str, **kwargs) -> None:
    # Tests switch backends with override_settings(STORAGES=...).
    if setting in ("STORAGES", "MEDIA_ROOT"):
        _storage._wrapped = empty


ARTIFACT_FIELDS = ("raw_file", "log_file", "flamegraph_file", "threads_file", "export_file")


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
    from .models import Capture

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


def artifacts_preflight(*, storage: Storage) -> str | None:
    """Why `storage` cannot keep artifacts, in one line, or None: S3's bucket is looked
    up (a refused key and a missing bucket are told apart), then a small probe file is
    written, read back and deleted."""
    try:
        if hasattr(storage, "bucket_name"):
            storage.connection.meta.client.head_bucket(Bucket=storage.bucket_name)
        probe = storage.save(f"preflight/{uuid.uuid4().hex}", ContentFile(b"flamedeck"))
        try:
            with storage.open(probe, "rb") as fh:
                if fh.read() != b"flamedeck":
                    return "a probe file read back different bytes"
        finally:
            storage.delete(probe)
    except Exception as exc:  # noqa: BLE001 — botocore's errors share no base with OSError
        return _storage_problem(exc, getattr(storage, "bucket_name", ""))
    return None


def _storage_problem(exc: Exception, bucket: str) -> str:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code in _REFUSED_KEY or status == 403:
        return (
            f"the S3 server refused the access key ({code or status}): check "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and that the key may read and "
            f"write bucket {bucket!r}"
        )
    if code in ("NoSuchBucket", "404") or status == 404:
        return f"bucket {bucket!r} does not exist on the S3 server: create it first"
    line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"cannot reach it: {line}"


_REFUSED_KEY = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403"}
