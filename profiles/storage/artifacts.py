"""The storage every capture artifact goes through (FLAMEDECK_ARTIFACTS).

Capture FileFields take `artifact_storage` as their (callable) storage, so raw samples,
logs, flamegraph trees, thread tables and exports are read and written through
`STORAGES["artifacts"]`: the local disk, the database or S3-compatible object storage.
"""

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


ARTIFACT_FIELDS = (
    "raw_file", "log_file", "flamegraph_file", "threads_file", "export_file", "time_file",
)  # fmt: skip


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
